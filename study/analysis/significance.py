"""How sure a difference of test BLEU is: over test sentences and over training seeds.

``paired_bootstrap``: paired bootstrap resampling over test sentences (Koehn 2004) for one system
against a baseline.

The p-value is sacreBLEU's ``--paired-bs`` test, computed the same way (same resampled sentence
indices for a given seed, same statistic); the same resamples also give the 95% percentile
interval of the BLEU difference, which sacreBLEU does not report. That interval covers the
test set's sampling variation only, not the variation between training seeds: with two seeds a
table's t-interval of the mean is the wider and more honest one for seeds, this one says how
much the test set alone could move the difference.
Built on sacreBLEU's sufficient statistics (the internals its own significance module uses).

``seed_interval``: the 95% Welch interval of the difference of two rows' mean test BLEU over their
seeds, each seed an independent training run: how much the difference could move with other
training seeds, which the bootstrap leaves out. Its degrees of freedom are Welch-Satterthwaite's,
fractional, as in R's ``t.test`` and scipy. ``welch_contrast`` adds the test's p-value, and its
``SeedTest`` the intervals at other levels and the equivalence test; ``single_run_interval`` (the
interval one more run of each row falls in), ``holm`` and ``holm_levels`` complete the claims protocol
(``study.analysis.claims``; its power in ``study.analysis.power``).

``contrast_seed_interval`` and ``contrast_bootstrap_stats`` do the same for a weighted sum of
several rows' BLEU (a contrast), such as how far a combined ablation's drop departs from the sum
of its single ablations' drops (``study.analysis.additivity``): the two-row difference is the contrast
with weights +1 and -1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

SEED = 12345  # sacreBLEU's default SACREBLEU_SEED: the same resamples, so the same p-values
ALPHA = 0.05  # two-sided 95% intervals and tests


def t_quantile(probability: float, df: float) -> float:
    """Student's t quantile for ``df`` degrees of freedom, fractional ones included (the
    Welch-Satterthwaite df as R's ``t.test`` and scipy use it); NaN below 1e-9 df."""
    # scipy (a dependency of MLflow as well as ours) loads only when an interval is computed
    from scipy.stats import t

    return float(t.ppf(probability, df)) if df > 1e-9 else math.nan


def t95(df: float) -> float:
    """The two-sided 95% critical value for ``df`` degrees of freedom (fractional: not rounded)."""
    return t_quantile(1 - ALPHA / 2, df)


@dataclass(frozen=True)
class PairedBootstrap:
    delta: float  # the system's corpus BLEU minus the baseline's (a contrast's weighted sum), on the whole test set
    p_value: float
    ci_low: float
    ci_high: float


def paired_bootstrap(system: list[str], baseline: list[str], references: list[str], samples: int = 1000,
                     seed: int = SEED) -> PairedBootstrap:
    if not len(system) == len(baseline) == len(references):
        raise ValueError("system, baseline and references must have one line per test sentence each")
    return paired_bootstrap_stats(sentence_stats(system, references), sentence_stats(baseline, references),
                                  samples, seed)


def sentence_stats(hypotheses: list[str], references: list[str]) -> np.ndarray:
    """sacreBLEU's sufficient statistics of every sentence (N, 10): the expensive part (n-gram
    counting), so they are computed once per translation: a table, its additivity table and its
    claims read the same seeds' files. Read-only: callers share it."""
    return _sentence_stats(tuple(hypotheses), tuple(references))


@lru_cache(maxsize=512)
def _sentence_stats(hypotheses: tuple[str, ...], references: tuple[str, ...]) -> np.ndarray:
    stats = np.array(reference_scorer(references)._extract_corpus_statistics(hypotheses, None), dtype="float32")
    stats.flags.writeable = False
    return stats


@lru_cache(maxsize=8)
def reference_scorer(references: tuple[str, ...], **options):
    """A sacreBLEU ``BLEU(**options)`` holding the test set's references already tokenised and counted
    (sacreBLEU's reference cache), which every translation of that test set is then scored against:
    counting the references again for every file cost as much as scoring the files."""
    # sacreBLEU loads when BLEU is scored
    from sacrebleu.metrics import BLEU

    return BLEU(references=[list(references)], **options)


def paired_bootstrap_stats(system: np.ndarray, baseline: np.ndarray, samples: int = 1000,
                           seed: int = SEED) -> PairedBootstrap:
    """The test on per-sentence statistics of two systems over the same sentences."""
    # sacreBLEU loads when BLEU is scored
    from sacrebleu.metrics import BLEU

    metric = BLEU()
    delta = metric._compute_score_from_stats(system.sum(0)).score - metric._compute_score_from_stats(baseline.sum(0)).score
    if abs(delta) < 1e-9:
        # sacreBLEU's (c + 1) / (n + 1) would call two equal systems significantly different
        return PairedBootstrap(0.0, 1.0, 0.0, 0.0)
    return contrast_bootstrap_stats([system, baseline], [1.0, -1.0], samples, seed)


