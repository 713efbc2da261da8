"""A study's claims table (claims.md, claims.csv, claims.tex beside its table): every declared claim's
numbers and verdict by the rule of ``study.analysis.claims``, the verdict without the seeds still
improving, under the other BLEU variant, when the claim was declared, and the notes that say what
the columns mean (docs/claims.md in full; docs/reading-tables.md reads one)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from nmt.fileio import write_lines
from study.analysis.additivity import contrast_test
from study.analysis.claims import (
    NOT_TESTED,
    OTHER_BLEU_NAME,
    RULE,
    judge,
    other_bleu_signature,
    other_bleu_stats,
    row_stats,
)
from study.analysis.plateau import rule_text
from study.analysis.power import (
    MOST_SEEDS,
    equivalence_seeds_needed,
    minimum_detectable_effect,
    seeds_needed,
    seeds_needed_range,
)
from study.analysis.tables import (
    StudyTable,
    bleu_signature_note,
    format_interval,
    format_number,
    format_p,
    latex_table,
    markdown_table,
)
from study.spec.claims import ClaimSpec
from study.spec.metrics import absolute_metrics
from study.store.claim_declarations import AFTER, UNRECORDED

FILES = ("claims.md", "claims.csv", "claims.tex")
UNDER_TWO = "under 2 seeds"  # the sensitivity column where a row keeps fewer than 2 seeds on a plateau


@dataclass
class ClaimsTable:
    title: str
    rows: pd.DataFrame  # one row per claim (numbers and verdicts)
    notes_before: list[str]  # what each claim says, which seeds were still improving, why a claim is not tested
    family: int  # claims in Holm's family
    signatures: list[str]  # the BLEU signatures the verdicts are computed under
    own_values: bool = False  # a claim compares a row's own value (value_of)

    def frame(self) -> pd.DataFrame:
        out = []
        for row in self.rows.to_dict("records"):
            diverges = row["kind"] == "diverges"
            digits = 3 if row["metric"] in absolute_metrics() else 2  # a correlation's third decimal matters (-0.982)
            out.append({
                "claim": row["claim"],
                "kind": row["kind"].replace("_", " ") + ("" if row["metric"] == "test_bleu" else f" ({row['metric']})"),
                "ours": "-" if diverges else _with_fraction(row["estimate"], row["fraction"], digits),
                "paper": "fails to converge" if diverges else _with_fraction(row["paper_value"], row["paper_fraction"],
                                                                             digits),
                "paper on our scale": "-" if diverges else _value(row["paper_scaled"], digits=digits),
                "CI (seeds)": _interval(row["seeds_ci_low"], row["seeds_ci_high"], digits),
                "one run": _interval(row["run_low"], row["run_high"], digits),
                "CI (test set)": format_interval(row["bootstrap_ci_low"], row["bootstrap_ci_high"]),
                "p (Holm)": format_p(row["adjusted_p"]),
                "MDE": _value(row["mde"], signed=False, digits=digits),
                "seeds needed": row["seeds_needed_text"],
                "verdict": row["verdict_text"],
                "without improving": row["sensitivity_text"],
                "other BLEU": row["other_bleu_text"],
                "declared": row["declared"],
                "as trained": row["as_trained"] if row["verdict"] == NOT_TESTED else "-",
            })
        return pd.DataFrame(out)

    def notes(self) -> list[str]:
        return [*self.notes_before, protocol_note(self.family, self.own_values), *self.signatures]

    def markdown(self) -> str:
        return markdown_table(self.frame(), self.title, self.notes())

    def latex(self, label: str = "") -> str:
        return latex_table(self.frame(), self.title, self.notes(), label)


def _value(value: float, signed: bool = True, digits: int = 2) -> str:
    """A BLEU difference to 2 decimals (a correlation to 3); a count or a speed (parameters, tokens/s) whole, with
    separators."""
    if value is not None and not math.isnan(value) and abs(value) >= 1000:
        return f"{value:+,.0f}" if signed else f"{value:,.0f}"
    return format_number(value, digits, signed=signed)


def _with_fraction(value: float, fraction: float, digits: int = 2) -> str:
    """"-2.45 (-6.5%)": a comparison and its fraction of the sizing row's score; "-" without one; the value
    alone where nothing sizes it (a row's own value of an absolute metric)."""
    if value is None or math.isnan(value):
        return "-"
    if fraction is None or math.isnan(fraction):
        return _value(value, digits=digits)
    return f"{_value(value, digits=digits)} ({format_number(100 * fraction, 1, signed=True)}%)"


def _interval(low: float, high: float, digits: int = 2) -> str:
    if low is not None and not math.isnan(low) and max(abs(low), abs(high)) >= 1000:
        return f"[{_value(low)}, {_value(high)}]"
    return format_interval(low, high, digits)


def protocol_note(family: int, own_values: bool = False) -> str:
    """The protocol in one note under every claims table (docs/claims.md in full); ``own_values``: the table
    has a claim on a row's own value (``value_of``), which the note then says how to read."""
    parts = [
        f"Protocol (docs/claims.md, verdict rule {RULE}): ours and paper = the comparison in BLEU or the claim's metric "
        "(a slope: per unit of x) and as a percentage of the sizing row's score",
        "paper on our scale = the paper's percentage of our sizing row",
        f"p (Holm) = Welch's two-sided p (no difference: the larger p of the two one-sided tests at the margin, TOST), "
        f"Holm-adjusted over the study's {family} statistical claims (one not yet tested counts with p = 1)",
        "CI (seeds) = the interval of our mean contrast over seeds (Welch, fractional df) at the claim's Holm step, "
        "1 - 0.05/(claims left at its rank)",
        "one run = the interval, at the same level, in which one more run of each row puts the contrast: the paper's "
        "value is one run, so it is compared with this interval, our seeds' spread standing in for its noise",
        "CI (test set) = 95% paired bootstrap over test sentences (1000 resamples, seeds concatenated), shown, not judged",
        "MDE = the smallest true contrast the claim's Welch test detects with 80% power at its Holm level, the seeds' "
        "spread estimated as their standard deviation and drawn again (docs/claims.md)",
        "seeds needed = seeds per row for 80% power against the paper's effect on our scale (no difference: for TOST at "
        "the margin when there is none), with its range over the 95% interval of the rows' pooled spread",
        "verdict = reproduced / not reproduced (evidence against the paper: a significant reversal, or the paper's "
        "effect outside the one-run interval; no difference: our interval beyond the margin) / inconclusive / not "
        "tested (a planned seed of its rows unfinished)",
        f"without improving = the rule again without the seeds still improving when training ended ({rule_text()} "
        "fails), \"same\" when it does not change, \"-\" when none was",
        f"other BLEU = the verdict under {OTHER_BLEU_NAME} (\"same\" when it does not change)",
        "declared = whether the claim (this version of it) was declared before the study's first trial started",
        "as trained = what the rule gives a not-tested claim's models as they stand, which is not a verdict",
    ]
    if own_values:
        parts.insert(2, "a claim on a row's own value (a correlation) compares it as it is: ours is the row's mean, "
                        "the paper's value is its value on our scale, and the intervals are of that mean")
    return "; ".join(parts) + "."


def improving_note(table: StudyTable) -> str | None:
    """Which trials were still improving when training ended, by row and seed."""
    trials = table.trials
    if not len(trials) or "still_improving" not in trials:
        return None
    marked = trials[trials["still_improving"].astype(bool)]
    if not len(marked):
        return None
    by_row = {label: sorted(int(seed) for seed in group["seed"]) for label, group in marked.groupby("label", sort=False)}
    listed = "; ".join(f"{label} seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"
                       for label, seeds in by_row.items())
    return f"Still improving when training ended ({len(marked)} trials): {listed}."


def claims_table(spec_claims: list[ClaimSpec], title: str, table: StudyTable, records: list[dict],
                 references_text: list[str] | None, declared: dict[str, str] | None = None,
                 timing_pass: dict | None = None) -> ClaimsTable:
    """Every declared claim judged from the study's table and records; ``declared``: claim name -> when it was
    declared (``study.store.claim_declarations.declared_column``; missing names read as not recorded);
    ``timing_pass``: the study's ``speed.json`` (``study.analysis.speed_columns.read_speed``), which claims on
    a trial timing are judged from."""
    improving = set(table.trials["key"][table.trials["still_improving"].astype(bool)]) if len(table.trials) else set()
    settled = [r for r in records if r["key"] not in improving]
    metrics = {claim.metric for claim in spec_claims}
    rows = {metric: row_stats(table, records, metric) for metric in metrics}
    judged = judge(spec_claims, rows, table.reference, records, True, timing_pass)
    readings = {"as trained": judge(spec_claims, rows, table.reference, records, False, timing_pass),
                "without improving": judge(spec_claims, {m: row_stats(table, settled, m) for m in metrics},
                                           table.reference, settled, False, timing_pass) if improving else None}
    other_bleu = other_bleu_stats(table, records, references_text)
    other = (judge(spec_claims, {**rows, "test_bleu": other_bleu}, table.reference, records, True, timing_pass)
             if other_bleu else None)
    cache: dict[str, np.ndarray | None] = {}
    out = []
    for index, entry in enumerate(judged):
        claim = entry["claim"]
        row = {"claim": claim.name, "kind": claim.claim, "metric": claim.metric, "says": claim.says,
               "source": claim.paper.source, "verdict": entry["verdict"], "reversed": entry["reversed"],
               "verdict_text": _shown(entry), "why_not_tested": entry["why"],
               "as_trained": _shown(readings["as trained"][index]), "adjusted_p": entry.get("adjusted_p", math.nan),
               "level": entry.get("level", math.nan), "declared": (declared or {}).get(claim.name, UNRECORDED)}
        row["sensitivity_text"] = _sensitivity(entry, readings["without improving"], index, improving, records)
        row["other_bleu_verdict"] = other[index]["verdict"] if other else ""
        row["other_bleu_text"] = ("-" if other is None or claim.metric != "test_bleu" or entry["verdict"] == NOT_TESTED
                                  else "same" if _shown(other[index]) == _shown(entry) else _shown(other[index]))
        row.update(_numbers(entry, claim, entry["stats"], records,
                            references_text if claim.metric == "test_bleu" else None, cache))
        out.append(row)
    return ClaimsTable(f"Claims: {title}", pd.DataFrame(out), _notes_before(spec_claims, out, table, declared)
                       + _pass_notes(judged, timing_pass),
                       sum(1 for claim in spec_claims if claim.claim != "diverges"),
                       _signatures(records, references_text), any(claim.value_of is not None for claim in spec_claims))


def _shown(entry: dict) -> str:
    return entry["verdict"] + (" (reversed)" if entry["reversed"] else "")


def _sensitivity(entry: dict, without: list[dict] | None, index: int, improving: set[str], records: list[dict]) -> str:
    """The verdict without the still-improving seeds: "same", that verdict, UNDER_TWO, or "-" when none of the
    claim's rows has such a seed (or the claim is not tested)."""
    if without is None or entry["verdict"] == NOT_TESTED or entry.get("timing_pass"):  # a pass's rounds: no seeds
        return "-"
    claim = entry["claim"]
    rows = {claim.row} if claim.claim == "diverges" else set(entry["weights"])
    if not any(r["key"] in improving for r in records if r["label"] in rows):
        return "-"
    again = without[index]
    if again["verdict"] == NOT_TESTED:
        return UNDER_TWO
    return "same" if _shown(again) == _shown(entry) else _shown(again)


def _notes_before(spec_claims: list[ClaimSpec], out: list[dict], table: StudyTable, declared: dict[str, str] | None
                  ) -> list[str]:
    notes = [f"{claim.name}: {claim.says} ({claim.paper.source})." for claim in spec_claims]
    notes += [f"{claim.name}: margin {claim.margin:g} of the sizing row's score, because {claim.margin_basis}."
              for claim in spec_claims if claim.claim == "no_difference"]
    notes += [f"{row['claim']} not tested: {row['why_not_tested']}." for row in out
              if row["verdict"] == NOT_TESTED and row["why_not_tested"]]
    late = [row["claim"] for row in out if row["declared"] == AFTER]
    if late:
        notes.append(f"Declared after the results (after the study's first trial started): {', '.join(late)}.")
    unrecorded = [row["claim"] for row in out if row["declared"] == UNRECORDED]
    if unrecorded:
        notes.append(f"No record of when these were declared (read them as declared after the results): "
                     f"{', '.join(unrecorded)}.")
    improving = improving_note(table)
    return notes + ([improving] if improving else [])


def _pass_notes(judged: list[dict], timing_pass: dict | None) -> list[str]:
    """Which claims were judged from the timing pass, and what its rounds carry."""
    from_pass = [entry for entry in judged if entry.get("timing_pass")]
    if not from_pass or timing_pass is None:
        return []
    threads = f"{timing_pass['threads']} thread" + ("s" if timing_pass["threads"] != 1 else "")
    return [f"{', '.join(entry['claim'].name for entry in from_pass)}: judged from the study's timing pass "
            f"(python -m study.speed, {timing_pass['date']}, {from_pass[0]['timing_pass']}, {threads}, "
            f"{timing_pass['repeats']} interleaved rounds of each row's model at fresh weights), not the trials' own "
            f"timings. Each row's samples are its rounds, taken as independent (interleaving pairs them, which the "
            f"test leaves out): ours is their mean (the table's speed columns show the fastest round), and the test, "
            f"CI, one run and MDE are of the round-to-round noise of that machine, not of seeds or machines, so more "
            f"rounds narrow them. The verdict says how the rows' speeds compare there; for a size claim, whether "
            f"the paper's ratio (other hardware, its model size) holds on that machine. Seeds needed does not apply."]


def _signatures(records: list[dict], references_text: list[str] | None) -> list[str]:
    """The BLEU the verdicts use (the trials' sacreBLEU signature) and the other BLEU's."""
    lines = [bleu_signature_note(records)]
    if references_text is not None:
        lines.append(f"Other BLEU: sacreBLEU {other_bleu_signature(references_text)}.")
    return [line for line in lines if line]


def _numbers(entry: dict, claim: ClaimSpec, rows: dict, records: list[dict], references_text: list[str] | None,
             cache: dict) -> dict:
    nothing = {"estimate": math.nan, "fraction": math.nan, "paper_value": math.nan, "paper_fraction": math.nan,
               "paper_scaled": math.nan, "seeds_ci_low": math.nan, "seeds_ci_high": math.nan, "run_low": math.nan,
               "run_high": math.nan, "p_value": math.nan, "df": math.nan, "bootstrap_ci_low": math.nan,
               "bootstrap_ci_high": math.nan, "mde": math.nan, "seeds_needed": None, "seeds_needed_low": None,
               "seeds_needed_high": None, "seeds_needed_text": "-"}
    if claim.claim == "diverges":
        return nothing
    if entry.get("mixed_timing"):  # the seeds' timings measure their machines (study.analysis.claims.timing_machines)
        return {**nothing, "paper_value": claim.paper.value, "paper_fraction": entry["paper_fraction"],
                "paper_scaled": entry["paper_scaled"]}
    test = entry["test"]
    _, bootstrap = contrast_test(entry["weights"], records, references_text, cache)
    level = entry.get("level", math.nan)
    seeds_low, seeds_high = entry.get("mean_interval", (math.nan, math.nan))
    run_low, run_high = entry.get("run_interval", (math.nan, math.nan))
    numbers = {**nothing, "estimate": test.estimate, "paper_value": claim.paper.value,
               "fraction": test.estimate / entry["sizing"] if entry["sizing"] else math.nan,
               "paper_fraction": entry["paper_fraction"], "paper_scaled": entry["paper_scaled"],
               "seeds_ci_low": seeds_low, "seeds_ci_high": seeds_high, "run_low": run_low, "run_high": run_high,
               "p_value": entry["family_p"], "df": test.df, "bootstrap_ci_low": bootstrap.ci_low,
               "bootstrap_ci_high": bootstrap.ci_high}
    if math.isnan(level) or math.isnan(test.se):
        return numbers
    if entry.get("timing_pass"):  # rounds of one model: more seeds would not narrow anything
        return {**numbers, "mde": minimum_detectable_effect(
            [(weight, rows[label].std, rows[label].n) for label, weight in entry["weights"].items()], level)}
    terms = [(weight, rows[label].std, rows[label].n) for label, weight in entry["weights"].items()]
    if claim.claim == "no_difference":
        needed = seeds_needed_range(terms, lambda scaled: equivalence_seeds_needed(scaled, entry["margin"], level))
    else:
        needed = seeds_needed_range(terms, lambda scaled: seeds_needed(scaled, entry["paper_scaled"], level))
    return {**numbers, "mde": minimum_detectable_effect(terms, level), "seeds_needed": needed[1],
            "seeds_needed_low": needed[0], "seeds_needed_high": needed[2], "seeds_needed_text": _seeds_text(*needed)}


def _seeds_text(low: int | None, point: int | None, high: int | None) -> str:
    """"25 (9 to 210)": the seeds needed at the estimated spread and at the ends of its 95% range (beyond 100:
    "> 100")."""
    if point is None:
        return f"> {MOST_SEEDS}"
    return f"{point} ({low} to {high if high is not None else f'> {MOST_SEEDS}'})"


def export_claims(claims: ClaimsTable, directory: Path) -> list[Path]:
    """claims.md, claims.csv and claims.tex (label tab:<study>-claims) in the study's directory."""
    paths = [directory / name for name in FILES]
    write_lines(paths[0], claims.markdown().splitlines())
    write_lines(paths[1], claims.rows.to_csv(index=False).splitlines())
    write_lines(paths[2], claims.latex(f"tab:{directory.name}-claims").splitlines())
    return paths
