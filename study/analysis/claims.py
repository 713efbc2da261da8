"""Verdicts on a study's declared claims (``claims:`` in the study file, ``study.spec.claims``), by one
fixed rule (docs/claims.md, rule v2); ``study.analysis.claims_table`` writes them as tables.

Per claim, from the rows' seeds (each seed an independent training run):

- our estimate of the comparison (a difference, contrast or slope of the rows' mean test BLEU or the
  claim's metric, or one row's own mean value of an absolute metric such as a correlation), its Welch
  test (fractional Welch-Satterthwaite df) and, for a no-difference claim, the two one-sided tests
  (TOST) at its margin;
- Holm's adjustment over the study's statistical claims (the TOST p of a no-difference claim, the
  two-sided p of the others), and each claim's level at its Holm step, at which its intervals are
  taken: the interval of our mean contrast, and the interval one more run of each row would put the
  contrast in (``single_run_interval``), which the paper's single-run value is compared with;
- the verdict (``verdict``).

A claim is *not tested* while a planned seed of its rows is unfinished. A claim on a trial timing (tokens
or words a second) is judged from the study's timing pass when it has one (``python -m study.speed``:
every row timed on one machine, in interleaved rounds, which are then the rows' samples); without a
pass, from the seeds' own timings, and never when those were timed on more than one CPU type. Seeds still improving
when training ended (the plateau test, ``study.analysis.plateau``) are a caveat, not a gate: the
verdict is given, and the rule is applied again without them (the sensitivity column).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from study.analysis.significance import (
    SeedTest,
    holm,
    holm_levels,
    reference_scorer,
    single_run_interval,
    slope_weights,
    welch_contrast,
)
from study.analysis.speed_columns import pass_machine, pass_rounds
from study.analysis.tables import StudyTable, mean_std, scored
from study.spec.claims import ClaimSpec
from study.spec.metrics import timed_metrics
from study.store.record_validation import read_text

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTED = "reproduced", "not reproduced", "inconclusive", "not tested"
RULE = "v2"  # the verdict rule's version (docs/claims.md keeps the history)
SIGNIFICANCE = 0.05
OTHER_BLEU = {"lowercase": True, "tokenize": "intl"}  # the other BLEU variant a verdict is also given under
OTHER_BLEU_NAME = "lowercased, intl-tokenised BLEU"


@dataclass(frozen=True)
class RowStats:
    """A row's scores over its scored seeds, and the seeds it plans and has ended (scored seeds without a
    value of the metric, e.g. a measurement older records lack, count as ended but not in ``n``).
    ``samples`` is "rounds" where mean, std and n are of a timing pass's rounds instead of the seeds, and
    ``gap`` then says why the pass has fewer than 2 of them."""

    mean: float
    std: float
    n: int
    planned: int
    ended: int
    samples: str = "seeds"
    gap: str = ""

    def term(self, weight: float) -> tuple[float, float, float, int]:
        return weight, self.mean, self.std, self.n


def row_stats(table: StudyTable, records: list[dict], metric: str = "test_bleu") -> dict[str, RowStats]:
    """Each row's ``metric`` over the scored seeds among ``records`` (all the study's, or those left
    after the still-improving ones are set aside)."""
    out = {}
    for row in table.rows.to_dict("records"):
        ended = [r for r in records if r["label"] == row["label"] and scored(r)]
        mean, std, n = mean_std([float(r["metrics"][metric]) for r in ended if r["metrics"].get(metric) is not None])
        out[row["label"]] = RowStats(mean, std, n, int(row["seeds"]), len(ended))
    return out


def pass_row_stats(timed: dict[str, tuple[list[float], str]], involved: list[str],
                   seeds: dict[str, RowStats]) -> dict[str, RowStats]:
    """The ``involved`` rows' speed over the timing pass's rounds (``timed``: ``pass_rounds`` of the claim's
    metric; a row the pass lacks, or timed before passes kept rounds: no samples, and ``gap`` says so), with
    the planned and ended seeds of ``seeds``."""
    again = "python -m study.speed with --repeats 3 or more times every row again"
    out = {}
    for label in involved:
        rounds = timed.get(label, ([], ""))[0]
        gap = ("" if len(rounds) >= 2 else f"{label} is not in the timing pass ({again})" if label not in timed
               else f"{label}: the timing pass kept no rounds, only its fastest (written before passes kept them; "
                    f"{again})" if not rounds else f"{label}: the timing pass has 1 round of it ({again})")
        mean, std, n = mean_std(rounds)
        out[label] = RowStats(mean, std, n, seeds[label].planned, seeds[label].ended, samples="rounds", gap=gap)
    return out


def other_bleu_stats(table: StudyTable, records: list[dict], references_text: list[str] | None) -> dict[str, RowStats] | None:
    """The rows' statistics under the other BLEU variant, scored again from the seeds' test translations;
    None when a scored seed has no translation of the test set's length (or there is no test set)."""
    if references_text is None:
        return None
    metric = reference_scorer(tuple(references_text), **OTHER_BLEU)
    out = {}
    for label, stats in row_stats(table, records).items():
        scores = []
        for record in records:
            if record["label"] != label or not scored(record):
                continue
            lines = (read_text(Path(record.get("hyp_path") or "")) or "").splitlines() if record.get("hyp_path") else []
            if len(lines) != len(references_text):
                return None
            scores.append(metric.corpus_score(lines, None).score)
        mean, std, n = mean_std(scores)
        out[label] = RowStats(mean, std, n, stats.planned, stats.ended)
    return out


