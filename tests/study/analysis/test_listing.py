"""python -m study.list: every built-in study with its size, budget and the results that exist.

Modules covered here: ``study.spec.summary``."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

from study_helpers import ROOT

from study import list as study_list
from study.analysis.listing import results_state
from study.spec.summary import budget


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
    assert "18 (6 rows x 3 seeds)" in depth and "plateau rule, epochs 10-50" in depth
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
    assert results_state(place, "depth_srnmt") == "running (0 trials done)"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    lock.write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname()}))  # left by a killed driver
    assert results_state(place, "depth_srnmt") == "stopped (0 trials done)"
    lock.write_text("not json")
    assert results_state(place, "depth_srnmt") == "stopped (0 trials done)"
    assert lock.read_text() == "not json"  # only read


def test_list_shows_the_multi30k_reference_studies_after_the_builtins(tmp_path, capsys):
    assert study_list.main(["--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    names = [line.split()[0] for line in out.splitlines()[1:] if line.strip()]
    reference = sorted(f"multi30k/{p.stem}" for p in (ROOT / "search_spaces" / "multi30k").glob("*.yaml"))
    assert "multi30k/context_gates_m30k" in reference
    assert names[names.index(reference[0]):names.index(reference[0]) + len(reference)] == reference
    assert "36 (12 rows x 3 seeds)" in _row(out, "multi30k/context_gates_m30k")
    assert "100 epochs, patience 3, not before epoch 30" in _row(out, "multi30k/context_gates_m30k")
    assert "python -m study.run search_spaces/multi30k/NAME.yaml --results results/reference" in out


def test_the_budget_names_the_first_epoch_early_stopping_may_end_only_where_one_is_set():
    from study.spec.loading import load_study

    patience = ["budget.stop=patience", "budget.epochs=12", "budget.min_epochs=0"]
    assert budget(load_study("cells", [*patience, "budget.patience=2"])) == "12 epochs, patience 2"
    held = load_study("cells", [*patience, "budget.patience=2", "budget.min_epochs=5"])
    assert budget(held) == "12 epochs, patience 2, not before epoch 5"
    assert budget(load_study("cells", [*patience, "budget.patience=0"])) == "12 epochs"
    assert budget(load_study("cells")) == "plateau rule, epochs 10-50"  # the built-in studies stop on a plateau
    assert budget(load_study("cells", ["budget.min_epochs=0"])) == "plateau rule, epochs 5-50"  # the test's first


def _store_with_every_trial_state(place):
    """depth_srnmt (6 rows x 2 seeds) part-way: a finished trial still improving at its last
    epoch, one converged, a paused one with its checkpoint, one without (as on a clone), a
    failed one and one kept under a key another code version gave it; the rest not started."""
    from study.spec.expansion import expand
    from study.spec.loading import spec_from_dict
    from study.store.records import experiment_dir
    from study.store.trial_store import TrialStore

    state = json.loads((ROOT / "results" / "reference" / "depth_srnmt" / "study.json").read_text())
    (place / "depth_srnmt").mkdir(parents=True)
    (place / "depth_srnmt" / "study.json").write_text(json.dumps({**state, "status": "running"}))
    trials = expand(spec_from_dict(state["spec"], source="test"))
    store = TrialStore(experiment_dir(place, "depth_srnmt"))

    def start(trial, key=None):
        key = key or trial.key
        store.start(key, {"key": key, "label": trial.label, "row": trial.row, "seed": trial.seed,
                          "config": trial.config, "params": {}, "sample": None})
        return key

    def finish(trial, epochs, best, test_bleu):
        start(trial)
        contents = place / "contents"
        contents.mkdir(exist_ok=True)
        store.install_finished(trial.key, contents, {"status": "ok", "stop_reason": "max epochs", "epochs": epochs,
                                                     "best_epoch": best, "valid_bleu": 20.5, "test_bleu": test_bleu,
                                                     "elapsed_seconds": 3600.0})

    def part_way(trial, epoch, checkpoint, key=None):
        key = start(trial, key)
        store.progress(key, {"epoch": epoch, "epochs_trained": epoch, "best_epoch": epoch - 1,
                             "best_valid_bleu": 12.25, "elapsed_s": 600.0})
        if checkpoint:
            (store.run_dir(key) / "checkpoint").mkdir(parents=True)
            (store.run_dir(key) / "checkpoint" / "state.pt").write_bytes(b"")

    finish(trials[0], 3, 3, 23.5)
    finish(trials[1], 3, 2, 24.25)
    part_way(trials[2], 2, checkpoint=True)
    part_way(trials[3], 1, checkpoint=False)
    start(trials[4])
    store.give_up(trials[4].key, "failed", "RuntimeError: out of memory")
    part_way(trials[5], 2, checkpoint=True, key="0ldk3y000000")
    return trials


def test_list_name_shows_where_each_trial_stands(tmp_path, capsys):
    place = tmp_path / "results"
    trials = _store_with_every_trial_state(place)
    assert study_list.main(["multi30k/depth_srnmt", "--results", str(tmp_path / "elsewhere"),
                            "--results", str(place)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"depth_srnmt in {place}: stopped (2/12 trials done)"
    assert lines[1].split()[:3] == ["row", "seed", "state"]
    rows = [line.split("  ") for line in lines[2:]]
    cells = [[cell.strip() for cell in row if cell.strip()] for row in rows]
    assert cells[0] == [trials[0].label, "1", "finished (max epochs)", "3", "3 †", "20.50", "23.50", "1h00m00s"]
    assert cells[1] == [trials[1].label, "2", "finished (max epochs)", "3", "2", "20.50", "24.25", "1h00m00s"]
    assert cells[2] == [trials[2].label, "1", "paused (--resume continues it)", "2", "1", "12.25", "-", "10m00s"]
    assert cells[3][2:5] == ["paused, no checkpoint here", "1", "0"]
    assert cells[4][2] == "failed: RuntimeError: out of memory"
    assert cells[5][:3] == [trials[5].label, "2", "paused (--resume continues it)"]  # matched by row and seed
    # the six trials not started, one line per row
    assert [c[:3] for c in cells[6:9]] == [[t.label, "1, 2", "not started"] for t in trials[6::2]]
    assert cells[9][0] == ("2 finished, 3 paused, 1 failed, 6 not started; trial time so far 2h30m00s; "
                            "budget per trial: 3 epochs")
    assert cells[10][0].startswith("† best epoch = last epoch (1 trial)")
    assert cells[11][0].startswith("paused, no checkpoint here: committed records carry none")
    assert len(cells) == 12


def test_list_name_of_a_running_study_and_of_committed_records(tmp_path, capsys):
    from study.store.records import experiment_dir
    from study.store.trial_store import TrialStore

    place = tmp_path / "results"
    trials = _store_with_every_trial_state(place)
    (place / ".depth_srnmt.lock").write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
    store = TrialStore(experiment_dir(place, "depth_srnmt"))
    with store.hold(trials[2].key):  # a worker trains it; the driver's other unfinished trials wait
        assert study_list.main(["search_spaces/depth_srnmt.yaml", "--results", str(place)]) == 0
    cells = [[cell.strip() for cell in line.split("  ") if cell.strip()] for line in capsys.readouterr().out.splitlines()]
    assert cells[0] == ["depth_srnmt in " + str(place) + ": running (2/12 trials done)"]
    assert cells[4][:3] == [trials[2].label, "1", "in progress"]
    assert cells[5][2:5] == ["waiting, no checkpoint here", "1", "0"]
    assert cells[7][:4] == [trials[5].label, "2", "waiting its turn", "2"]
    assert cells[11][0] == ("2 finished, 1 in progress, 2 waiting, 1 failed, 6 not started; trial time so far "
                            "2h30m00s; budget per trial: 3 epochs")
    assert cells[13][0].startswith("waiting, no checkpoint here: committed records carry none, so the driver trains")
    assert not (store.trial_dir(trials[3].key) / ".lock").exists()  # asking made no lock file
    assert store.training(trials[2].key) is False  # the worker let go
    # committed results keep no trial store: the records next to their tables are read
    assert study_list.main(["depth_srnmt", "--results", str(ROOT / "results" / "reference")]) == 0
    out = capsys.readouterr().out
    assert out.count("finished (max epochs)") == 12 and "12 finished, 0 not started" in out


def test_list_name_without_results_says_where_it_looked(tmp_path, capsys):
    code = study_list.run_main(study_list.main, ["depth_srnmt", "--results", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (f"error: no results of study 'depth_srnmt' in {tmp_path}: run it first "
                   f"(python -m study.run depth_srnmt), or name where it ran with --results DIR\n")


def test_list_name_of_a_damaged_study_state_is_one_line_and_no_table(tmp_path, capsys):
    (tmp_path / "depth_srnmt").mkdir()
    (tmp_path / "depth_srnmt" / "study.json").write_text("not json")
    code = study_list.run_main(study_list.main, ["depth_srnmt", "--results", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith(f"error: {tmp_path / 'depth_srnmt' / 'study.json'}: unreadable study state (")
    assert len(err.splitlines()) == 1
