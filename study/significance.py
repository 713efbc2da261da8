"""Paired bootstrap resampling over test sentences (Koehn 2004) for one system against a baseline.

The p-value is sacreBLEU's ``--paired-bs`` test, computed the same way (same resampled sentence
indices for a given seed, same statistic); the same resamples also give the 95% percentile
interval of the BLEU difference, which sacreBLEU does not report. That interval covers the
test set's sampling variation only, not the variation between training seeds: with two seeds a
table's t-interval of the mean is the wider and more honest one for seeds, this one says how
much the test set alone could move the difference.

Built on sacreBLEU's sufficient statistics (the internals its own significance module uses).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SEED = 12345  # sacreBLEU's default SACREBLEU_SEED: the same resamples, so the same p-values


@dataclass(frozen=True)
class PairedBootstrap:
    delta: float  # corpus BLEU of the system minus the baseline's, on the given translations
    p_value: float
    ci_low: float
    ci_high: float


def paired_bootstrap(system: list[str], baseline: list[str], references: list[str], samples: int = 1000,
                     seed: int = SEED) -> PairedBootstrap:
    from sacrebleu.metrics import BLEU

    if not len(system) == len(baseline) == len(references):
        raise ValueError("system, baseline and references must have one line per test sentence each")
    metric = BLEU()
    refs = [references]
    system_stats = np.array(metric._extract_corpus_statistics(system, refs), dtype="float32")
    baseline_stats = np.array(metric._extract_corpus_statistics(baseline, refs), dtype="float32")
    system_score = metric._compute_score_from_stats(system_stats.sum(0)).score
    baseline_score = metric._compute_score_from_stats(baseline_stats.sum(0)).score
    delta = system_score - baseline_score
    if abs(delta) < 1e-9:
        # sacreBLEU's (c + 1) / (n + 1) would call two equal systems significantly different
        return PairedBootstrap(0.0, 1.0, 0.0, 0.0)

    indices = np.random.default_rng(seed).choice(len(system), size=(samples, len(system)), replace=True)
    resampled = np.array([[metric._compute_score_from_stats(stats[rows].sum(0)).score
                           for stats in (system_stats, baseline_stats)] for rows in indices])
    differences = resampled[:, 0] - resampled[:, 1]
    spread = np.abs(differences)
    exceed = int(np.sum(spread - spread.mean() > abs(delta)))
    low, high = np.percentile(differences, [2.5, 97.5])
    return PairedBootstrap(delta, (exceed + 1) / (samples + 1), float(low), float(high))


def nan_bootstrap() -> PairedBootstrap:
    return PairedBootstrap(math.nan, math.nan, math.nan, math.nan)
