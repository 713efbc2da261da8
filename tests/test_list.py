"""python -m study.list: every built-in study with its size, budget and the results that exist."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

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
    assert f"finished ({stored} trials) in {finished}; stopped (2/{total} trials done) in {running}" in depth
    assert f"smoke check in {running}" in _row(out, "cells")
    assert "8 (8 samples)  " in _row(out, "optuna_atr") and "  none  " in _row(out, "optuna_atr")
    assert f"unreadable study.json in {running}" in _row(out, "fsmn")
    assert f"unreadable study.json in {running}" in _row(out, "atr_gates")


def test_a_study_whose_driver_is_alive_is_running_and_a_stale_lock_is_stopped(tmp_path, capsys):
    place = tmp_path / "results"
    (place / "depth_srnmt").mkdir(parents=True)
    (place / "depth_srnmt" / "study.json").write_text(json.dumps({"status": "running"}))
    lock = place / ".depth_srnmt.lock"
    lock.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
    assert study_list.results_state(place, "depth_srnmt") == "running (0 trials done)"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    lock.write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname()}))  # left by a killed driver
    assert study_list.results_state(place, "depth_srnmt") == "stopped (0 trials done)"
    lock.write_text("not json")
    assert study_list.results_state(place, "depth_srnmt") == "stopped (0 trials done)"
    assert lock.read_text() == "not json"  # only read


def test_list_shows_the_multi30k_reference_studies_after_the_builtins(tmp_path, capsys):
    assert study_list.main(["--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    names = [line.split()[0] for line in out.splitlines()[1:] if line.strip()]
    reference = sorted(f"multi30k/{p.stem}" for p in (ROOT / "search_spaces" / "multi30k").glob("*.yaml"))
    assert "multi30k/context_gates_m30k" in reference
    assert names[names.index(reference[0]):names.index(reference[0]) + len(reference)] == reference
    assert "36 (12 rows x 3 seeds)" in _row(out, "multi30k/context_gates_m30k")
    assert "python -m study.run search_spaces/multi30k/NAME.yaml --results results/reference" in out
