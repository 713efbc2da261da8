"""Translation quality with sacreBLEU: detokenised BLEU and chrF, each with
the signature that makes the number reproducible."""

from __future__ import annotations

from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF


@dataclass
class Score:
    score: float
    signature: str


def corpus_bleu(hypotheses: list[str], references: list[str]) -> Score:
    metric = BLEU()
    result = metric.corpus_score(hypotheses, [references])
    return Score(result.score, str(metric.get_signature()))


def corpus_chrf(hypotheses: list[str], references: list[str]) -> Score:
    metric = CHRF()
    result = metric.corpus_score(hypotheses, [references])
    return Score(result.score, str(metric.get_signature()))
