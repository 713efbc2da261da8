"""Verdicts on a study's declared claims (``claims:`` in the study file, ``study.spec.claims``), by one
fixed protocol (docs/claims.md), written as claims.md, claims.csv and claims.tex beside the table.

Per claim, from the rows' seeds (each seed an independent training run) and the test set:

- our estimate of the comparison (a difference, contrast or slope of the rows' mean test BLEU), and
  as a fraction of our score of the row that sizes the claim; the paper's value, its fraction of the
  paper's score of that row, and that fraction of our score (the paper's effect on our scale);
- the 95% Welch interval over seeds (fractional Welch-Satterthwaite df) and its two-sided p-value,
  Holm-adjusted over the study's claims; the paired bootstrap's 95% interval over test sentences;
- the minimum detectable effect at 80% power with the seeds at hand, and how many seeds per row
  would detect the paper's effect on our scale;
- the verdict, by a rule fixed before any result (``verdict``), and the verdict under the other
  BLEU variant (lowercased, ``intl`` tokenisation: closer to the papers' tokenised BLEU).

A claim whose rows are unfinished, or whose seeds are not all on a plateau
(``study.analysis.plateau``), is *not tested*; "verdict as trained" then says what the rule gives the
models as they stand, which is not a verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from nmt.fileio import write_lines
from study.analysis.additivity import contrast_test
from study.analysis.plateau import MIN_EPOCHS, rule_text
from study.analysis.significance import SeedTest, holm, reference_scorer, seeds_needed, slope_weights, welch_contrast
from study.analysis.tables import (
    SCORED,
    StudyTable,
    epochs_trained,
    format_interval,
    format_number,
    format_p,
    latex_table,
    markdown_table,
)
from study.spec.claims import ClaimSpec
from study.store.record_validation import read_text

FILES = ("claims.md", "claims.csv", "claims.tex")
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTED = ("reproduced", "not reproduced", "inconclusive (underpowered)",
                                                       "not tested")
SIGNIFICANCE = 0.05
OTHER_BLEU = {"lowercase": True, "tokenize": "intl"}  # the sensitivity column's BLEU variant
OTHER_BLEU_NAME = "lowercased, intl-tokenised BLEU"


@dataclass(frozen=True)
class RowStats:
    """A row's test scores over its scored seeds, and whether the row can be judged."""

    mean: float
    std: float
    n: int
    planned: int
    improving: int  # seeds not on a plateau

    def term(self, weight: float) -> tuple[float, float, float, int]:
        return weight, self.mean, self.std, self.n


def row_stats(table: StudyTable, records: list[dict], metric: str = "test_bleu") -> dict[str, RowStats]:
    """Each row's ``metric`` over its scored seeds (test BLEU: the table's own statistics)."""
    out = {}
    for row in table.rows.to_dict("records"):
        if metric == "test_bleu":
            mean, std, n = row["bleu_mean"], row["bleu_std"], int(row["n"])
        else:
            values = [float(r["metrics"][metric]) for r in records if r["label"] == row["label"]
                      and r["status"] in SCORED and r["metrics"].get("test_bleu") is not None
                      and r["metrics"].get(metric) is not None]
            mean, std, n = _summary(values)
        out[row["label"]] = RowStats(mean, std, n, int(row["seeds"]), int(row["still_improving"]))
    return out


def _summary(values: list[float]) -> tuple[float, float, int]:
    n = len(values)
    mean = float(np.mean(values)) if n else math.nan
    std = float(np.std(values, ddof=1)) if n > 1 else (0.0 if n == 1 else math.nan)
    return mean, std, n