def resampled_bleu(stats: np.ndarray, samples: int = 1000, seed: int = SEED) -> np.ndarray:
    """Corpus BLEU of one system on each of sacreBLEU's resamples of its sentences (``samples``,)."""
    # sacreBLEU loads when BLEU is scored
    from sacrebleu.metrics import BLEU

    metric = BLEU()
    counts = _resample_counts(len(stats), samples, seed)  # how often each sentence is drawn, per resample
    return np.array([metric._compute_score_from_stats(row).score for row in counts @ stats])


def _bootstrap_result(observed: float, resampled: np.ndarray, samples: int) -> PairedBootstrap:
    """sacreBLEU's p-value (how often a resample strays from the resamples' mean by more than the
    observed value) and the 95% percentile interval of the resampled statistic."""
    spread = np.abs(resampled)
    exceed = int(np.sum(spread - spread.mean() > abs(observed)))
    low, high = np.percentile(resampled, [2.5, 97.5])
    return PairedBootstrap(observed, (exceed + 1) / (samples + 1), float(low), float(high))


def contrast_bootstrap_stats(systems: list[np.ndarray], weights: list[float], samples: int = 1000,
                             seed: int = SEED) -> PairedBootstrap:
    """The paired bootstrap of ``sum(weight * corpus BLEU)`` over systems that translated the same
    sentences: each resample draws the same sentences for every system. ``delta`` is the contrast
    on the whole test set."""
    # sacreBLEU loads when BLEU is scored
    from sacrebleu.metrics import BLEU

    if len(systems) != len(weights) or len({len(stats) for stats in systems}) != 1:
        raise ValueError("a contrast needs one weight per system and the same sentences for every system")
    metric = BLEU()
    observed = sum(w * metric._compute_score_from_stats(stats.sum(0)).score for w, stats in zip(weights, systems))
    contrast = sum(w * resampled_bleu(stats, samples, seed) for w, stats in zip(weights, systems))
    if abs(observed) < 1e-9 and np.ptp(contrast) < 1e-9:
        # the systems cancel on every resample; sacreBLEU's (c + 1) / (n + 1) would call that significant
        return PairedBootstrap(0.0, 1.0, 0.0, 0.0)
    return _bootstrap_result(observed, contrast, samples)


@lru_cache(maxsize=8)
def _resample_counts(sentences: int, samples: int, seed: int) -> np.ndarray:
    """(samples, sentences) draw counts of sacreBLEU's resamples: the same indices it draws for a seed."""
    indices = np.random.default_rng(seed).choice(sentences, size=(samples, sentences), replace=True)
    return np.stack([np.bincount(row, minlength=sentences) for row in indices]).astype("float32")


@dataclass(frozen=True)
class SeedTest:
    """Welch's test of a contrast of rows' mean scores over their seeds (a difference of two rows
    is the contrast +1, -1): the estimate, its 95% interval, standard error, Welch-Satterthwaite
    degrees of freedom (fractional) and the two-sided p-value of "the contrast is 0"."""

    estimate: float
    low: float
    high: float
    se: float
    df: float
    p_value: float

    def interval(self, level: float) -> tuple[float, float]:
        """The two-sided interval of confidence ``1 - level`` (the claims' Holm-adjusted intervals)."""
        if math.isnan(self.se) or self.se == 0:
            return self.low, self.high
        half = t_quantile(1 - level / 2, self.df) * self.se
        return self.estimate - half, self.estimate + half

    def equivalence_p(self, margin: float) -> float:
        """The p-value of the two one-sided tests (TOST) of "the contrast lies within +-margin": the larger
        of the one-sided p-values against -margin and against +margin (NaN without a standard error)."""
        if math.isnan(self.se):
            return math.nan
        if self.se == 0:
            return 0.0 if abs(self.estimate) < margin else 1.0
        # scipy loads only when a test is computed
        from scipy.stats import t

        above_low = float(t.sf((self.estimate + margin) / self.se, self.df))
        below_high = float(t.cdf((self.estimate - margin) / self.se, self.df))
        return max(above_low, below_high)


def seed_interval(mean: float, std: float, n: int, reference_mean: float, reference_std: float,
                  reference_n: int) -> tuple[float, float]:
    """The 95% Welch interval of ``mean - reference_mean``, each row's mean and sample standard
    deviation taken over its seeds (``n`` and ``reference_n`` of them); NaN when either row has
    fewer than 2 seeds. Welch's, not a paired test by seed number: two rows' seed 1 share a
    seed, not a training run. The same interval as scipy's
    ``ttest_ind(a, b, equal_var=False).confidence_interval()``."""
    return contrast_seed_interval([(1.0, mean, std, n), (-1.0, reference_mean, reference_std, reference_n)])


