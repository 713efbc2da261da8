"""The power of a claim's test as the claims protocol runs it: Welch's test of a contrast of rows' mean
scores (or the two one-sided tests of a no-difference claim), at the level the claim is tested at
(its Holm step, ``study.analysis.significance.holm_levels``).

Welch's test estimates both its standard error and its degrees of freedom from the seeds' spread, so
with 2-5 seeds a row neither a normal nor a noncentral t power with the true degrees of freedom is
right: at the effect those call 80% the test rejects about 70% of the time with 3 seeds a row. Here
the power is computed for the test itself: given the rows' sample variances, the contrast of means is
normal and the test rejects where it lies beyond the critical value times the estimated standard
error, a probability in closed form; that probability is averaged over the sample variances' own
distribution (each row's ``std^2 chi2(n-1) / (n-1)``), at ``DRAWS`` fixed scrambled-Sobol points, so
a table gets the same numbers on every machine (to about 0.005 of the exact integral).

``welch_power`` is that power against a true contrast, ``minimum_detectable_effect`` the contrast it
reaches 80% at, ``seeds_needed`` the seeds per row at which it reaches 80% for a given contrast, rows
assumed to keep their spread. ``equivalence_power`` and ``equivalence_seeds_needed`` are the same for
the two one-sided tests of a no-difference claim when the true contrast is 0. A spread estimated from
2-4 seeds is itself uncertain, so ``seeds_needed_range`` also gives the seeds needed at both ends of
the 95% chi-square interval of the rows' pooled spread.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np

POWER = 0.80  # the power the minimum detectable effect and the seeds needed are computed for
MOST_SEEDS = 100  # seeds per row beyond which "seeds needed" is shown as "> 100"
DRAWS = 4096  # quasi-random draws of the rows' sample variances
DRAW_SEED = 20261205  # the Sobol scrambling's seed: fixed, so every table computes the same powers

Row = tuple[float, float, int]  # (weight in the contrast, true standard deviation of a seed's score, seeds)


@lru_cache(maxsize=256)
def _variance_ratios(seeds: tuple[int, ...]) -> np.ndarray:
    """(DRAWS, rows) draws of s^2 / sigma^2 = chi2(n - 1) / (n - 1) for each row's seeds."""
    # scipy (a dependency of MLflow as well as ours) loads only when a power is computed
    from scipy.stats import chi2, qmc

    uniform = qmc.Sobol(d=len(seeds), scramble=True, seed=DRAW_SEED).random(DRAWS)
    ratios = np.stack([chi2.ppf(uniform[:, i], n - 1) / (n - 1) for i, n in enumerate(seeds)], axis=1)
    ratios.flags.writeable = False
    return ratios


def _draws(rows: list[Row]) -> tuple[np.ndarray, np.ndarray, float]:
    """(estimated standard error, estimated Welch-Satterthwaite df) per draw, and the true standard error."""
    seeds = np.array([n for _, _, n in rows], dtype=float)
    true_variances = np.array([w ** 2 * std ** 2 / n for w, std, n in rows])
    variances = _variance_ratios(tuple(int(n) for _, _, n in rows)) * true_variances
    total = variances.sum(axis=1)
    spread = (variances ** 2 / (seeds - 1)).sum(axis=1)
    df = np.divide(total ** 2, spread, out=np.full_like(total, np.inf), where=spread > 0)
    return np.sqrt(total), df, math.sqrt(true_variances.sum())


def welch_power(effect: float, rows: list[Row], level: float) -> float:
    """The probability that Welch's two-sided test at ``level`` rejects "the contrast is 0" when it is
    ``effect``, the rows' seeds drawn with their standard deviations."""
    # scipy loads only when a power is computed
    from scipy.stats import norm, t

    se_hat, df, se = _draws(rows)
    if se == 0:
        return 1.0 if effect else level
    reach = t.ppf(1 - level / 2, df) * se_hat
    return float(np.mean(norm.cdf((abs(effect) - reach) / se) + norm.cdf((-abs(effect) - reach) / se)))