def other_bleu_signature(references_text: list[str]) -> str:
    """sacreBLEU's signature of the other BLEU variant."""
    return reference_scorer(tuple(references_text), **OTHER_BLEU).get_signature().format()


def claim_weights(claim: ClaimSpec, reference: str | None) -> dict[str, float]:
    """Row label -> weight of the claim's contrast of row means (empty for ``diverges``): a difference is
    +1 and -1, a slope the least-squares weights of its x values (``slope_weights``)."""
    if claim.claim == "diverges":
        return {}
    if claim.value_of is not None:
        return {claim.value_of: 1.0}
    if claim.contrast is not None:
        return {str(label): float(weight) for label, weight in claim.contrast.items()}
    if claim.slope is not None:
        weights = slope_weights([float(x) for x in claim.slope])
        return {str(label): weights[float(x)] for x, label in claim.slope.items()}
    return {claim.row: 1.0, claim.against or reference: -1.0}


def readiness(claim: ClaimSpec, rows: dict[str, RowStats], reference: str | None,
              records: list[dict], machines: list[str]) -> tuple[bool, bool, str]:
    """(can the rule be applied at all, is every planned seed of the claim's rows finished, why not):
    a comparison needs 2+ scored seeds in every row it involves, a ``diverges`` claim one ended seed
    (scored or diverged); it is tested once every planned seed has ended."""
    if claim.claim == "diverges":
        ended = sum(r["label"] == claim.row and (r["status"] == "diverged" or scored(r)) for r in records)
        planned = rows[claim.row].planned
        return ended >= 1, ended >= planned, "" if ended >= planned else f"{claim.row} has {ended} of {planned} seeds"
    involved = list(claim_weights(claim, reference))
    missing = [f"{label} has {rows[label].ended} of {rows[label].planned} seeds" for label in involved
               if rows[label].ended < rows[label].planned]
    unmeasured = [f"{label}: {rows[label].n} of its {rows[label].ended} ended seeds recorded {claim.metric}"
                  for label in involved if rows[label].samples == "seeds" and rows[label].n < rows[label].ended]
    unmeasured += [rows[label].gap for label in involved if rows[label].samples == "rounds" and rows[label].gap]
    if len(machines) > 1 and rows[involved[0]].samples == "rounds":  # a pass that timed rows on several devices
        return False, False, "; ".join(missing + unmeasured + [
            f"the timing pass timed its rows on {len(machines)} devices ({', '.join(machines)}), and a "
            f"{claim.metric} claim compares rows timed on one"])
    if len(machines) > 1:  # ``machines``: timing_machines of its rows; a speed comparison across CPU types measures machines
        return False, False, "; ".join(missing + unmeasured + [
            f"its seeds were timed on {len(machines)} CPU types ({', '.join(machines)}), and a {claim.metric} "
            f"claim compares seeds timed on one"])
    return all(rows[label].n >= 2 for label in involved), not missing, "; ".join(missing + unmeasured)


