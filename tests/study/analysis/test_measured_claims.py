"""Claims on a unit's own measurement (``nmt.measures``: ATR's gate correlation): a claim on a row's own
value (``value_of``) judged by the verdict rule, its p-value and intervals against scipy's one-sample t
test, every bad declaration one line naming the key, and a stored record's correlation checked for its
range. The measurement itself is tested in tests/nmt/test_measures.py."""

from __future__ import annotations

import pytest
import yaml

from nmt.errors import ConfigError
from study.analysis.claims import INCONCLUSIVE, NOT_REPRODUCED, NOT_TESTED, REPRODUCED, claim_weights
from study.analysis.claims_table import claims_table
from study.analysis.tables import build_table
from study.spec.loading import spec_from_dict
from study.spec.metrics import absolute_metrics
from study.store.claim_declarations import claim_hash
from study.store.record_validation import BadRecord, check_metrics
from study_helpers import grid_study

VARIANTS = """  - {label: GRU, set: {}}
  - {label: ATR, set: {model.cell: atr}}
  - {label: ATR 2, set: {model.cell: atr, model.hidden: 8}}"""
LABELS = ["GRU", "ATR", "ATR 2"]


def study_tree(claims: list) -> dict:
    tree = yaml.safe_load(grid_study("gates", VARIANTS, seeds=3))
    tree["table"] = {"reference": "GRU"}
    tree["claims"] = claims
    return tree


def gate_claim(**overrides) -> dict:
    return {"name": "atr-gates", "says": "ATR's gates are correlated, r = -0.98", "claim": "size", "metric": "atr_gate_r",
            "value_of": "ATR", "paper": {"value": -0.98, "source": "Zhang et al. 2018, Sec. 5.3"}, **overrides}


def test_a_value_claim_reads_one_row_as_it_is():
    (parsed,) = spec_from_dict(study_tree([gate_claim()]), "s.yaml").fields.claims
    assert claim_weights(parsed, "GRU") == {"ATR": 1.0} and parsed.sizing_row("GRU") is None
    assert "atr_gate_r" in absolute_metrics() and "test_bleu" not in absolute_metrics()


def test_a_claim_without_value_of_keeps_the_hash_it_was_declared_with():
    """Declarations recorded before value_of existed still match their claims."""
    tree = yaml.safe_load(grid_study("claimed", "  - {label: base, set: {}}\n  - {label: small, set: {model.hidden: 8}}", 3))
    tree["table"] = {"reference": "base"}
    tree["claims"] = [{"name": "smaller-worse", "says": "a smaller model is worse", "claim": "size", "row": "small",
                       "paper": {"value": -2.0, "reference": 20.0, "source": "Someone 2020, Table 1"}}]
    (parsed,) = spec_from_dict(tree, "s.yaml").fields.claims
    assert claim_hash(parsed) == "7a64c77b88e39e09"  # the hash before value_of was added


@pytest.mark.parametrize("change, message", [
    ({"metric": "test_bleu"}, r"claims\[0\]\.value_of: compares a row's own value, which only a metric on the same scale "
                              r"on any corpus and model allows \(atr_gate_r, atr_gate_r_token_means\); metric is 'test_bleu'"),
    ({"value_of": "ATR3"}, r"claims\[0\]\.value_of: 'ATR3' is not a row of this study \(did you mean 'ATR'\?\)"),
    ({"value_of": "GRU"}, r"claims\[0\]\.metric: = 'atr_gate_r' is measured only in trials of model\.cell atr; row 'GRU' "
                          r"trains model\.cell 'gru'"),
    ({"claim": "no_difference", "margin": 0.1, "margin_basis": "x"}, r"claims\[0\]\.claim: = no_difference: a value_of "
                                                                     r"claim is direction .* or size"),
    ({"relative_to": "GRU"}, r"claims\[0\]\.relative_to: a value_of claim judges one row's own value"),
    ({"margin": 0.1}, r"claims\[0\]\.margin: only a no_difference claim has a margin"),
    ({"paper": {"value": -0.98, "reference": 1.0, "source": "x"}}, r"claims\[0\]\.paper\.reference: = 1\.0: a value_of "
                                                                   r"claim compares the paper's value as it is"),
    ({"paper": {"value": 0.0, "source": "x"}}, r"claims\[0\]\.paper\.value: is 0, which has no direction"),
    ({"row": "ATR"}, r"claims\[0\]\.row: give exactly one of row .* or value_of \(a row's own value\); got row, value_of"),
    ({"value_of": None, "row": "ATR 2", "against": "ATR", "paper": {"value": -0.5, "reference": 1.0, "source": "x"}},
     r"claims\[0\]\.metric: = 'atr_gate_r' is a value on its own scale \(a correlation\), whose difference between rows "
     r"no row's score can size; judge a row's own value with value_of: ROW"),
    ({"against": "ATR 2"}, r"claims\[0\]\.against: a value_of claim judges one row's own value against the paper's as it "
                           r"is; leave against out"),
    ({"paper": {"value": -98.19, "source": "x"}}, r"claims\[0\]\.paper\.value: = -98\.19: a correlation lies in \[-1, 1\]"),
])
def test_every_bad_value_claim_is_one_line_naming_the_key(change, message):
    with pytest.raises(ConfigError, match=message) as error:
        spec_from_dict(study_tree([gate_claim(**change)]), "s.yaml")
    assert "\n" not in str(error.value) and str(error.value).startswith("s.yaml: ")


