"""The paired bootstrap against sacreBLEU's own test, and its interval of the difference."""

from __future__ import annotations

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


def test_seed_interval_is_welchs_interval_over_the_seeds():
    import math
    import statistics

    from scipy import stats

    from study.analysis.significance import seed_interval

    def interval(ours, theirs):
        return seed_interval(statistics.mean(ours), statistics.stdev(ours), len(ours),
                             statistics.mean(theirs), statistics.stdev(theirs), len(theirs))

    # equal spreads and seed counts: 4 degrees of freedom, a tabled value, so scipy's interval exactly
    ours, theirs = [20.0, 22.0, 24.0], [10.0, 12.0, 14.0]
    welch = stats.ttest_ind(ours, theirs, equal_var=False).confidence_interval(0.95)
    assert interval(ours, theirs) == pytest.approx((welch.low, welch.high), abs=2e-3)
    assert interval(ours, theirs) == pytest.approx((10 - 2.776 * math.sqrt(8 / 3), 10 + 2.776 * math.sqrt(8 / 3)))
    # unequal spreads: about 2.16 degrees of freedom, rounded down to 2, so a little wider than scipy's
    ours, theirs = [20.0, 22.0, 24.0], [10.0, 13.0]
    low, high = interval(ours, theirs)
    welch = stats.ttest_ind(ours, theirs, equal_var=False).confidence_interval(0.95)
    assert low < welch.low < welch.high < high
    assert (low + high) / 2 == pytest.approx(10.5)
    assert high - 10.5 == pytest.approx(4.303 * math.sqrt(4 / 3 + 4.5 / 2))
    # one seed has no spread to measure; seeds that all scored the same leave only the difference
    assert all(math.isnan(v) for v in seed_interval(22.0, 2.0, 3, 10.0, 0.0, 1))
    assert all(math.isnan(v) for v in seed_interval(22.0, math.nan, 3, 10.0, 1.0, 3))
    assert seed_interval(22.0, 0.0, 2, 10.0, 0.0, 3) == (12.0, 12.0)