def timing_machines(claim: ClaimSpec, involved: list[str], records: list[dict]) -> list[str]:
    """The CPU types that timed the scored seeds of a claim on a trial timing (``timed`` metrics), by name
    ("unrecorded" for a record from before CPUs were kept); empty for any other claim."""
    if claim.metric not in timed_metrics():
        return []
    kinds = {str(r["metrics"].get("cpu") or r.get("cpu") or "unrecorded").split(";")[0]
             for r in records if r["label"] in involved and scored(r)}
    return sorted(kind + ")" if "(" in kind and not kind.endswith(")") else kind for kind in kinds)


def verdict(kind: str, estimate: float, adjusted_p: float, mean_interval: tuple[float, float],
            run_interval: tuple[float, float], paper_scaled: float, margin: float | None) -> tuple[str, bool]:
    """The rule (docs/claims.md, rule v2): (verdict, direction reversed). ``adjusted_p`` is Holm's, of the
    two-sided test for direction and size, of the TOST for no_difference; the intervals are at the claim's
    Holm step: our mean contrast's (``mean_interval``) and one more run's (``run_interval``), which the
    paper's single-run effect on our scale is compared with.

    direction and size: significant with the paper's sign -> reproduced (size: also needs the paper's
    effect inside ``run_interval``, else not reproduced); significant with the other sign -> not
    reproduced, reversed; not significant -> not reproduced when the paper's effect lies outside
    ``run_interval`` (evidence against it), else inconclusive. no_difference: the TOST rejects ->
    reproduced; ``mean_interval`` entirely beyond the margin -> not reproduced; else inconclusive."""
    significant = adjusted_p < SIGNIFICANCE
    if kind == "no_difference":
        if significant:
            return REPRODUCED, False
        beyond = mean_interval[0] > margin or mean_interval[1] < -margin
        return (NOT_REPRODUCED if beyond else INCONCLUSIVE), False
    compatible = run_interval[0] <= paper_scaled <= run_interval[1]
    if significant:
        if math.copysign(1.0, estimate) != math.copysign(1.0, paper_scaled):
            return NOT_REPRODUCED, True
        return (REPRODUCED if kind == "direction" or compatible else NOT_REPRODUCED), False
    return (INCONCLUSIVE if compatible else NOT_REPRODUCED), False


def diverges_verdict(claim: ClaimSpec, records: list[dict]) -> str:
    """A claim that a row fails to converge: reproduced when a seed of it diverged, not reproduced when
    every seed trained to the end without diverging."""
    statuses = [r["status"] for r in records if r["label"] == claim.row]
    return REPRODUCED if "diverged" in statuses else NOT_REPRODUCED


def _comparison(claim: ClaimSpec, rows: dict[str, RowStats], reference: str | None) -> dict:
    """A statistical claim's test, its sizing and the p-value that enters Holm's family."""
    weights = claim_weights(claim, reference)
    terms = [rows[label].term(weight) for label, weight in weights.items()]
    test: SeedTest = welch_contrast(terms)
    family_p = test.p_value
    if claim.value_of is not None:  # an absolute metric: the paper's value as it is, nothing sizes it
        return {"test": test, "terms": terms, "weights": weights, "sizing": math.nan, "paper_fraction": math.nan,
                "paper_scaled": claim.paper.value, "margin": None, "family_p": family_p}
    sizing = rows[claim.sizing_row(reference)].mean
    paper_fraction = claim.paper.value / claim.paper.reference
    margin = claim.margin * sizing if claim.margin is not None else None
    if claim.claim == "no_difference":
        family_p = test.equivalence_p(margin)
    return {"test": test, "terms": terms, "weights": weights, "sizing": sizing, "paper_fraction": paper_fraction,
            "paper_scaled": paper_fraction * sizing, "margin": margin, "family_p": family_p}


