"""Is a validation curve on a plateau? The one test both the trainer's stopping rule
(``train.early_stop: plateau``) and the tables' † mark use (``study.analysis.plateau``).

Early stopping with patience p ends a trial p epochs after its best one, so "the best epoch came
before the last" holds by construction and says nothing about convergence. This test asks the
curve instead: over the last ``WINDOW`` validation scores (the study's metric, oriented so that
higher is better), is the least-squares slope significantly above 0? A one-sided t test on the
slope at 5%, with ``WINDOW - 2`` degrees of freedom:

    slope b = sum (x - mean x)(y - mean y) / sum (x - mean x)^2,
    se(b)   = sqrt(sum residual^2 / (k - 2) / sum (x - mean x)^2),
    on a plateau  <=>  P(T_{k-2} > b / se(b)) >= 0.05  or  b * (k - 1) < 0.1.

The second clause is a floor on the size of the rise: a curve whose fitted line climbs less than a
tenth of a point (``MIN_RISE``) over the whole window is on a plateau however significant its slope.
Without it, a run whose learning rate has been annealed to its minimum, whose scores then move in
the third decimal, was called still improving at random: a slope of 0.001 points an epoch with
residuals of 0.0005 is "significant". No curve of the committed Multi30k studies falls under the
floor (the smallest significant rise among them is 0.38 points), so none of their judgements moved.

A trial that passes is *converged* in the tables and the claims; one that fails was *trained to
early stopping* (or to its budget) while its scores still rose. A trial with fewer than
``MIN_EPOCHS`` scores cannot be judged (None): the tables then fall back to the best-epoch rule.
"""

from __future__ import annotations

import math

WINDOW = 10  # the last validation scores the slope is fitted to
MIN_EPOCHS = 5  # fewer scores than this: no test
ALPHA = 0.05  # one-sided
MIN_RISE = 0.1  # a fitted rise over the window below this many points of the metric is no rise


def slope_test(scores: list[float]) -> tuple[float, float]:
    """The least-squares slope of the last ``WINDOW`` scores and the one-sided p-value of "the slope
    is above 0"; (NaN, NaN) with fewer than ``MIN_EPOCHS`` scores."""
    tail = _window(scores)
    k = len(tail)
    if k < MIN_EPOCHS:
        return math.nan, math.nan
    xs = range(k)
    x_mean, y_mean = (k - 1) / 2, sum(tail) / k
    sxx = sum((x - x_mean) ** 2 for x in xs)
    slope = sum((x - x_mean) * (y - y_mean) for x, y in zip(xs, tail)) / sxx
    residual = sum((y - y_mean - slope * (x - x_mean)) ** 2 for x, y in zip(xs, tail))
    se = math.sqrt(residual / (k - 2) / sxx)
    if se == 0:  # the scores lie on a line: rising is significant, flat or falling is not
        return slope, 0.0 if slope > 0 else 1.0
    # scipy (a dependency of MLflow as well as ours) loads only when a curve is tested
    from scipy.stats import t

    return slope, float(t.sf(slope / se, k - 2))


def on_plateau(scores: list[float]) -> bool | None:
    """True when the last ``WINDOW`` scores do not rise significantly, or rise by less than ``MIN_RISE``
    over the window; None when there are too few."""
    slope, p_value = slope_test(scores)
    if math.isnan(p_value):
        return None
    return p_value >= ALPHA or slope * (len(_window(scores)) - 1) < MIN_RISE


def earliest_stop(min_epochs: int, max_epochs: int) -> int:
    """The first epoch at which the stopping rule (``train.early_stop: plateau``) can end a run held back
    until ``min_epochs``: the test needs ``MIN_EPOCHS`` scores, and the cap ends the run at ``max_epochs``."""
    return min(max(min_epochs, MIN_EPOCHS), max_epochs)


def _window(scores: list[float]) -> list[float]:
    """The last ``WINDOW`` finite scores (a diverged epoch is no point)."""
    return [float(s) for s in scores if s is not None and math.isfinite(float(s))][-WINDOW:]