def minimum_detectable_effect(rows: list[Row], level: float, target: float = POWER) -> float:
    """The smallest true contrast Welch's test at ``level`` detects with probability ``target``; NaN for a
    row with under 2 seeds or no spread estimate."""
    # scipy loads only when a power is computed
    from scipy.optimize import brentq

    if any(n < 2 or math.isnan(std) for _, std, n in rows):
        return math.nan
    se = math.sqrt(sum(w ** 2 * std ** 2 / n for w, std, n in rows))
    if se == 0:
        return 0.0
    high = 1.0
    while welch_power(high * se, rows, level) < target:
        high *= 2
    return float(brentq(lambda shift: welch_power(shift * se, rows, level) - target, 0.0, high, xtol=1e-9)) * se


def equivalence_power(margin: float, rows: list[Row], level: float) -> float:
    """The probability that the two one-sided tests at ``level`` against -``margin`` and +``margin`` both
    reject when the true contrast is 0: |contrast| + t(1 - level, df) se < margin."""
    # scipy loads only when a power is computed
    from scipy.stats import norm, t

    se_hat, df, se = _draws(rows)
    if se == 0:
        return 1.0
    room = np.maximum(margin - t.ppf(1 - level, df) * se_hat, 0.0)
    return float(np.mean(2 * norm.cdf(room / se) - 1))


def _smallest_seeds(reaches: Callable[[int], bool], most: int = MOST_SEEDS) -> int | None:
    """The fewest seeds from 2 to ``most`` at which ``reaches`` holds (it holds for every larger count once
    it does: power grows with seeds), by bisection; None beyond ``most``."""
    if not reaches(most):
        return None
    low, high = 1, most  # reaches(high) holds; reaches(low) is taken not to
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


def seeds_needed(spreads: list[tuple[float, float]], effect: float, level: float) -> int | None:
    """Seeds per row at which Welch's test at ``level`` detects a true contrast of ``effect`` with 80%
    power, rows given as (weight, standard deviation) and keeping that spread; None beyond 100."""
    if not effect or any(math.isnan(std) for _, std in spreads):
        return None
    return _smallest_seeds(lambda n: welch_power(effect, [(w, std, n) for w, std in spreads], level) >= POWER)


def equivalence_seeds_needed(spreads: list[tuple[float, float]], margin: float, level: float) -> int | None:
    """Seeds per row at which the two one-sided tests at ``level`` establish a no-difference claim at
    ``margin`` with 80% power when the true contrast is 0; None beyond 100."""
    if not margin or any(math.isnan(std) for _, std in spreads):
        return None
    return _smallest_seeds(lambda n: equivalence_power(margin, [(w, std, n) for w, std in spreads], level) >= POWER)


def spread_factors(df: int) -> tuple[float, float]:
    """The 95% interval of a standard deviation estimated from ``df`` degrees of freedom, as factors of
    the estimate: (sqrt(df / chi2(0.975, df)), sqrt(df / chi2(0.025, df)))."""
    # scipy loads only when a power is computed
    from scipy.stats import chi2

    return math.sqrt(df / chi2.ppf(0.975, df)), math.sqrt(df / chi2.ppf(0.025, df))


def seeds_needed_range(rows: list[Row], needed: Callable[[list[tuple[float, float]]], int | None]
                       ) -> tuple[int | None, int | None, int | None]:
    """(seeds needed at the 95% interval's low spread, at the estimated spread, at its high spread), rows
    given as (weight, sample standard deviation, seeds it has) and ``needed`` mapping rows as (weight,
    spread) to their seeds needed (``seeds_needed`` or ``equivalence_seeds_needed`` at a level): every
    row's spread scaled alike by the chi-square interval of the pooled variance, whose degrees of freedom
    are the rows' seeds less one."""
    low, high = spread_factors(sum(n - 1 for _, _, n in rows))
    at = [needed([(weight, std * factor) for weight, std, _ in rows]) for factor in (low, 1.0, high)]
    return at[0], at[1], at[2]