def contrast_seed_interval(terms: list[tuple[float, float, float, int]]) -> tuple[float, float]:
    """The 95% interval of ``sum(weight * mean)`` over rows given as (weight, mean of the seeds, their
    sample standard deviation, seeds): ``welch_contrast``'s interval."""
    test = welch_contrast(terms)
    return test.low, test.high


def welch_contrast(terms: list[tuple[float, float, float, int]]) -> SeedTest:
    """Welch's test of ``sum(weight * mean)`` over rows given as (weight, mean of the seeds, their
    sample standard deviation, seeds), the rows' seeds independent training runs: the variance
    sum(weight^2 std^2 / n) with Welch-Satterthwaite degrees of freedom, not rounded. All NaN when a
    row has fewer than 2 seeds."""
    if any(n < 2 or math.isnan(mean) or math.isnan(std) for _, mean, std, n in terms):
        return SeedTest(math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)
    variances = [weight ** 2 * std ** 2 / n for weight, _, std, n in terms]
    estimate = sum(weight * mean for weight, mean, _, _ in terms)
    total = sum(variances)
    if total == 0:  # every seed of every row scored the same: no spread to test against
        return SeedTest(estimate, estimate, estimate, 0.0, math.inf, 1.0 if estimate == 0 else 0.0)
    df = welch_df(variances, [n for _, _, _, n in terms])
    se = math.sqrt(total)
    half = t95(df) * se
    # scipy loads only when a test is computed
    from scipy.stats import t

    p_value = float(2 * t.sf(abs(estimate) / se, df))
    return SeedTest(estimate, estimate - half, estimate + half, se, df, p_value)


def welch_df(variances: list[float], seeds: list[int]) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of variances of means (each ``std^2 / n``
    times its weight squared) estimated from ``n - 1`` degrees of freedom each."""
    terms = [v ** 2 / (n - 1) for v, n in zip(variances, seeds) if v > 0]
    return sum(variances) ** 2 / sum(terms) if terms else math.inf


def single_run_interval(terms: list[tuple[float, float, float, int]], level: float) -> tuple[float, float]:
    """The interval, of confidence ``1 - level``, in which one more training run of each row would put the
    contrast ``sum(weight * score)``, rows given as (weight, mean of the seeds, their sample standard
    deviation, seeds): a prediction interval, variance ``sum(weight^2 std^2 (1 + 1/n))`` with
    Welch-Satterthwaite degrees of freedom. A paper's value comes from one run of each row; this is the
    interval it is compared with, our seeds' spread standing in for that run's noise. NaN under 2 seeds."""
    if any(n < 2 or math.isnan(mean) or math.isnan(std) for _, mean, std, n in terms):
        return math.nan, math.nan
    variances = [weight ** 2 * std ** 2 * (1 + 1 / n) for weight, _, std, n in terms]
    estimate = sum(weight * mean for weight, mean, _, _ in terms)
    if sum(variances) == 0:
        return estimate, estimate
    half = t_quantile(1 - level / 2, welch_df(variances, [n for _, _, _, n in terms])) * math.sqrt(sum(variances))
    return estimate - half, estimate + half


def holm_levels(p_values: list[float], alpha: float = ALPHA) -> list[float]:
    """The level each p-value of a family is compared with at its step of Holm's procedure,
    ``alpha / (m - rank + 1)`` for the rank-th smallest of m (NaN stays NaN and is not counted): the
    level of the claim's Holm-adjusted interval, its power and its minimum detectable effect."""
    ranked = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    levels = [math.nan] * len(p_values)
    for rank, (_, index) in enumerate(ranked):
        levels[index] = alpha / (len(ranked) - rank)
    return levels


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment of a family's p-values (NaN stays NaN and is not counted):
    reject where the adjusted p is below 5% and the family's error rate stays at 5%."""
    ranked = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    adjusted = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(ranked):
        running = max(running, min(1.0, (len(ranked) - rank) * p))
        adjusted[index] = running
    return adjusted


def slope_weights(xs: list[float]) -> dict[float, float]:
    """The weights that turn values at ``xs`` into the slope of their least-squares line,
    ``(x - mean x) / sum (x - mean x)^2``: a trend is a contrast of the rows' means like a difference,
    so it gets the same seed and bootstrap intervals (``contrast_seed_interval``, ``contrast_bootstrap_stats``)."""
    if len(set(xs)) < 2:
        raise ValueError("a slope needs two or more distinct x values")
    centre = sum(xs) / len(xs)
    spread = sum((x - centre) ** 2 for x in xs)
    return {x: (x - centre) / spread for x in xs}


def nan_bootstrap() -> PairedBootstrap:
    return PairedBootstrap(math.nan, math.nan, math.nan, math.nan)
