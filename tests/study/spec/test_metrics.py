"""The metric registry: its entries agree with each other and with a real trial's record, the readers
list what it derives, and a metric added to it reaches them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from nmt.errors import ConfigError
from nmt.measures import measured_cells
from study.analysis.tables import build_table
from study.execution import tracking
from study.spec import metrics
from study.spec.claims import parse_claims, validate_claims
from study.spec.loading import spec_from_dict
from study.spec.metrics import METRICS, Column, Metric
from study.store.record_validation import BadRecord, check_metrics
from study_helpers import grid_study

ROOT = Path(__file__).resolve().parents[3]
# a finished trial's record as the trial store keeps it (a committed study still running)
FINISHED = sorted((ROOT / "results" / "reference" / "ray").glob("*/finished/*/metrics.json"))


def test_names_columns_and_places_are_unique():
    assert len({metric.name for metric in METRICS}) == len(METRICS)
    columns = [metric.column for metric in METRICS if metric.column]
    assert len({column.header for column in columns}) == len({column.key for column in columns}) == len(columns)
    for place in ("objective", "claim"):  # places run 1, 2, ... so that a list an error message shows has no gap
        places = sorted(getattr(metric, place) for metric in METRICS if getattr(metric, place) is not None)
        assert places == list(range(1, len(places) + 1)), place


def test_what_a_study_or_claim_compares_has_a_direction_and_a_finished_trial_records_it():
    assert FINISHED, "no finished trial's metrics.json under results/reference/ray"
    recorded = json.loads(FINISHED[0].read_text(encoding="utf-8"))
    for metric in METRICS:
        if measured_cells(metric.name):  # a unit's own measurement (tests/nmt/test_measures.py): a value, no "better"
            assert metric.absolute and metric.direction == "" and metric.objective is None, metric.name
            continue
        if metric.claim is not None or metric.objective is not None:
            assert metric.direction in ("higher", "lower"), metric.name
        if metric.known == "end" or metric.claim is not None:  # the finished record has it
            assert metric.name in recorded, metric.name


def test_what_asha_compares_every_epoch_is_logged_every_epoch():
    assert set(metrics.epoch_metrics()) <= set(metrics.logged_each_epoch())


def test_mlflow_logs_what_the_registry_says():
    assert tracking.EPOCH_LOGGED == metrics.logged_each_epoch()
    assert tracking.FINAL_LOGGED == metrics.logged_at_end()
    assert list(tracking.ROW_LOGGED.items()) == list(metrics.row_logged().items())
    assert not set(tracking.EPOCH_LOGGED) & set(tracking.FINAL_LOGGED)  # one metric, one kind of MLflow history


def test_error_messages_list_what_a_study_and_a_claim_may_name():
    tree = yaml.safe_load(grid_study("listed", "  - {label: base, set: {}}"))
    tree["metric"] = {"name": "bleu"}
    with pytest.raises(ConfigError) as error:
        spec_from_dict(tree, "s.yaml")
    assert str(error.value).endswith("choose one of " + ", ".join(metrics.epoch_metrics() + metrics.final_metrics()))
    with pytest.raises(ConfigError) as error:
        validate_claims(parse_claims([claim(metric="bleu")], "s.yaml"), ["base", "small"], "base", "grid", "s.yaml")
    assert str(error.value).endswith("a claim compares one of " + ", ".join(metrics.claim_metrics()))


def claim(**overrides) -> dict:
    return {"name": "smaller-worse", "says": "a smaller model is worse", "claim": "size", "row": "small",
            "paper": {"value": -2.0, "reference": 20.0, "source": "Someone 2020, Table 1"}, **overrides}


BLEURT = Metric("test_bleurt", "end", "higher", "BLEURT", "end", claim=8, per_trial=True,
                column=Column("BLEURT", "bleurt", "2 decimals", "scored"))


@pytest.fixture
def with_bleurt(monkeypatch):
    """The registry with one more metric: a learned score of the test translations."""
    monkeypatch.setattr(metrics, "METRICS", METRICS + (BLEURT,))


def test_a_record_is_refused_a_non_number_under_a_metric_once_the_registry_has_it(request):
    record = {"test_bleu": 20.0, "test_bleurt": "high"}
    assert check_metrics(record, "metrics.json") == record  # not a metric yet: any scalar
    request.getfixturevalue("with_bleurt")
    with pytest.raises(BadRecord, match=re.escape("'test_bleurt' is 'high', not a number")):
        check_metrics(record, "metrics.json")


def test_a_claim_may_compare_a_metric_once_the_registry_allows_it(request):
    claims = parse_claims([claim(metric="test_bleurt")], "s.yaml")
    with pytest.raises(ConfigError, match="claims\\[0\\].metric: = 'test_bleurt'"):
        validate_claims(claims, ["base", "small"], "base", "grid", "s.yaml")
    request.getfixturevalue("with_bleurt")
    validate_claims(claims, ["base", "small"], "base", "grid", "s.yaml")


def test_a_metric_with_a_column_is_in_the_tables(with_bleurt):
    records = [{"key": f"k{seed}", "label": "base", "row": 0, "seed": seed, "config": {}, "params": {}, "status": "ok",
                "error": "", "metrics": {"test_bleu": 20.0 + seed, "params": 1000, "test_bleurt": 0.5 + seed / 10}}
               for seed in (1, 2)]
    table = build_table(records, "t", None, None)
    assert table.rows["bleurt"].tolist() == [pytest.approx(0.65)]
    assert table.trials["test_bleurt"].tolist() == [0.6, 0.7]
    header, rule, row = table.markdown().splitlines()[2:5]
    cells = [cell.strip() for cell in header.strip("|").split("|")]
    assert cells[-2:] == ["BLEURT", "status"] and row.strip("|").split("|")[-2].strip() == "0.65"
    assert rule.strip("|").split("|")[-2].endswith(":")  # right-aligned, as a number