def other_bleu_stats(table: StudyTable, records: list[dict], references_text: list[str] | None) -> dict[str, RowStats] | None:
    """The rows' statistics under the other BLEU variant, scored again from the seeds' test translations;
    None when a scored seed has no translation of the test set's length (or there is no test set)."""
    if references_text is None:
        return None
    metric = reference_scorer(tuple(references_text), **OTHER_BLEU)
    base = row_stats(table, records)
    out = {}
    for label, stats in base.items():
        scores = []
        for record in records:
            if record["label"] != label or record["status"] not in SCORED or record["metrics"].get("test_bleu") is None:
                continue
            lines = (read_text(Path(record.get("hyp_path") or "")) or "").splitlines() if record.get("hyp_path") else []
            if len(lines) != len(references_text):
                return None
            scores.append(metric.corpus_score(lines, None).score)
        mean, std, n = _summary(scores)
        out[label] = RowStats(mean, std, n, stats.planned, stats.improving)
    return out


def claim_weights(claim: ClaimSpec, reference: str | None) -> dict[str, float]:
    """Row label -> weight of the claim's contrast of row means (empty for ``diverges``): a difference is
    +1 and -1, a slope the least-squares weights of its x values (``slope_weights``)."""
    if claim.claim == "diverges":
        return {}
    if claim.contrast is not None:
        return {str(label): float(weight) for label, weight in claim.contrast.items()}
    if claim.slope is not None:
        weights = slope_weights([float(x) for x in claim.slope])
        return {str(label): weights[float(x)] for x, label in claim.slope.items()}
    return {claim.row: 1.0, claim.against or reference: -1.0}


def readiness(claim: ClaimSpec, rows: dict[str, RowStats], reference: str | None,
              records: list[dict]) -> tuple[bool, bool, str]:
    """(can the rule be applied at all, is it a test, why not): every row involved needs 2+ scored seeds,
    and a test needs every planned seed finished and on a plateau (``diverges``: ``diverges_readiness``)."""
    if claim.claim == "diverges":
        return diverges_readiness(claim, rows[claim.row].planned, records)
    involved = list(claim_weights(claim, reference))
    missing = [f"{label} has {rows[label].n} of {rows[label].planned} seeds" for label in involved
               if rows[label].n < rows[label].planned]
    too_few = [label for label in involved if rows[label].n < 2]
    improving = [f"{label} ({rows[label].improving} of {rows[label].n} seeds)" for label in involved if rows[label].improving]
    # a seed with too few validation scores for the plateau test cannot show it converged: no test either
    short = {label: sum(r["label"] == label and r["status"] in SCORED and r["metrics"].get("test_bleu") is not None
                        and (epochs_trained(r) or 0) < MIN_EPOCHS for r in records) for label in involved}
    unjudged = [f"{label} ({count} of {rows[label].n} seeds)" for label, count in short.items() if count]
    why = "; ".join(missing + ([f"not on a plateau: {', '.join(improving)}"] if improving else [])
                    + ([f"too short for the plateau test (under {MIN_EPOCHS} validation scores): {', '.join(unjudged)}"]
                       if unjudged else []))
    return not too_few, not missing and not improving and not unjudged, why


def verdict(kind: str, test: SeedTest, adjusted_p: float, paper_scaled: float, margin: float | None) -> tuple[str, bool]:
    """The rule, fixed before results (docs/claims.md): (verdict, direction reversed).

    direction: the comparison differs from 0 (Holm-adjusted p < 0.05) in the paper's direction ->
    reproduced; in the other direction -> not reproduced, reversed. No significant difference: the
    paper's effect on our scale below the minimum detectable effect -> inconclusive (underpowered),
    else not reproduced (the seeds could have seen it). size: as direction, and a reproduced direction
    also needs the paper's effect on our scale inside our seed interval. no_difference: a significant
    difference -> not reproduced; else reproduced when the minimum detectable effect is within the
    margin, inconclusive (underpowered) when it is not."""
    significant = adjusted_p < SIGNIFICANCE
    mde = test.minimum_detectable_effect()
    if kind == "no_difference":
        if significant:
            return NOT_REPRODUCED, False
        return (REPRODUCED if mde <= margin else INCONCLUSIVE), False
    if significant:
        if math.copysign(1.0, test.estimate) != math.copysign(1.0, paper_scaled):
            return NOT_REPRODUCED, True
        if kind == "size" and not test.low <= paper_scaled <= test.high:
            return NOT_REPRODUCED, False
        return REPRODUCED, False
    return (INCONCLUSIVE if mde > abs(paper_scaled) else NOT_REPRODUCED), False


