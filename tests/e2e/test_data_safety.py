"""What the tool will and will not delete, and stored records read back as input.

Each scenario puts canary files beside and behind the paths the tool writes or deletes (a file
beside the results directory, one in a linked folder, one next to the trial store) and checks
them afterwards byte for byte. Real Ray, MLflow and SQLite on tiny data.

Modules covered here: ``study.execution.sqlite_store``, ``study.store.record_validation`` and
``study.store.trial_store``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from study_helpers import ROOT, free_port, grid_study, in_process, mlflow_runs, start_study, study, table_rows

from nmt.errors import UserError
from study.execution.sqlite_store import ensure_store, stored_schema
from study.store.ownership import check_real_tree, owned_path
from study.store.record_validation import BadRecord, read_json
from study.store.trial_store import TrialStore


def snapshot(directory: Path) -> dict[str, bytes | str]:
    """Every file under ``directory`` (links as their targets' names, not followed): what must not change."""
    seen = {}
    for parent, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(parent) / name
            relative = str(path.relative_to(directory))
            if path.is_symlink():
                seen[relative] = f"-> {os.readlink(path)}"
            elif path.is_file():
                seen[relative] = path.read_bytes()
    return seen


def one_line_refusal(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


# --- paths: one followed link, at the top of the results directory ---------------------------


def test_a_top_level_link_is_followed_and_nothing_deeper_or_pointing_back(tmp_path):
    root = tmp_path / "results"
    disk = tmp_path / "disk"
    disk.mkdir()
    root.mkdir()
    (root / "ray").symlink_to(disk)
    assert owned_path(root, root / "ray" / "study", "x") == disk / "study"
    (disk / "study").mkdir()
    (disk / "study" / "trials").symlink_to(tmp_path)
    (root / "back").symlink_to(tmp_path)  # deleting under it could delete the results directory itself
    for bad in (root / "ray", root / "ray" / "study" / "trials" / "key", root / "back" / "study"):
        with pytest.raises(UserError):
            owned_path(root, bad, "x")


def test_a_link_or_a_fifo_inside_a_store_is_refused_before_anything_reads_it(tmp_path):
    store = tmp_path / "store"
    (store / "trials" / "k1").mkdir(parents=True)
    check_real_tree(store, "trial store")
    (store / "trials" / "k1" / "progress.json").symlink_to(tmp_path / "secret")
    with pytest.raises(UserError, match=r"progress.json is a symbolic link"):
        check_real_tree(store, "trial store")
    (store / "trials" / "k1" / "progress.json").unlink()
    os.mkfifo(store / "trials" / "k1" / "history.json")
    with pytest.raises(UserError, match=r"history.json is not a regular file"):
        check_real_tree(store, "trial store")
    with pytest.raises(BadRecord, match="not a regular file"):  # and the reader never opens it (no hang)
        read_json(store / "trials" / "k1" / "history.json")


# --- records: checked like input -------------------------------------------------------------


@pytest.mark.parametrize("record, field", [
    ({"epochs": [{"epoch": 1, "train_tokens": "1" + "0" * 400}]}, "'epochs[0].train_tokens' is an integer of 401 digits"),
    ({"epochs": [{"epoch": 1, "elapsed_s": "Infinity"}]}, "'epochs[0].elapsed_s' is Infinity"),
    ({"epochs": [{"epoch": 1}, {"epoch": "abc"}]}, "'epochs[1].epoch' is 'abc', not a number"),
    ({"epochs": [{"epoch": 2, "best_epoch": 1.5}]}, "'epochs[0].best_epoch' is 1.5, not a whole number"),
    ({"epochs": [{"epoch": -1}]}, "'epochs[0].epoch' is -1, below 0"),
    ({"epochs": [{"valid_bleu": 3}]}, "has no 'epochs[0].epoch'"),
    ({"epochs": [{"epoch": 1, "valid_bleu": [3]}]}, "'epochs[0].valid_bleu' is a list, not a number or a string"),
    ({"epochs": {"1": {}}}, "'epochs' is a mapping, not a list of epochs"),
])
def test_a_bad_history_is_one_line_naming_the_file_and_the_field(tmp_path, record, field):
    store = TrialStore(tmp_path)
    (tmp_path / "trials" / "k").mkdir(parents=True)
    text = json.dumps(record).replace('"1' + "0" * 400 + '"', "1" + "0" * 400).replace('"Infinity"', "Infinity")
    (tmp_path / "trials" / "k" / "history.json").write_text(text)
    with pytest.raises(BadRecord) as refused:
        store.history("k")
    assert str(tmp_path / "trials" / "k" / "history.json") in str(refused.value) and field in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("identity, field", [
    ({"row": 0, "seed": 1, "config": {}}, "has no 'label'"),
    ({"label": "a", "row": "0", "seed": 1, "config": {}}, "'row' is '0', not an integer"),
    ({"label": "a", "row": 0, "seed": 1.5, "config": {}}, "'seed' is 1.5, not an integer"),
    ({"label": "a", "row": 0, "seed": True, "config": {}}, "'seed' is true, not an integer"),
    ([], "holds a list, not a JSON object"),
])
def test_a_bad_trial_identity_is_one_line(tmp_path, identity, field):
    (tmp_path / "trials" / "k").mkdir(parents=True)
    (tmp_path / "trials" / "k" / "trial.json").write_text(json.dumps(identity))
    with pytest.raises(BadRecord, match=field):
        TrialStore(tmp_path).check_records()


def test_records_cut_short_by_a_crash_count_as_missing_and_every_committed_store_passes(tmp_path):
    (tmp_path / "trials" / "k").mkdir(parents=True)
    (tmp_path / "trials" / "k" / "trial.json").write_text('{"label": "a", "ro')
    (tmp_path / "trials" / "k" / "progress.json").write_text("")
    assert TrialStore(tmp_path).identity("k") is None and TrialStore(tmp_path).last_progress("k") == {}
    committed = sorted((ROOT / "results" / "reference" / "ray").iterdir())
    assert committed and all(TrialStore(store).check_records() > 0 for store in committed)


# --- the MLflow store: built whole or not at all --------------------------------------------


def full_store(path: Path) -> None:
    ensure_store(path, log=lambda line: None)
    assert stored_schema(path)[1] == 0


def set_schema(path: Path, version: str) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("update alembic_version set version_num = ?", (version,))


def test_a_half_made_store_is_set_aside_and_built_anew_and_one_with_runs_is_refused(tmp_path):
    from mlflow.tracking import MlflowClient

    database = tmp_path / "mlflow.db"
    full_store(database)
    head = stored_schema(database)[0]
    # a driver killed between a migration's tables and its version record: the schema is ahead of its
    # version, and MLflow, replaying the migration, stops at "already exists" / "duplicate column"
    set_schema(database, "451aebb31d03")  # the first migration
    lines = []
    ensure_store(database, log=lines.append)
    assert lines == [f"MLflow store {database} was half-made (schema version 451aebb31d03, no runs): moved to "
                     "mlflow.db.half-made and built anew"]
    assert stored_schema(database) == (head, 0) and (tmp_path / "mlflow.db.half-made").is_file()
    client = MlflowClient(tracking_uri=f"sqlite:///{database}")
    client.create_run(client.create_experiment("kept"))
    set_schema(database, "451aebb31d03")  # a store with runs: a user's, of another MLflow version
    before = database.read_bytes()
    with pytest.raises(UserError, match=r"has schema version 451aebb31d03, not this MLflow's .*mlflow db upgrade"):
        ensure_store(database)
    assert database.read_bytes() == before
    (tmp_path / "not.db").write_text("my notes")
    with pytest.raises(UserError, match="is not a SQLite database"):
        ensure_store(tmp_path / "not.db")
    assert (tmp_path / "not.db").read_text() == "my notes"


# a process that dies inside a write transaction with its changes spilled to the database file
DIES_MID_WRITE = """
import os, sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("PRAGMA cache_size=1")  # the changed pages go to the file before the commit
connection.execute("BEGIN")
for index in range(500):
    connection.execute("insert into dead_writes (key, value) values (?, ?)", (f"k{index}", "v" * 500))
os._exit(0)
"""


def test_a_store_whose_writer_died_mid_transaction_is_rolled_back_and_used(tmp_path):
    """A driver killed while MLflow writes leaves a hot rollback journal; the next driver's check
    recovers it (SQLite's rollback) instead of calling the store no database."""
    database = tmp_path / "mlflow.db"
    full_store(database)
    with sqlite3.connect(database) as connection:
        connection.execute("create table dead_writes (key text, value text)")
    head = stored_schema(database)[0]
    subprocess.run([sys.executable, "-c", DIES_MID_WRITE, str(database)], check=True)
    assert (tmp_path / "mlflow.db-journal").stat().st_size > 0  # a hot journal, as a kill leaves it
    ensure_store(database, log=lambda line: pytest.fail(f"the store was not kept: {line}"))
    assert stored_schema(database) == (head, 0) and not (tmp_path / "mlflow.db-journal").exists()
    with sqlite3.connect(database) as connection:
        assert connection.execute("select count(*) from dead_writes").fetchone() == (0,)  # the dead write is undone


def test_a_store_another_program_holds_is_one_line_that_says_so(tmp_path):
    database = tmp_path / "mlflow.db"
    full_store(database)
    holder = sqlite3.connect(database, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")  # e.g. a sqlite3 shell in the middle of a change
        with pytest.raises(UserError, match=r"could not be read \(database is locked\); check that no other program "
                                            r"holds it and that its folder is writable, or pass --tracking-uri"):
            ensure_store(database)
    finally:
        holder.close()
    assert stored_schema(database)[1] == 0


ONE_TRIAL = "  - {label: small, set: {}}"


@pytest.mark.slow
def test_a_driver_killed_while_it_builds_the_mlflow_store_leaves_a_study_that_runs(tmp_path, ray_env):
    path = tmp_path / "killed.yaml"
    path.write_text(grid_study("killed", ONE_TRIAL, epochs=1))
    results = tmp_path / "results"
    driver = start_study(str(path), "--cpus", "1", "--results", str(results), env=ray_env)
    deadline = time.time() + 120
    while not list(results.glob(".mlflow.db.creating-*")) and time.time() < deadline:
        time.sleep(0.05)
    assert list(results.glob(".mlflow.db.creating-*")), driver.communicate()[0][-3000:]
    os.killpg(driver.pid, signal.SIGKILL)  # kill -9 mid-way through the store's migrations
    driver.wait()
    assert not (results / "mlflow.db").exists()
    again = study(str(path), "--cpus", "1", "--results", str(results), env=ray_env)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert table_rows(results, "killed")[0]["n"] == "1"
    assert not list(results.glob(".mlflow.db.creating-*"))


# --- the driver: links in the trial store, tampered records, refusals -------------------------


@pytest.mark.slow
def test_links_and_tampered_records_stop_the_driver_before_it_writes_or_deletes_anything(tmp_path, cluster_env):
    path = tmp_path / "safe.yaml"
    path.write_text(grid_study("safe", ONE_TRIAL, epochs=1))
    disk = tmp_path / "disk"  # another disk, which results/ray links to
    (disk / "ray").mkdir(parents=True)
    (disk / "ray" / "canary.txt").write_text("beside the trial stores")
    (tmp_path / "canary.txt").write_text("beside the results directory")
    results = tmp_path / "results"
    results.mkdir()
    (results / "ray").symlink_to(disk / "ray")
    args = [str(path), "--cpus", "1", "--results", str(results)]
    first = study(*args, env=cluster_env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert f"note: {results / 'ray'} is a link to {disk / 'ray'}; the trial store lives there" in first.stdout
    assert (disk / "ray" / "safe" / "finished").is_dir() and (results / "ray").is_symlink()
    scores = ("label", "bleu_mean", "chrf", "epochs_max", "n")  # the same seeds give the same scores (speed varies)
    table = [{column: row[column] for column in scores} for row in table_rows(results, "safe")]
    key = next((disk / "ray" / "safe" / "finished").iterdir()).name
    outside = tmp_path / "outside"  # what a link inside the store points to
    outside.mkdir()
    (outside / "canary.txt").write_text("behind the link")
    (outside / "progress.json").write_text('{"mine": 1}')

    def scenario(damage, *needles: str, flags=("--resume", "--fresh")) -> None:
        copy = tmp_path / "copy"
        shutil.copytree(disk / "ray" / "safe", copy / "ray" / "safe", symlinks=True)
        shutil.copytree(results / "safe", copy / "safe", symlinks=True)
        damage(copy / "ray" / "safe")
        before, before_outside = snapshot(copy), snapshot(outside)
        for flag in flags:
            refused = in_process(str(path), "--cpus", "1", "--results", str(copy), flag)
            one_line_refusal(refused, *needles)
            assert snapshot(copy) == before and snapshot(outside) == before_outside
        shutil.rmtree(copy)

    def link(relative: str):
        def damage(store: Path) -> None:
            shutil.rmtree(store / relative)
            (store / relative).symlink_to(outside)
        return damage

    scenario(link(f"trials/{key}"), f"trials/{key} is a symbolic link")
    scenario(link(f"finished/{key}"), f"finished/{key} is a symbolic link")

    def edit(relative: str, change):
        def damage(store: Path) -> None:
            record = store / relative
            record.write_text(change(record.read_text()))
        return damage

    scenario(edit(f"finished/{key}/metrics.json",
                  lambda text: text.replace('"elapsed_seconds": ', '"elapsed_seconds": Infinity, "was": ')),
             f"finished/{key}/metrics.json: 'elapsed_seconds' is Infinity, not a finite number", flags=("--resume",))
    scenario(edit(f"trials/{key}/history.json", lambda text: text.replace('"steps": ', '"steps": 1' + "0" * 400 + ', "x": ')),
             f"trials/{key}/history.json: 'epochs[0].steps' is an integer of 401 digits", flags=("--resume",))
    _, parents, children = mlflow_runs(results, "safe")
    assert all(run.info.status == "FINISHED" for run in parents + children)  # no run left RUNNING

    again = study(*args, "--fresh", env=cluster_env)  # --fresh through the followed link deletes only the study's store
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert [{column: row[column] for column in scores} for row in table_rows(results, "safe")] == table
    assert (disk / "ray" / "canary.txt").read_text() == "beside the trial stores"
    assert (tmp_path / "canary.txt").read_text() == "beside the results directory"
    assert (outside / "canary.txt").read_text() == "behind the link"


@pytest.mark.slow
def test_refusals_before_anything_runs_are_one_line_and_leave_no_results_folder(tmp_path):
    import torch

    path = tmp_path / "refused.yaml"
    path.write_text(grid_study("refused", ONE_TRIAL, epochs=1))
    results = tmp_path / "new" / "results"
    cases = [(["--set", "resources.cpu=64"], "resources.cpu = 64"),
             (["--address", f"127.0.0.1:{free_port()}"], "cannot reach a Ray cluster there")]
    if not torch.cuda.is_available():
        cases.append((["--gpus-per-trial", "1"], "--gpus-per-trial 1"))
    for flags, needle in cases:
        refused = in_process(str(path), "--cpus", "1", "--results", str(results), *flags)
        one_line_refusal(refused, needle)
        assert refused.stdout == "" and not (tmp_path / "new").exists()
