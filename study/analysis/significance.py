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
training seeds, which the bootstrap leaves out.

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
# two-sided 95% Student t critical values by degrees of freedom (1.96 beyond 30)
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
        20: 2.086, 25: 2.060, 30: 2.042}


def t95(df: float) -> float:
    """The critical value for ``df`` degrees of freedom, rounded down to a tabled one (a wider
    interval, never a narrower one)."""
    df += 1e-9  # a Welch-Satterthwaite df that is whole up to rounding (2.9999999999999996) counts as whole
    if df < 1:
        return math.nan
    if df > 30:
        return 1.96
    return _T95[max(k for k in _T95 if k <= df)]


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
    counting), so tables compute them once per translation file."""
    # sacreBLEU loads when BLEU is scored
    from sacrebleu.metrics import BLEU

    return np.array(BLEU()._extract_corpus_statistics(hypotheses, [references]), dtype="float32")


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


def seed_interval(mean: float, std: float, n: int, reference_mean: float, reference_std: float,
                  reference_n: int) -> tuple[float, float]:
    """The 95% Welch interval of ``mean - reference_mean``, each row's mean and sample standard
    deviation taken over its seeds (``n`` and ``reference_n`` of them); NaN when either row has
    fewer than 2 seeds. Welch's, not a paired test by seed number: two rows' seed 1 share a
    seed, not a training run. The Welch-Satterthwaite degrees of freedom are rounded down."""
    return contrast_seed_interval([(1.0, mean, std, n), (-1.0, reference_mean, reference_std, reference_n)])


def contrast_seed_interval(terms: list[tuple[float, float, float, int]]) -> tuple[float, float]:
    """The 95% interval of ``sum(weight * mean)`` over rows given as (weight, mean of the seeds, their
    sample standard deviation, seeds), the rows' seeds independent training runs: the variance
    sum(weight^2 std^2 / n) with Welch-Satterthwaite degrees of freedom, rounded down. NaN when a
    row has fewer than 2 seeds."""
    if any(n < 2 or math.isnan(mean) or math.isnan(std) for _, mean, std, n in terms):
        return math.nan, math.nan
    variances = [weight ** 2 * std ** 2 / n for weight, _, std, n in terms]
    estimate = sum(weight * mean for weight, mean, _, _ in terms)
    total = sum(variances)
    if total == 0:  # every seed of every row scored the same
        return estimate, estimate
    df = total ** 2 / sum(v ** 2 / (n - 1) for v, (_, _, _, n) in zip(variances, terms))
    half = t95(df) * math.sqrt(total)
    return estimate - half, estimate + half


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