def claim_samples(claim: ClaimSpec, rows: dict[str, RowStats], reference: str | None, records: list[dict],
                  timing_pass: dict | None) -> tuple[dict[str, RowStats], list[str], bool]:
    """(the rows' statistics the claim is judged on, the CPU types that timed them, whether they are the
    timing pass's rounds): a claim on a trial timing in a study with a timing pass is judged on the pass
    (one machine; the seeds' own timings are not used), any other on its rows' seeds."""
    involved = list(claim_weights(claim, reference))
    if timing_pass is None or claim.metric not in timed_metrics() or claim.claim == "diverges":
        return rows, timing_machines(claim, involved, records), False
    sizing = claim.sizing_row(reference)
    timed = involved + ([sizing] if sizing is not None and sizing not in involved else [])
    rounds = pass_rounds(timing_pass, claim.metric)
    devices = sorted({device for label, (_, device) in rounds.items() if label in timed})
    machines = [pass_machine(timing_pass)] if len(devices) <= 1 else devices
    return pass_row_stats(rounds, timed, rows), machines, True


def judge(claims: list[ClaimSpec], rows_by_metric: dict[str, dict[str, RowStats]], reference: str | None,
          records: list[dict], require_complete: bool, timing_pass: dict | None = None) -> list[dict]:
    """Every claim's statistics and verdict over one set of row statistics (metric -> row label -> its
    statistics, ``row_stats`` of each metric the claims compare). ``require_complete``: the rule is
    applied only where every planned seed of the claim's rows ended (the verdict); otherwise wherever
    it can be (the "as trained" reading, and the sensitivity column, whose records leave out the seeds
    still improving). ``timing_pass``: the study's ``speed.json``, whose rounds a claim on a trial timing
    is judged from. Holm's family is every declared claim but ``diverges``; one the rule is not
    applied to counts with p = 1, so the family is fixed by the study file."""
    judged = []
    for claim in claims:
        rows, machines, from_pass = claim_samples(claim, rows_by_metric[claim.metric], reference, records, timing_pass)
        applicable, complete, why = readiness(claim, rows, reference, records, machines)
        entry = {"claim": claim, "usable": complete and applicable if require_complete else applicable,
                 "tested": complete, "why": why, "verdict": NOT_TESTED, "reversed": False, "stats": rows,
                 # a timing across CPU types compares machines: no estimate is shown for it
                 "mixed_timing": len(machines) > 1, "timing_pass": machines[0] if from_pass else None}
        if claim.claim != "diverges":
            entry.update(_comparison(claim, rows, reference))
        judged.append(entry)
    statistical = [entry for entry in judged if "test" in entry]
    family = [entry["family_p"] if entry["usable"] and not math.isnan(entry["family_p"]) else 1.0 for entry in statistical]
    for entry, adjusted, level in zip(statistical, holm(family), holm_levels(family)):
        entry["adjusted_p"], entry["level"] = (adjusted, level) if entry["usable"] else (math.nan, math.nan)
    for entry in judged:
        if not entry["usable"]:
            continue
        if entry["claim"].claim == "diverges":
            entry["verdict"] = diverges_verdict(entry["claim"], records)
            continue
        entry["mean_interval"] = entry["test"].interval(entry["level"])
        entry["run_interval"] = single_run_interval(entry["terms"], entry["level"])
        entry["verdict"], entry["reversed"] = verdict(entry["claim"].claim, entry["test"].estimate, entry["adjusted_p"],
                                                      entry["mean_interval"], entry["run_interval"],
                                                      entry["paper_scaled"], entry["margin"])
    return judged
