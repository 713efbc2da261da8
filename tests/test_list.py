"""python -m study.list: every built-in study with its size, budget and the results that exist."""

from __future__ import annotations

import json
import shutil

from study import list as study_list
from study_helpers import ROOT


def _row(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(name + " "))


def test_list_shows_trials_budget_and_where_results_are(tmp_path, capsys):
    finished, running = tmp_path / "finished", tmp_path / "running"
    shutil.copytree(ROOT / "results" / "reference" / "depth_srnmt", finished / "depth_srnmt",
                    ignore=shutil.ignore_patterns("*.png", "*.pdf", "hyps", "analysis"))
    # a study interrupted after 2 of its trials: its state and the trial store's finished records
    state = json.loads((finished / "depth_srnmt" / "study.json").read_text())
    (running / "depth_srnmt").mkdir(parents=True)
    (running / "depth_srnmt" / "study.json").write_text(json.dumps({**state, "status": "running"}))
    for key in ("a1", "b2"):
        (running / "ray" / "depth_srnmt" / "finished" / key).mkdir(parents=True)
        (running / "ray" / "depth_srnmt" / "finished" / key / "metrics.json").write_text("{}")
    (running / "cells").mkdir()
    (running / "cells" / "study.json").write_text(json.dumps({"status": "complete", "request": {"smoke": True}}))

    (running / "fsmn").mkdir()
    (running / "fsmn" / "study.json").write_text("[1, 2]")  # not what a run writes: said, not a traceback
    (running / "atr_gates").mkdir()
    (running / "atr_gates" / "study.json").write_bytes(b"\xff\xfe")
    assert study_list.main(["--results", str(finished), "--results", str(running)]) == 0
    out = capsys.readouterr().out
    assert _row(out, "study").split()[:5] == ["study", "kind", "trials", "budget", "per"]
    depth = _row(out, "depth_srnmt")
    stored = len((finished / "depth_srnmt" / "trials.jsonl").read_text().splitlines())
    total = stored // state["spec"]["seeds"] * state["spec"]["seeds"]
    assert "18 (6 rows x 3 seeds)" in depth and "12 epochs" in depth
    assert f"finished ({stored} trials) in {finished}; running (2/{total} trials) in {running}" in depth
    assert f"smoke check in {running}" in _row(out, "cells")
    assert "8 (8 samples)  " in _row(out, "optuna_atr") and "  none  " in _row(out, "optuna_atr")
    assert f"unreadable study.json in {running}" in _row(out, "fsmn")
    assert f"unreadable study.json in {running}" in _row(out, "atr_gates")