def gate_record(label: str, row: int, seed: int, r: float | None) -> dict:
    metrics = {"test_bleu": 20.0 + seed, "best_epoch": 5, "epochs": 8}
    if r is not None:
        metrics["atr_gate_r"] = r
    return {"key": f"{label}{seed}", "label": label, "row": row, "seed": seed, "config": {}, "params": {},
            "status": "ok", "hyp_path": None, "artifacts": [], "metrics": metrics}


def judged(claims: list, correlations: dict[str, list[float | None]]):
    records = [gate_record(label, row, seed, r) for row, (label, values) in enumerate(correlations.items())
               for seed, r in enumerate(values, 1)]
    spec = spec_from_dict(study_tree(claims), "s.yaml")
    table = build_table(records, "t", "GRU", None, LABELS, {label: 3 for label in LABELS}, None)
    return claims_table(spec.fields.claims, "t", table, records, None)


def test_a_value_claim_is_judged_by_the_rule_against_scipys_one_sample_test():
    from scipy.stats import t as student, ttest_1samp

    near, far = [-0.95, -0.97, -0.96], [-0.62, -0.60, -0.65]
    claims = [gate_claim(), gate_claim(name="far", value_of="ATR 2"), gate_claim(name="negative", claim="direction")]
    table = judged(claims, {"GRU": [None] * 3, "ATR": near, "ATR 2": far})
    rows = table.rows.set_index("claim")
    # Welch's test of one row is the one-sample t test of "the mean is 0", n - 1 degrees of freedom
    assert rows.loc["atr-gates", "p_value"] == pytest.approx(ttest_1samp(near, 0.0).pvalue, rel=1e-9)
    assert rows.loc["atr-gates", "estimate"] == pytest.approx(sum(near) / 3)
    assert rows.loc["atr-gates", "paper_scaled"] == -0.98  # as it is, not resized by a score
    # one more run's interval: mean +- t * s * sqrt(1 + 1/n), at the claim's Holm level
    level = rows.loc["atr-gates", "level"]
    s = (sum((x - sum(near) / 3) ** 2 for x in near) / 2) ** 0.5
    half = student.ppf(1 - level / 2, 2) * s * (1 + 1 / 3) ** 0.5
    assert (rows.loc["atr-gates", "run_low"], rows.loc["atr-gates", "run_high"]) == pytest.approx(
        (sum(near) / 3 - half, sum(near) / 3 + half), rel=1e-9)
    assert rows.loc["atr-gates", "verdict"] == REPRODUCED  # significant, -0.98 inside one run's interval
    assert rows.loc["far", "verdict"] == NOT_REPRODUCED  # significant, but -0.98 far outside it
    assert rows.loc["negative", "verdict"] == REPRODUCED
    frame = table.frame().set_index("claim")
    assert frame.loc["atr-gates", "ours"] == "-0.960" and frame.loc["atr-gates", "paper"] == "-0.980"  # 3 decimals
    assert frame.loc["atr-gates", "kind"] == "size (atr_gate_r)"
    assert "a claim on a row's own value (a correlation) compares it as it is" in table.markdown()


def test_a_value_claim_with_a_wide_spread_is_inconclusive_and_waits_for_its_seeds():
    wide = judged([gate_claim()], {"GRU": [None] * 3, "ATR": [-0.9, 0.2, -0.5], "ATR 2": [-0.5] * 3})
    assert wide.rows.loc[0, "verdict"] == INCONCLUSIVE
    unfinished = judged([gate_claim()], {"GRU": [None] * 3, "ATR": [-0.9, -0.95], "ATR 2": [-0.5] * 3})
    assert unfinished.rows.loc[0, "why_not_tested"] == "ATR has 2 of 3 seeds"


def test_seeds_that_ended_without_the_measurement_are_named_and_do_not_hold_the_claim_back():
    """A seed whose record has no value (an older record, an undefined r) has ended: the claim is judged on the
    others when 2 or more have one, and is not tested, naming why, when fewer do."""
    judged_on_two = judged([gate_claim()], {"GRU": [None] * 3, "ATR": [-0.95, None, -0.96], "ATR 2": [-0.5] * 3})
    assert judged_on_two.rows.loc[0, "verdict"] == REPRODUCED
    one = judged([gate_claim()], {"GRU": [None] * 3, "ATR": [-0.95, None, None], "ATR 2": [-0.5] * 3}).rows.loc[0]
    assert one["verdict"] == NOT_TESTED and one["why_not_tested"] == "ATR: 1 of its 3 ended seeds recorded atr_gate_r"


@pytest.mark.parametrize("value, message", [(1.5, r"'atr_gate_r' is 1\.5, above 1"), (-1.01, r"'atr_gate_r' is -1\.01, below -1")])
def test_a_stored_correlation_outside_minus_one_to_one_is_a_bad_record(value, message):
    with pytest.raises(BadRecord, match=message):
        check_metrics({"status": "ok", "test_bleu": 1.0, "atr_gate_r": value}, "metrics.json")
    check_metrics({"status": "ok", "test_bleu": 1.0, "atr_gate_r": -1.0}, "metrics.json")
