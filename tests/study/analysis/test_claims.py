"""Claims in a study file: their validation, the verdict rule branch by branch, the claims table
from records (the verdict without the seeds still improving, when each claim was declared), and that
claims never change what --resume compares.

Modules covered here: ``study.spec.claims``, ``study.analysis.claims_table`` and
``study.store.claim_declarations``."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

from nmt.errors import ConfigError
from study.analysis.claims import INCONCLUSIVE, NOT_REPRODUCED, NOT_TESTED, REPRODUCED, claim_weights, verdict
from study.analysis.claims_table import UNDER_TWO, claims_table, export_claims
from study.analysis.tables import build_table
from study.spec.loading import spec_from_dict
from study.spec.model import trained_part
from study_helpers import grid_study

VARIANTS = """  - {label: base, set: {}}
  - {label: small, set: {model.hidden: 8}}
  - {label: tiny, set: {model.hidden: 4}}"""


def study_tree(claims: list) -> dict:
    tree = yaml.safe_load(grid_study("claimed", VARIANTS, seeds=3))
    tree["table"] = {"reference": "base"}
    tree["claims"] = claims
    return tree


def claim(**overrides) -> dict:
    return {"name": "smaller-worse", "says": "a smaller model is worse", "claim": "size", "row": "small",
            "paper": {"value": -2.0, "reference": 20.0, "source": "Someone 2020, Table 1"}, **overrides}


def test_a_valid_claim_is_typed_and_defaults_to_the_table_reference():
    spec = spec_from_dict(study_tree([claim()]), "s.yaml")
    (parsed,) = spec.fields.claims
    assert claim_weights(parsed, "base") == {"small": 1.0, "base": -1.0} and parsed.sizing_row("base") == "base"
    slope = spec_from_dict(study_tree([claim(row=None, claim="direction", slope={4: "tiny", 8: "small", 16: "base"})]),
                           "s.yaml").fields.claims[0]
    assert sum(claim_weights(slope, "base").values()) == pytest.approx(0.0) and slope.sizing_row("base") == "tiny"


@pytest.mark.parametrize("change, message", [
    ({"row": "smal"}, r"claims\[0\]\.row: 'smal' is not a row of this study \(did you mean 'small'\?\); rows: base, small, tiny"),
    ({"contrast": {"small": 1, "base": -1}}, r"claims\[0\]\.row: give exactly one of row .* got row, contrast"),
    ({"row": None, "contrast": {"small": 1, "base": 0}}, r"contrast\.base: = 0: a weight is a number from 1e-06 to 1e\+06"),
    ({"row": None, "contrast": {"small": 1, "base": 1e200}}, r"contrast\.base: = 1e\+200: a weight is a number from"),
    ({"row": None, "claim": "direction", "slope": {"1": "tiny", "1.0": "small"}}, r"slope\.1\.0: is the same x as slope\.1;"),
    ({"row": None, "claim": "direction", "slope": {1: "tiny", 1e200: "small"}}, r"slope\.1e\+200: an x value is a number of "
                                                                                 r"at most 1e\+06"),
    ({"row": None, "claim": "direction", "slope": {1: "small", 2: "tiny", 3: "small"}}, r"slope: names row 'small' at two "
                                                                                        r"x values"),
    ({"paper": {"value": -2.0, "reference": 1e-300, "source": "x"}}, r"paper\.value: = -2\.0 is 2e\+300 times"),
    ({"paper": {"value": -2.0, "reference": 1e200, "source": "x"}}, r"paper\.reference: = 1e\+200: .* at most 1e\+12"),
    ({"claim": "no_difference"}, r"claims\[0\]\.margin: = None: a no_difference claim needs"),
    ({"margin": 0.1}, r"margin: only a no_difference claim has a margin"),
    ({"margin_basis": "why"}, r"margin_basis: only a no_difference claim has a margin"),
    ({"claim": "no_difference", "margin": 0.02}, r"claims\[0\]\.margin_basis: missing; say in one line why the margin"),
    ({"paper": {"value": -2.0, "source": "x"}}, r"paper\.reference: = None: the paper's score"),
    ({"paper": {"value": -2.0, "reference": 20.0}}, r"paper\.source: missing"),
    ({"claim": "direction", "paper": {"value": 0.0, "reference": 20.0, "source": "x"}}, r"paper\.value: is 0"),
    ({"claim": "diverges", "row": None, "contrast": {"small": 1, "base": -1}}, r"a diverges claim names the one row"),
    ({"name": "Bad Name"}, r"claims\[0\]\.name: = 'Bad Name': a short identifier"),
    ({"says": ""}, r"claims\[0\]\.says: missing"),
    ({"metric": "bleu"}, r"claims\[0\]\.metric: = 'bleu'"),
    ({"against": "small"}, r"against: is the claim's own row 'small'"),
    ({"colour": "red"}, r"unknown key 'claims\[0\]\.colour'"),
])
def test_every_bad_claim_is_one_line_naming_the_key(change, message):
    with pytest.raises(ConfigError, match=message) as error:
        spec_from_dict(study_tree([claim(**change)]), "s.yaml")
    assert "\n" not in str(error.value) and str(error.value).startswith("s.yaml: ")


def test_claims_must_be_a_list_of_mappings_with_unique_names():
    with pytest.raises(ConfigError, match="claims: a list of claims"):
        spec_from_dict(study_tree({"a": 1}), "s.yaml")
    with pytest.raises(ConfigError, match=r"claims\[1\]: a claim is a mapping"):
        spec_from_dict(study_tree([claim(), "smaller is worse"]), "s.yaml")
    with pytest.raises(ConfigError, match=r"claims\[1\]\.name: = 'smaller-worse' is declared twice"):
        spec_from_dict(study_tree([claim(), claim()]), "s.yaml")


def test_claims_do_not_change_what_resume_compares():
    before, after = study_tree([claim()]), study_tree([claim(says="smaller models lose BLEU")])
    after["description"], after["table"]["title"] = "another description", "another title"
    assert trained_part(before) == trained_part(after) and "claims" not in trained_part(before)
    assert spec_from_dict(before, "s.yaml").fingerprint == spec_from_dict(after, "s.yaml").fingerprint
    after["seeds"] = 4
    assert trained_part(before) != trained_part(after)


def test_the_verdict_rule_branch_by_branch():
    """verdict(kind, estimate, Holm p, our mean's interval, one run's interval, the paper on our scale, margin)."""
    mean, run = (-3.5, -2.5), (-5.0, -1.0)
    # a significant effect with the paper's sign: reproduced (direction), and for size also the paper inside one run's interval
    assert verdict("direction", -3.0, 0.01, mean, run, -8.0, None) == (REPRODUCED, False)
    assert verdict("size", -3.0, 0.01, mean, run, -8.0, None) == (NOT_REPRODUCED, False)
    assert verdict("size", -3.0, 0.01, mean, run, -4.0, None) == (REPRODUCED, False)
    # significant the other way: not reproduced, flagged reversed
    assert verdict("direction", 3.0, 0.01, (2.5, 3.5), (1.0, 5.0), -1.0, None) == (NOT_REPRODUCED, True)
    # not significant after Holm: not reproduced only where the paper's effect lies outside one run's interval
    assert verdict("direction", -3.0, 0.2, (-6.0, 0.5), (-7.0, 1.0), -8.0, None) == (NOT_REPRODUCED, False)
    assert verdict("direction", -3.0, 0.2, (-6.0, 0.5), (-7.0, 1.0), -1.0, None) == (INCONCLUSIVE, False)
    assert verdict("size", -0.5, 0.6, (-2.5, 1.5), (-4.0, 3.0), 2.0, None) == (INCONCLUSIVE, False)
    # the audit's case: the paper's sign, its value inside the interval, not significant -> inconclusive, not a refutation
    assert verdict("direction", -0.66, 0.34, (-1.50, 0.17), (-3.05, 1.73), -1.18, None) == (INCONCLUSIVE, False)
    # no difference: the two one-sided tests reject -> reproduced; our interval beyond the margin -> not reproduced
    assert verdict("no_difference", 0.2, 0.01, (-0.5, 0.9), (-2.0, 2.4), 0.0, 1.0) == (REPRODUCED, False)
    assert verdict("no_difference", 2.0, 0.9, (1.5, 2.5), (0.0, 4.0), 0.0, 1.0) == (NOT_REPRODUCED, False)
    assert verdict("no_difference", -2.0, 0.9, (-2.5, -1.5), (-4.0, 0.0), 0.0, 1.0) == (NOT_REPRODUCED, False)
    # a difference significantly away from 0 but not from the margin: neither
    assert verdict("no_difference", 0.8, 0.3, (0.1, 1.5), (-1.0, 2.6), 0.0, 1.0) == (INCONCLUSIVE, False)


def bleu_record(label: str, row: int, seed: int, bleu: float, status: str = "ok", params: int = 1000) -> dict:
    return {"key": f"{label}{seed}", "label": label, "row": row, "seed": seed, "config": {}, "params": {},
            "status": status, "hyp_path": None, "artifacts": [],
            "metrics": {"test_bleu": bleu if status == "ok" else None, "params": params, "best_epoch": 5, "epochs": 8}}


def records_of(rows: dict[str, list[float]]) -> list[dict]:
    return [bleu_record(label, row, seed, bleu) for row, (label, scores) in enumerate(rows.items())
            for seed, bleu in enumerate(scores, 1)]


def judged(claims: list, records: list[dict], plateau: dict | None = None, seeds: int = 3, timing_pass: dict | None = None):
    spec = spec_from_dict(study_tree(claims), "s.yaml")
    labels = ["base", "small", "tiny"]
    table = build_table(records, "t", "base", None, labels, {label: seeds for label in labels}, plateau)
    return claims_table(spec.fields.claims, "t", table, records, None, timing_pass=timing_pass)


def test_claims_table_from_records(tmp_path):
    records = records_of({"base": [30.0, 30.4, 29.8], "small": [27.0, 27.3, 26.9], "tiny": [24.0, 24.2, 23.7]})
    claims = [claim(),  # paper -10% of the reference: ours -9.9%
              claim(name="tiny-same", claim="no_difference", margin=0.02, margin_basis="a reason", row="tiny",
                    against="small",
                    paper={"value": 0.1, "reference": 20.0, "source": "x"}),
              claim(name="params", claim="direction", metric="params", row="tiny",
                    paper={"value": -10, "reference": 100, "source": "x"}),
              claim(name="tiny-fails", claim="diverges", row="tiny", paper={"source": "x"})]
    table = judged(claims, records)
    rows = table.rows.set_index("claim")
    assert rows.loc["smaller-worse", "verdict"] == REPRODUCED
    assert rows.loc["smaller-worse", "estimate"] == pytest.approx(27.0667 - 30.0667, abs=1e-3)
    assert rows.loc["smaller-worse", "paper_scaled"] == pytest.approx(-0.1 * 30.0667, abs=1e-3)
    assert rows.loc["tiny-same", "verdict"] == NOT_REPRODUCED  # a 3 BLEU gap against a margin of 0.6
    # the parameter counts have no spread: the same count in every row is no difference, so not reproduced
    assert rows.loc["params", "verdict"] == NOT_REPRODUCED and rows.loc["params", "estimate"] == 0
    assert rows.loc["tiny-fails", "verdict"] == NOT_REPRODUCED  # every seed finished
    assert math.isnan(rows.loc["smaller-worse", "bootstrap_ci_low"])  # no test translations here
    assert table.family == 3
    written = export_claims(table, tmp_path)
    assert [path.name for path in written] == ["claims.md", "claims.csv", "claims.tex"]
    markdown = (tmp_path / "claims.md").read_text(encoding="utf-8")
    assert "| smaller-worse" in markdown and "Holm-adjusted over the study's 3 statistical claims" in markdown
    assert "\\begin{tabular}" in (tmp_path / "claims.tex").read_text(encoding="utf-8")


def test_only_unfinished_seeds_leave_a_claim_untested_and_improving_ones_are_a_caveat():
    finished = {"base": [30.0, 30.4, 29.8], "small": [27.0, 27.3, 26.9], "tiny": [24.0, 24.2, 23.7]}
    records = records_of(finished)
    unfinished = [r for r in records if not (r["label"] == "small" and r["seed"] == 3)]
    rows = judged([claim()], unfinished).rows.set_index("claim")
    assert rows.loc["smaller-worse", "verdict"] == NOT_TESTED
    assert rows.loc["smaller-worse", "why_not_tested"] == "small has 2 of 3 seeds"
    assert rows.loc["smaller-worse", "as_trained"] == REPRODUCED  # what the rule would say: not a verdict
    # a seed still improving: the verdict stands, and the rule is applied again without it
    improving = judged([claim()], records, plateau={"base2": False})
    rows = improving.rows.set_index("claim")
    assert rows.loc["smaller-worse", "verdict"] == REPRODUCED
    assert rows.loc["smaller-worse", "sensitivity_text"] == "same"
    assert "Still improving when training ended (1 trials): base seed 2." in improving.markdown()
    # two of a row's three seeds improving: one left, too few to judge without them
    two = judged([claim()], records, plateau={"small1": False, "small2": False}).rows.set_index("claim")
    assert two.loc["smaller-worse", "verdict"] == REPRODUCED and two.loc["smaller-worse", "sensitivity_text"] == UNDER_TWO
    # an improving seed of a row the claim does not compare changes nothing there
    other = judged([claim()], records, plateau={"tiny1": False}).rows.set_index("claim")
    assert other.loc["smaller-worse", "sensitivity_text"] == "-"
    # the verdict without it can differ: base's high seed set aside, small no longer lies below base
    flips = records_of({"base": [30.0, 27.2, 27.1], "small": [27.0, 27.3, 26.9], "tiny": [24.0, 24.2, 23.7]})
    for record in flips:
        if record["label"] == "base":
            record["metrics"]["test_bleu"] = {1: 31.0, 2: 31.2, 3: 27.1}[record["seed"]]
    sensitive = judged([claim(claim="direction")], flips, plateau={"base3": False}).rows.set_index("claim")
    assert sensitive.loc["smaller-worse", "sensitivity_text"] not in ("same", "-", UNDER_TWO)


def test_a_speed_claim_is_judged_only_on_seeds_timed_on_one_cpu_type():
    records = records_of({"base": [30.0, 30.4, 29.8], "small": [27.0, 27.3, 26.9], "tiny": [24.0, 24.2, 23.7]})
    xeon = "Intel(R) Xeon(R) Processor (family 6, model 167, stepping 1; avx512f, avx2)"
    for record in records:
        record["metrics"].update(train_tokens_per_s=2000.0 + 100 * record["seed"] + (500 if record["label"] == "small"
                                                                                     else 0), cpu=xeon)
    faster = claim(name="small-faster", claim="direction", metric="train_tokens_per_s",
                   paper={"value": 400.0, "reference": 2000.0, "source": "x"})
    assert judged([faster], records).rows.set_index("claim").loc["small-faster", "verdict"] == REPRODUCED
    # the reference row's seed 3 timed on another CPU type (another model of the same name counts as another type)
    records[2]["metrics"]["cpu"] = "Intel(R) Xeon(R) Processor (family 6, model 85, stepping 7; avx512f, avx2)"
    rows = judged([faster, claim()], records).rows.set_index("claim")
    assert rows.loc["small-faster", "verdict"] == NOT_TESTED and rows.loc["small-faster", "as_trained"] == NOT_TESTED
    assert math.isnan(rows.loc["small-faster", "estimate"]) and rows.loc["small-faster", "paper_value"] == 400.0
    assert rows.loc["small-faster", "why_not_tested"] == (
        "its seeds were timed on 2 CPU types (Intel(R) Xeon(R) Processor (family 6, model 167, stepping 1), "
        "Intel(R) Xeon(R) Processor (family 6, model 85, stepping 7)), and a train_tokens_per_s claim compares "
        "seeds timed on one")
    assert rows.loc["smaller-worse", "verdict"] == REPRODUCED  # BLEU is the model's, not the machine's
    del records[2]["metrics"]["cpu"]  # a record from before CPUs were kept
    why = judged([faster], records).rows.set_index("claim").loc["small-faster", "why_not_tested"]
    assert "2 CPU types (Intel(R) Xeon(R) Processor (family 6, model 167, stepping 1), unrecorded)" in why


def timing_pass(rounds: dict[str, list[float]], decode: dict[str, list[float]] | None = None,
                devices: dict[str, str] | None = None) -> dict:
    """A speed.json as python -m study.speed writes it, with these rows' train tokens/s (and decode words/s) in
    each round."""
    decode = decode or {label: [10.0] * len(values) for label, values in rounds.items()}
    return {"date": "2026-12-05", "machine": "Intel(R) Xeon(R) Processor", "threads": 1,
            "cpu": "Intel(R) Xeon(R) Processor (family 6, model 207, stepping 2; avx512f, avx2)",
            "repeats": len(next(iter(rounds.values()))),
            "rows": [{"label": label, "train_tokens_per_s": max(values), "decode_words_per_s": max(decode[label]),
                      "train_tokens_per_s_rounds": values, "decode_words_per_s_rounds": decode[label],
                      "device": (devices or {}).get(label, "cpu")}
                     for label, values in rounds.items()]}


def timed_records() -> list[dict]:
    """Three rows of three seeds whose own timings were taken on two CPU types."""
    records = records_of({"base": [30.0, 30.4, 29.8], "small": [27.0, 27.3, 26.9], "tiny": [24.0, 24.2, 23.7]})
    for record in records:  # the small row looks fastest only by its seed 1's machine
        record["metrics"].update(train_tokens_per_s=9000.0 if record["seed"] == 1 else 2000.0, decode_words_per_s=50.0,
                                 cpu=f"CPU type {1 if record['seed'] == 1 else 2}")
    return records


ROUNDS = {"base": [2000.0, 2010.0, 1990.0], "small": [2500.0, 2490.0, 2520.0], "tiny": [3000.0, 3100.0, 2900.0]}
FASTER = claim(name="small-faster", claim="direction", metric="train_tokens_per_s",
               paper={"value": 400.0, "reference": 2000.0, "source": "x"})


def test_a_speed_claim_is_judged_from_the_timing_pass_when_the_study_has_one():
    """The pass's rounds are the rows' samples (Welch's test recomputed with scipy), whatever machines timed the
    seeds, and the note says what they carry; the BLEU claims keep their seeds."""
    from scipy.stats import ttest_ind

    records = timed_records()
    assert judged([FASTER], records).rows.loc[0, "verdict"] == NOT_TESTED
    table = judged([FASTER, claim()], records, timing_pass=timing_pass(ROUNDS))
    rows = table.rows.set_index("claim")
    expected = ttest_ind(ROUNDS["small"], ROUNDS["base"], equal_var=False)
    assert rows.loc["small-faster", "verdict"] == REPRODUCED
    assert rows.loc["small-faster", "estimate"] == pytest.approx(2503.3333333 - 2000.0)
    assert rows.loc["small-faster", "fraction"] == pytest.approx(503.3333333 / 2000.0)
    assert rows.loc["small-faster", "paper_scaled"] == pytest.approx(0.2 * 2000.0)
    assert rows.loc["small-faster", "p_value"] == pytest.approx(expected.pvalue, rel=1e-9)
    assert rows.loc["small-faster", "df"] == pytest.approx(expected.df, rel=1e-9)
    assert rows.loc["small-faster", "seeds_needed_text"] == "-" and math.isfinite(rows.loc["small-faster", "mde"])
    assert rows.loc["smaller-worse", "verdict"] == REPRODUCED and rows.loc["smaller-worse", "seeds_needed_text"] != "-"
    note = next(line for line in table.notes() if line.startswith("small-faster: judged from the study's timing pass"))
    assert ("(python -m study.speed, 2026-12-05, Intel(R) Xeon(R) Processor (family 6, model 207, stepping 2; avx512f, "
            "avx2), 1 thread, 3 interleaved rounds of each row's model at fresh weights)") in note
    assert "not of seeds or machines" in note and "smaller-worse" not in note
    # a seed still improving changes nothing the pass measured: no "without improving" reading of it
    improving = judged([FASTER, claim()], records, plateau={"small2": False}, timing_pass=timing_pass(ROUNDS)).rows
    assert improving.set_index("claim").loc["small-faster", "sensitivity_text"] == "-"
    assert improving.set_index("claim").loc["smaller-worse", "sensitivity_text"] != "-"


def test_a_pass_claim_reads_its_metrics_rounds_and_sizes_by_its_sizing_rows_rounds():
    decode = {"base": [40.0, 44.0, 42.0], "small": [50.0, 52.0, 54.0], "tiny": [60.0, 61.0, 59.0]}
    sized = claim(name="tiny-decodes-faster", claim="size", metric="decode_words_per_s", row="tiny", against="small",
                  relative_to="base", paper={"value": 4.0, "reference": 40.0, "source": "x"})
    same = claim(name="small-same-speed", claim="no_difference", metric="decode_words_per_s", margin=0.05,
                 margin_basis="a reason", paper={"value": 0.0, "reference": 40.0, "source": "x"})
    rows = judged([sized, same], timed_records(), timing_pass=timing_pass(ROUNDS, decode)).rows.set_index("claim")
    assert rows.loc["tiny-decodes-faster", "estimate"] == pytest.approx(60.0 - 52.0)
    assert rows.loc["tiny-decodes-faster", "paper_scaled"] == pytest.approx(0.1 * 42.0)  # base's mean round, not small's
    # 8 words/s apart beyond the rounds' noise, and the paper's +10% of base (4.2) inside one more round's interval
    assert rows.loc["tiny-decodes-faster", "verdict"] == REPRODUCED
    assert rows.loc["tiny-decodes-faster", "run_low"] < 4.2 < rows.loc["tiny-decodes-faster", "run_high"]
    assert rows.loc["small-same-speed", "estimate"] == pytest.approx(52.0 - 42.0)
    assert rows.loc["small-same-speed", "verdict"] == NOT_REPRODUCED  # 10 words/s apart against a margin of 2.1


def test_a_pass_without_the_rounds_a_claim_needs_leaves_it_not_tested_and_says_why():
    records = timed_records()
    again = "python -m study.speed with --repeats 3 or more times every row again"

    def why(speed: dict) -> str:
        row = judged([FASTER], records, timing_pass=speed).rows.loc[0]
        assert row["verdict"] == NOT_TESTED
        return row["why_not_tested"]

    assert why(timing_pass({"base": ROUNDS["base"]})) == f"small is not in the timing pass ({again})"
    assert why(timing_pass({label: v[:1] for label, v in ROUNDS.items()})) == (
        f"small: the timing pass has 1 round of it ({again}); base: the timing pass has 1 round of it ({again})")
    old = timing_pass(ROUNDS)
    for row in old["rows"]:
        del row["train_tokens_per_s_rounds"]
    assert why(old).startswith("small: the timing pass kept no rounds, only its fastest (written before passes kept them")
    assert why(timing_pass(ROUNDS, devices={"small": "cuda:0"})) == (
        "the timing pass timed its rows on 2 devices (cpu, cuda:0), and a train_tokens_per_s claim compares rows "
        "timed on one")
    # the study's seeds still gate it, as every claim
    waiting = judged([FASTER], [r for r in records if r["key"] != "small3"], timing_pass=timing_pass(ROUNDS)).rows
    assert waiting.loc[0, "verdict"] == NOT_TESTED and waiting.loc[0, "why_not_tested"] == "small has 2 of 3 seeds"


def test_a_fails_to_converge_claim_waits_for_every_seed_like_any_claim():
    claims = [claim(name="tiny-fails", claim="diverges", row="tiny", paper={"source": "x"})]
    records = records_of({"base": [30.0, 30.4, 29.8], "small": [27.0, 27.3, 26.9], "tiny": [24.0]})
    records.append(bleu_record("tiny", 2, 2, 0.0, status="diverged"))
    waiting = judged(claims, records).rows
    assert waiting.loc[0, "verdict"] == NOT_TESTED and waiting.loc[0, "why_not_tested"] == "tiny has 2 of 3 seeds"
    assert waiting.loc[0, "as_trained"] == REPRODUCED
    records.append(bleu_record("tiny", 2, 3, 23.9))
    assert judged(claims, records).rows.loc[0, "verdict"] == REPRODUCED
    converged = records_of({"base": [30.0, 30.4, 29.8], "small": [27.0, 27.3, 26.9], "tiny": [24.0, 24.2, 23.7]})
    rows = judged(claims, converged, plateau={"tiny2": False}).rows
    assert rows.loc[0, "verdict"] == NOT_REPRODUCED and rows.loc[0, "sensitivity_text"] == "same"


def test_a_no_difference_claim_is_reproduced_only_when_both_one_sided_tests_reject():
    """The TOST p-value recomputed independently from scipy's Welch tests of the shifted samples."""
    from scipy.stats import ttest_ind

    scores = {"base": [30.0, 30.4, 29.8], "small": [27.0, 27.3, 26.9], "tiny": [27.1, 27.2, 27.0]}
    same = claim(name="tiny-same", claim="no_difference", margin=0.02, margin_basis="a reason", row="tiny",
                 against="small", paper={"value": 0.1, "reference": 20.0, "source": "x"})
    rows = judged([same], records_of(scores)).rows.set_index("claim")
    margin = 0.02 * sum(scores["small"]) / 3
    tiny, small = scores["tiny"], scores["small"]
    above = ttest_ind([x + margin for x in tiny], small, equal_var=False, alternative="greater").pvalue
    below = ttest_ind([x - margin for x in tiny], small, equal_var=False, alternative="less").pvalue
    assert rows.loc["tiny-same", "p_value"] == pytest.approx(max(above, below), rel=1e-9)
    assert rows.loc["tiny-same", "verdict"] == REPRODUCED  # the family has one claim: Holm changes nothing
    wide = records_of({**scores, "tiny": [25.1, 29.2, 27.0]})  # the same mean, a wide spread: TOST fails
    rows = judged([same], wide).rows.set_index("claim")
    assert rows.loc["tiny-same", "adjusted_p"] >= 0.05 and rows.loc["tiny-same", "verdict"] == INCONCLUSIVE


def test_holm_counts_every_statistical_claim_of_the_study():
    records = records_of({"base": [30.0, 30.4, 29.8], "small": [29.0, 29.9, 29.1], "tiny": [24.0, 24.2, 23.7]})
    one = judged([claim(claim="direction")], records).rows
    two = judged([claim(claim="direction"), claim(name="tiny", claim="direction", row="tiny")], records).rows
    smallest = two.loc[1, "p_value"]  # tiny's 6 BLEU gap: the smallest p, multiplied by the family's 2
    assert two.loc[1, "adjusted_p"] == pytest.approx(2 * smallest)
    assert two.loc[0, "adjusted_p"] == pytest.approx(max(two.loc[0, "p_value"], 2 * smallest))
    assert one.loc[0, "adjusted_p"] == pytest.approx(one.loc[0, "p_value"])


def test_the_other_bleu_is_scored_again_from_the_translations(tmp_path):
    """Lowercased, intl-tokenised BLEU from each seed's stored translation: a row that only gets the case
    wrong scores far lower in cased BLEU and the same in the other; a missing translation gives no column."""
    from sacrebleu.metrics import BLEU

    from study.analysis.claims import other_bleu_stats

    references = ["A man rides a Bike .", "Two Dogs play in the Snow .", "The Girl is reading a Book ."] * 4
    records = []
    for row, (label, transform) in enumerate((("base", str), ("small", str.lower), ("tiny", str.upper))):
        for seed in (1, 2):
            path = tmp_path / f"{label}{seed}.hyp"
            lines = [transform(line) for line in references]
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            record = bleu_record(label, row, seed, BLEU().corpus_score(lines, [references]).score)
            record["hyp_path"] = str(path)
            records.append(record)
    labels = ["base", "small", "tiny"]
    table = build_table(records, "t", "base", references, labels, {label: 2 for label in labels})
    other = other_bleu_stats(table, records, references)
    lowered = BLEU(lowercase=True, tokenize="intl").corpus_score(references, [references]).score
    assert other["small"].mean == pytest.approx(lowered) and other["tiny"].mean == pytest.approx(lowered)
    assert table.rows.set_index("label").loc["small", "bleu_mean"] < lowered - 20  # cased BLEU punishes the case
    records[0]["hyp_path"] = str(tmp_path / "gone.hyp")
    assert other_bleu_stats(table, records, references) is None


def test_a_study_file_whose_claims_name_rows_the_study_lacks_is_refused_before_study_json_changes(tmp_path):
    from study_helpers import in_process

    name = "context_gates_m30k"
    reference = Path(__file__).resolve().parents[3] / "results" / "reference" / name
    shutil.copytree(reference, tmp_path / "results" / name)
    before = (tmp_path / "results" / name / "study.json").read_bytes()
    relabelled = tmp_path / f"{name}.yaml"  # the row relabelled, and the claims with it: a valid file on its own
    source = Path(__file__).resolve().parents[3] / "search_spaces" / "multi30k" / f"{name}.yaml"
    relabelled.write_text(source.read_text(encoding="utf-8").replace("GRU + CG (source)", "GRU + source gate"))
    refused = in_process(str(relabelled), "--results", str(tmp_path / "results"), module="study.table")
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert f"{relabelled} (read on the rows of " in line and "'GRU + source gate' is not a row of this study" in line
    assert (tmp_path / "results" / name / "study.json").read_bytes() == before
    assert in_process(name, "--results", str(tmp_path / "results"), module="study.table").returncode == 0  # still reads


def test_declarations_record_each_version_of_a_claim_once_and_say_whether_it_came_before_the_trials():
    from study.store.claim_declarations import AFTER, BEFORE, KEY, UNRECORDED, declared_column, with_declarations
    from study.store.record_validation import BadRecord

    (first,) = spec_from_dict(study_tree([claim()]), "s.yaml").fields.claims
    stored = with_declarations(None, [first], "2026-12-01 10:00:00", "study.json")
    assert with_declarations({KEY: stored}, [first], "2026-12-03 10:00:00", "study.json") == stored  # seen before
    (changed,) = spec_from_dict(study_tree([claim(says="smaller is worse")]), "s.yaml").fields.claims
    both = with_declarations({KEY: stored}, [changed], "2026-12-03 10:00:00", "study.json")
    assert [version["declared"] for version in both["smaller-worse"]] == ["2026-12-01 10:00:00", "2026-12-03 10:00:00"]
    state = {KEY: both, "started": "2026-12-02 00:00:00"}
    assert declared_column(state, [first], "study.json") == {"smaller-worse": BEFORE}
    assert declared_column(state, [changed], "study.json") == {"smaller-worse": AFTER}  # its text came later
    assert declared_column({"started": "2026-12-02 00:00:00"}, [first], "study.json") == {"smaller-worse": UNRECORDED}
    for damaged in ({"smaller-worse": "yes"}, {"smaller-worse": [{"hash": "ab"}]},
                    {"smaller-worse": [{"hash": "ab", "declared": "yesterday"}]}):
        with pytest.raises(BadRecord, match=r"^study.json: 'claims_declared\.smaller-worse(\[0\])?'.*; move study.json's"):
            declared_column({KEY: damaged, "started": "2026-12-02 00:00:00"}, [first], "study.json")


def test_study_table_from_a_file_declares_its_claims_and_the_table_says_after_the_results(tmp_path):
    from study_helpers import in_process

    name = "fsmn_m30k"
    shutil.copytree(Path(__file__).resolve().parents[3] / "results" / "reference" / name, tmp_path / name)
    source = Path(__file__).resolve().parents[3] / "search_spaces" / "multi30k" / f"{name}.yaml"
    assert in_process(str(source), "--results", str(tmp_path), module="study.table").returncode == 0
    state = json.loads((tmp_path / name / "study.json").read_text(encoding="utf-8"))
    assert set(state["claims_declared"]) == {"fsmn-1word-bleu", "fsmn-2word-bleu", "two-word-window", "fsmn-trains-faster"}
    claims = (tmp_path / name / "claims.md").read_text(encoding="utf-8")
    assert "Declared after the results (after the study's first trial started): fsmn-1word-bleu" in claims
    before = (tmp_path / name / "study.json").read_bytes()
    assert in_process(str(source), "--results", str(tmp_path), module="study.table").returncode == 0
    assert (tmp_path / name / "study.json").read_bytes() == before  # declared once