def diverges_readiness(claim: ClaimSpec, planned: int, records: list[dict]) -> tuple[bool, bool, str]:
    """A fails-to-converge claim is tested once a seed of its row diverged, or once every planned seed
    ended (diverged or finished)."""
    statuses = [r["status"] for r in records if r["label"] == claim.row]
    ended = sum(status in (*SCORED, "diverged") for status in statuses)
    ready = "diverged" in statuses or ended >= planned
    return ready, ready, "" if ready else f"{claim.row} has {ended} of {planned} seeds"


def diverges_verdict(claim: ClaimSpec, records: list[dict]) -> str:
    """A claim that a row fails to converge: reproduced when a seed of it diverged, not reproduced
    when every seed finished."""
    statuses = [r["status"] for r in records if r["label"] == claim.row]
    return REPRODUCED if "diverged" in statuses else NOT_REPRODUCED


def judge(claims: list[ClaimSpec], rows_by_metric: dict[str, dict[str, RowStats]], reference: str | None,
          records: list[dict], tested_only: bool) -> list[dict]:
    """Every claim's statistics and verdict over one set of row statistics (metric -> row label -> its
    statistics, ``row_stats`` of each metric the claims compare). ``tested_only``: the rule
    is applied only where the claim is a test (the verdict column); otherwise wherever it can be
    (the "as trained" column). Holm's family is every declared claim with a statistical test."""
    judged = []
    for claim in claims:
        rows = rows_by_metric[claim.metric]
        applicable, tested, why = readiness(claim, rows, reference, records)
        usable = tested if tested_only else applicable
        entry = {"claim": claim, "usable": usable, "tested": tested, "why": why}
        if claim.claim != "diverges":
            weights = claim_weights(claim, reference)
            test = welch_contrast([rows[label].term(weight) for label, weight in weights.items()])
            sizing = rows[claim.sizing_row(reference)].mean
            paper_fraction = claim.paper.value / claim.paper.reference
            entry.update(test=test, sizing=sizing, paper_fraction=paper_fraction, paper_scaled=paper_fraction * sizing,
                         margin=claim.margin * sizing if claim.margin is not None else None, weights=weights)
        judged.append(entry)
    statistical = [entry for entry in judged if "test" in entry]
    adjusted = holm([entry["test"].p_value if entry["usable"] else 1.0 for entry in statistical])
    for entry, p in zip(statistical, adjusted):
        entry["adjusted_p"] = p if entry["usable"] else math.nan
    for entry in judged:
        entry["verdict"], entry["reversed"] = NOT_TESTED, False
        if not entry["usable"]:
            continue
        if entry["claim"].claim == "diverges":
            entry["verdict"] = diverges_verdict(entry["claim"], records)
        else:
            entry["verdict"], entry["reversed"] = verdict(entry["claim"].claim, entry["test"], entry["adjusted_p"],
                                                          entry["paper_scaled"], entry["margin"])
    return judged


