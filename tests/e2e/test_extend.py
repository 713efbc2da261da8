"""Iterating on a study: a --smoke check never blocks the full run, and a finished study gains
rows and seeds (--extend) without training its finished trials again."""

from __future__ import annotations

import json

import pytest
from study_helpers import in_process, grid_study, study, table_rows

pytestmark = pytest.mark.slow

ONE_ROW = "  - {label: gru, set: {}}"
TWO_ROWS = ONE_ROW + "\n  - {label: atr, set: {model.cell: atr}}"


def _records(results, name) -> dict[str, dict]:
    lines = (results / name / "trials.jsonl").read_text().splitlines()
    return {(r["label"], r["seed"]): r for r in map(json.loads, lines)}


def test_a_study_grows_from_a_smoke_check_to_more_rows_and_seeds(tmp_path, cluster_env):
    path, results = tmp_path / "grow.yaml", tmp_path / "results"
    path.write_text(grid_study("grow", ONE_ROW, epochs=1))
    run = ("--cpus", "2", "--results", str(results))

    # a smoke check in the same results directory does not block the full run, which replaces it
    smoke = study(str(path), "--smoke", *run, env=cluster_env)
    assert smoke.returncode == 0, smoke.stdout[-3000:] + smoke.stderr[-3000:]
    first = study(str(path), *run, env=cluster_env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "replacing the --smoke run's results of grow" in first.stdout
    state = json.loads((results / "grow" / "study.json").read_text())
    assert not state["request"].get("smoke") and state["status"] == "complete"
    before, table = _records(results, "grow"), (results / "grow" / "table.md").read_text()
    # ... and a smoke check never replaces a full run's results
    again = in_process(str(path), "--smoke", *run)
    assert again.returncode == 2 and "holds the results of a full run" in again.stderr
    assert (results / "grow" / "table.md").read_text() == table

    path.write_text(grid_study("grow", TWO_ROWS, epochs=1))
    refused = in_process(str(path), *run, "--resume")
    assert refused.returncode == 2 and "--extend if it only gained rows, seeds or epochs" in refused.stderr

    grown = study(str(path), *run, "--extend", "--seeds", "2", env=cluster_env)
    assert grown.returncode == 0, grown.stdout[-3000:] + grown.stderr[-3000:]
    after = _records(results, "grow")
    assert sorted(after) == [("atr", 1), ("atr", 2), ("gru", 1), ("gru", 2)]
    # the finished trial was not trained again: its record, timings included, is unchanged
    assert after[("gru", 1)]["metrics"] == before[("gru", 1)]["metrics"]
    assert [r["label"] for r in table_rows(results, "grow")] == ["gru", "atr"]
    assert {r["seeds"] for r in table_rows(results, "grow")} == {"2"}

    # another patience would make old and new rows incomparable: refused, naming the change
    budget = in_process(str(path), *run, "--extend", "--seeds", "2", "--set", "budget.patience=1")
    assert budget.returncode == 2
    assert "--extend adds rows, seeds or epochs, but the study changed otherwise (budget.patience:" in budget.stderr
    # a changed base config changes every trial: that is a new study, not an extension
    path.write_text(grid_study("grow", TWO_ROWS, epochs=1).replace("hidden: 16", "hidden: 24"))
    changed = in_process(str(path), *run, "--extend", "--seeds", "2")
    assert changed.returncode == 2 and "changed otherwise (base.model.hidden: 16 -> 24)" in changed.stderr
    # fewer seeds would drop finished trials from the table: refused, naming them
    path.write_text(grid_study("grow", TWO_ROWS, epochs=1))
    fewer = in_process(str(path), *run, "--extend", "--seeds", "1")
    assert fewer.returncode == 2 and "--extend only adds rows, seeds or epochs, but 2 stored trial(s) are no longer in the " \
        "study (atr seed 2, gru seed 2)" in fewer.stderr
    assert _records(results, "grow") == after
