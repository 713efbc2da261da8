"""The paired bootstrap against sacreBLEU's own test, and its interval of the difference; Welch's seed
intervals and tests, Holm, and the claims' power (simulated).

Modules covered here: ``study.analysis.power``."""

from __future__ import annotations

import math
import random

import pytest

from study.analysis.significance import paired_bootstrap

WORDS = "a man in a blue shirt is riding a bike down the street while two dogs watch him".split()


def corpus(drop: float, seed: int, references: list[str]) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(w for w in ref.split() if rng.random() > drop) for ref in references]


@pytest.fixture(scope="module")
def references():
    rng = random.Random(0)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14))) for _ in range(120)]


def test_p_value_is_sacrebleus_paired_bootstrap(references):
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    system, baseline = corpus(0.2, 1, references), corpus(0.3, 2, references)
    ours = paired_bootstrap(system, baseline, references, samples=300)
    test = PairedTest([("baseline", baseline), ("system", system)], {"BLEU": BLEU(references=[references])},
                      references=None, test_type="bs", n_samples=300)
    _, scores = test()
    assert ours.p_value == pytest.approx(scores["BLEU"][1].p_value)
    assert ours.delta == pytest.approx(scores["BLEU"][1].score - scores["BLEU"][0].score, abs=1e-4)


def test_interval_of_the_difference(references):
    clearly_better = paired_bootstrap(references, corpus(0.4, 3, references), references, samples=300)
    assert 0 < clearly_better.ci_low < clearly_better.delta < clearly_better.ci_high
    assert clearly_better.p_value < 0.01
    # two draws of the same noise: the interval straddles zero, and the test does not call it
    close = paired_bootstrap(corpus(0.3, 4, references), corpus(0.3, 5, references), references, samples=300)
    assert close.ci_low < 0 < close.ci_high and close.p_value > 0.05


def test_lines_must_align(references):
    with pytest.raises(ValueError, match="one line per test sentence"):
        paired_bootstrap(references[:-1], references, references)


def test_seed_interval_is_scipys_welch_interval_with_fractional_df():
    import math
    import statistics

    from scipy import stats

    from study.analysis.significance import seed_interval, welch_contrast

    rng = random.Random(7)
    for n_ours, n_theirs in [(3, 3), (3, 2), (2, 5), (4, 3), (10, 6)]:
        for _ in range(5):
            ours = [rng.gauss(30, rng.uniform(0.1, 3)) for _ in range(n_ours)]
            theirs = [rng.gauss(29, rng.uniform(0.1, 3)) for _ in range(n_theirs)]
            scipy_test = stats.ttest_ind(ours, theirs, equal_var=False)
            welch = scipy_test.confidence_interval(0.95)
            args = (statistics.mean(ours), statistics.stdev(ours), n_ours,
                    statistics.mean(theirs), statistics.stdev(theirs), n_theirs)
            assert seed_interval(*args) == pytest.approx((welch.low, welch.high), abs=1e-6)
            test = welch_contrast([(1.0, args[0], args[1], n_ours), (-1.0, args[3], args[4], n_theirs)])
            assert test.p_value == pytest.approx(scipy_test.pvalue, abs=1e-9)
            assert test.df == pytest.approx(scipy_test.df, abs=1e-9)
    # one seed has no spread to measure; seeds that all scored the same leave only the difference
    assert all(math.isnan(v) for v in seed_interval(22.0, 2.0, 3, 10.0, 0.0, 1))
    assert all(math.isnan(v) for v in seed_interval(22.0, math.nan, 3, 10.0, 1.0, 3))
    assert seed_interval(22.0, 0.0, 2, 10.0, 0.0, 3) == (12.0, 12.0)


@pytest.mark.parametrize("seeds, spread, level", [(3, 1.0, 0.05), (3, 3.0, 0.01), (5, 1.0, 0.005)])
def test_the_minimum_detectable_effect_has_80_percent_power_at_its_level(seeds, spread, level):
    """Simulated: Welch's test at ``level`` (a Holm step) detects a true difference of the MDE 80% of the
    time with 3 or 5 seeds a row, unequal spreads too (the noncentral t with the true df said 80% where
    the test reached about 70%)."""
    import numpy as np
    from scipy import stats

    from study.analysis.power import minimum_detectable_effect

    effect = minimum_detectable_effect([(1.0, 1.0, seeds), (-1.0, spread, seeds)], level)
    rng = np.random.default_rng(3)
    a = rng.normal(effect, 1.0, size=(20000, seeds))
    b = rng.normal(0.0, spread, size=(20000, seeds))
    detected = np.mean(stats.ttest_ind(a, b, axis=1, equal_var=False).pvalue < level)
    assert 0.78 < detected < 0.82


