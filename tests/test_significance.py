"""The paired bootstrap against sacreBLEU's own test, and its interval of the difference."""

from __future__ import annotations

import random

import pytest

from study.significance import paired_bootstrap

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