@dataclass
class ClaimsTable:
    title: str
    rows: pd.DataFrame  # one row per claim (numbers and verdicts)
    says: list[str]  # "name: what the paper says (source)", in order
    family: int  # claims in Holm's family

    def frame(self) -> pd.DataFrame:
        out = []
        for row in self.rows.to_dict("records"):
            diverges = row["kind"] == "diverges"
            out.append({
                "claim": row["claim"],
                "kind": row["kind"].replace("_", " ") + ("" if row["metric"] == "test_bleu" else f" ({row['metric']})"),
                "ours": "-" if diverges else _with_fraction(row["estimate"], row["fraction"]),
                "paper": "fails to converge" if diverges else _with_fraction(row["paper_value"], row["paper_fraction"]),
                "paper on our scale": "-" if diverges else _value(row["paper_scaled"]),
                "CI (seeds)": _interval(row["seeds_ci_low"], row["seeds_ci_high"]),
                "CI (test set)": format_interval(row["bootstrap_ci_low"], row["bootstrap_ci_high"]),
                "p (Holm)": format_p(row["adjusted_p"]),
                "MDE": _value(row["mde"], signed=False),
                "seeds needed": row["seeds_needed_text"],
                "verdict": row["verdict"] + (" (reversed)" if row["reversed"] else ""),
                "other BLEU": row["other_bleu_text"],
                "as trained": row["as_trained"] if row["verdict"] == NOT_TESTED else "-",
            })
        return pd.DataFrame(out)

    def notes(self) -> list[str]:
        return [*self.says, protocol_note(self.family)]

    def markdown(self) -> str:
        return markdown_table(self.frame(), self.title, self.notes())

    def latex(self, label: str = "") -> str:
        return latex_table(self.frame(), self.title, self.notes(), label)


def _value(value: float, signed: bool = True) -> str:
    """A BLEU difference to 2 decimals; a count or a speed (parameters, tokens/s) whole, with separators."""
    if value is not None and not math.isnan(value) and abs(value) >= 1000:
        return f"{value:+,.0f}" if signed else f"{value:,.0f}"
    return format_number(value, signed=signed)


def _with_fraction(value: float, fraction: float) -> str:
    """"-2.45 (-6.5%)": a comparison and its fraction of the sizing row's score; "-" without one."""
    if value is None or math.isnan(value):
        return "-"
    return f"{_value(value)} ({format_number(100 * fraction, 1, signed=True)}%)"


def _interval(low: float, high: float) -> str:
    if low is not None and not math.isnan(low) and max(abs(low), abs(high)) >= 1000:
        return f"[{_value(low)}, {_value(high)}]"
    return format_interval(low, high)


def protocol_note(family: int) -> str:
    """The protocol in one note under every claims table (docs/claims.md in full)."""
    parts = [
        "Protocol (docs/claims.md): ours and paper = the comparison in BLEU or the claim's metric (a slope: per unit "
        "of x) and as a percentage of the sizing row's score",
        "paper on our scale = the paper's percentage of our sizing row",
        "CI (seeds) = 95% Welch interval over seeds, fractional Welch-Satterthwaite df",
        "CI (test set) = 95% paired bootstrap over test sentences (1000 resamples, seeds concatenated)",
        f"p (Holm) = Welch's two-sided p, Holm-adjusted over the study's {family} statistical claims (an untested one "
        "counts with p = 1)",
        "MDE = minimum detectable effect at 80% power, 5% two-sided, with these seeds",
        "seeds needed = seeds per row to detect the paper's effect on our scale (no difference: the margin) at 80% power",
        "verdicts: reproduced / not reproduced / inconclusive (underpowered) / not tested, by the rule declared before "
        f"the results; a claim is tested only when every planned seed of its rows finished and is {rule_text()}",
        f"other BLEU = the verdict (for a not-tested claim: its as-trained reading) under {OTHER_BLEU_NAME} "
        "(\"same\" when it does not change)",
        "as trained = what the rule gives a not-tested claim's models as they stand, which is not a verdict",
    ]
    return "; ".join(parts) + "."