def test_the_equivalence_power_matches_the_two_one_sided_tests_simulated():
    import numpy as np
    from scipy import stats

    from study.analysis.power import equivalence_power

    seeds, margin, level = 4, 2.5, 0.05
    rng = np.random.default_rng(5)
    a, b = rng.normal(0, 1, size=(20000, seeds)), rng.normal(0, 1, size=(20000, seeds))
    shifted = [stats.ttest_ind(a + margin, b, axis=1, equal_var=False, alternative="greater").pvalue,
               stats.ttest_ind(a - margin, b, axis=1, equal_var=False, alternative="less").pvalue]
    simulated = np.mean(np.maximum(*shifted) < level)
    assert equivalence_power(margin, [(1.0, 1.0, seeds), (-1.0, 1.0, seeds)], level) == pytest.approx(simulated, abs=0.02)


def test_seeds_needed_is_the_first_count_whose_power_reaches_80_percent_and_comes_with_its_range():
    from study.analysis.power import POWER, seeds_needed, seeds_needed_range, welch_power

    spreads = [(1.0, 1.0), (-1.0, 1.0)]
    needed = [seeds_needed(spreads, effect, 0.05) for effect in (4.0, 2.0, 1.0, 0.5)]
    assert needed == sorted(needed) and needed[0] < needed[-1]
    n = needed[2]
    assert welch_power(1.0, [(1.0, 1.0, n), (-1.0, 1.0, n)], 0.05) >= POWER
    assert welch_power(1.0, [(1.0, 1.0, n - 1), (-1.0, 1.0, n - 1)], 0.05) < POWER
    assert seeds_needed(spreads, 1.0, 0.01) > n  # a stricter Holm step needs more seeds
    assert seeds_needed(spreads, 0.001, 0.05) is None and seeds_needed(spreads, 0.0, 0.05) is None
    low, point, high = seeds_needed_range([(1.0, 1.0, 3), (-1.0, 1.0, 3)], lambda s: seeds_needed(s, 1.0, 0.05))
    assert point == n and low < point < (high or 101)  # a spread from 4 df: anywhere from a third to 8x the variance


def test_holm_levels_and_the_intervals_at_them():
    from study.analysis.significance import holm_levels, single_run_interval, t_quantile, welch_contrast

    levels = holm_levels([0.04, 0.01, math.nan, 0.02])  # ranked 0.01, 0.02, 0.04: 0.05/3, 0.05/2, 0.05/1
    assert [levels[i] for i in (0, 1, 3)] == pytest.approx([0.05, 0.05 / 3, 0.025]) and math.isnan(levels[2])
    terms = [(1.0, 30.0, 1.0, 3), (-1.0, 28.0, 1.0, 3)]
    test = welch_contrast(terms)
    low, high = test.interval(0.01)
    assert (high - low) / 2 == pytest.approx(t_quantile(0.995, 4.0) * math.sqrt(2 / 3))
    assert test.interval(0.05) == pytest.approx((test.low, test.high))
    # one more run of each row: the seeds' variance and a run's own, 1 + 1/3 of it per row
    run_low, run_high = single_run_interval(terms, 0.05)
    assert (run_high - run_low) / 2 == pytest.approx(t_quantile(0.975, 4.0) * math.sqrt(2 * (1 + 1 / 3)))


def test_holm_adjustment():
    from study.analysis.significance import holm

    # sorted p 0.01, 0.02, 0.04 times 3, 2, 1, made monotone; NaN stays out of the family
    adjusted = holm([0.04, 0.01, math.nan, 0.02])
    assert adjusted[0] == pytest.approx(0.04) and adjusted[1] == pytest.approx(0.03)
    assert adjusted[3] == pytest.approx(0.04) and math.isnan(adjusted[2])
    assert holm([0.5, 0.6]) == [pytest.approx(1.0), pytest.approx(1.0)]