def claims_table(spec_claims: list[ClaimSpec], title: str, table: StudyTable, records: list[dict],
                 references_text: list[str] | None) -> ClaimsTable:
    """Every declared claim judged from the study's table and records."""
    rows = {metric: row_stats(table, records, metric) for metric in {claim.metric for claim in spec_claims}}
    judged = judge(spec_claims, rows, table.reference, records, True)
    as_trained = judge(spec_claims, rows, table.reference, records, False)
    other_bleu = other_bleu_stats(table, records, references_text)
    other_rows = {**rows, "test_bleu": other_bleu} if other_bleu else None
    other = judge(spec_claims, other_rows, table.reference, records, True) if other_rows else None
    other_as_trained = judge(spec_claims, other_rows, table.reference, records, False) if other_rows else None
    cache: dict[str, np.ndarray | None] = {}
    out = []
    for index, entry in enumerate(judged):
        claim = entry["claim"]
        row = {"claim": claim.name, "kind": claim.claim, "metric": claim.metric, "says": claim.says,
               "source": claim.paper.source,
               "verdict": entry["verdict"], "reversed": entry["reversed"], "why_not_tested": entry["why"],
               "as_trained": _shown(as_trained[index]),
               "other_bleu_verdict": other[index]["verdict"] if other else "",
               "other_bleu_as_trained": _shown(other_as_trained[index]) if other_as_trained else "",
               "adjusted_p": entry.get("adjusted_p", math.nan)}
        # beside a verdict, the verdict under the other BLEU; beside a not-tested claim, its "as trained" reading
        shown, other_shown = ((row["verdict"], row["other_bleu_verdict"]) if entry["verdict"] != NOT_TESTED
                              else (row["as_trained"], row["other_bleu_as_trained"]))
        row["other_bleu_text"] = ("-" if other is None or claim.metric != "test_bleu"
                                  else "same" if other_shown == shown else other_shown)
        row.update(_numbers(entry, claim, rows[claim.metric], records,
                            references_text if claim.metric == "test_bleu" else None, cache))
        out.append(row)
    family = sum(1 for claim in spec_claims if claim.claim != "diverges")
    says = [f"{claim.name}: {claim.says} ({claim.paper.source})." for claim in spec_claims]
    for row in out:
        if row["verdict"] == NOT_TESTED and row["why_not_tested"]:
            says.append(f"{row['claim']} not tested: {row['why_not_tested']}.")
    return ClaimsTable(f"Claims: {title}", pd.DataFrame(out), says, family)


def _shown(entry: dict) -> str:
    return entry["verdict"] + (" (reversed)" if entry["reversed"] else "")


def _numbers(entry: dict, claim: ClaimSpec, rows: dict[str, RowStats], records: list[dict],
             references_text: list[str] | None, cache: dict) -> dict:
    if claim.claim == "diverges":
        return {"estimate": math.nan, "fraction": math.nan, "paper_value": math.nan, "paper_fraction": math.nan,
                "paper_scaled": math.nan, "seeds_ci_low": math.nan, "seeds_ci_high": math.nan, "p_value": math.nan,
                "df": math.nan, "bootstrap_ci_low": math.nan, "bootstrap_ci_high": math.nan, "mde": math.nan,
                "seeds_needed": None, "seeds_needed_text": "-"}
    test: SeedTest = entry["test"]
    _, bootstrap = contrast_test(entry["weights"], records, references_text, cache)
    effect = entry["margin"] if claim.claim == "no_difference" else entry["paper_scaled"]
    needed = seeds_needed([(weight, rows[label].std) for label, weight in entry["weights"].items()], effect)
    return {"estimate": test.estimate, "fraction": test.estimate / entry["sizing"] if entry["sizing"] else math.nan,
            "paper_value": claim.paper.value, "paper_fraction": entry["paper_fraction"],
            "paper_scaled": entry["paper_scaled"], "seeds_ci_low": test.low, "seeds_ci_high": test.high,
            "p_value": test.p_value, "df": test.df, "bootstrap_ci_low": bootstrap.ci_low,
            "bootstrap_ci_high": bootstrap.ci_high, "mde": test.minimum_detectable_effect(), "seeds_needed": needed,
            "seeds_needed_text": "-" if math.isnan(test.se) else str(needed) if needed else "> 100"}


def export_claims(claims: ClaimsTable, directory: Path) -> list[Path]:
    """claims.md, claims.csv and claims.tex (label tab:<study>-claims) in the study's directory."""
    paths = [directory / name for name in FILES]
    write_lines(paths[0], claims.markdown().splitlines())
    write_lines(paths[1], claims.rows.to_csv(index=False).splitlines())
    write_lines(paths[2], claims.latex(f"tab:{directory.name}-claims").splitlines())
    return paths
