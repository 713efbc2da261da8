"""The fault matrix: kills, signals, dead workers and nodes, failing trials, corrupt checkpoints,
a vanishing tracking server, changed study files and concurrent studies - each with real
processes (Ray, MLflow, Optuna) on tiny data. Every test says which fault it covers.

Modules covered here: ``study.execution.disk_watch``, ``study.execution.driver``,
``study.execution.ray_setup``, ``study.execution.study_run``, ``study.execution.trainable`` and
``study.execution.tuner``."""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from study_helpers import (
    ROOT,
    LoopbackCluster,
    free_port,
    grid_study,
    in_process,
    is_loopback,
    listening_addresses,
    mlflow_server,
    mlflow_runs,
    read_only,
    search_study,
    skip_if_ray_node_lost,
    small_file_system,
    start_study,
    study,
    table_rows,
    wait_for,
)

pytestmark = pytest.mark.slow

TWO_BY_TWO = """  - {label: small, set: {}}
  - {label: atr, set: {model.cell: atr}}"""


def finished_trials(results: Path, name: str) -> dict[str, dict]:
    """trial key -> final metrics of every trial stored as finished in the trial store."""
    return {path.parent.name: json.loads(path.read_text())
            for path in (results / "ray" / name / "finished").glob("*/metrics.json")}


def assert_complete(results: Path, name: str, labels: list[str], seeds: int, output: str = "") -> list:
    """Every configuration once in the table with all its seeds; one finished MLflow child per trial.
    ``output``: the last driver's, shown when the MLflow runs are not as expected."""
    rows = table_rows(results, name)
    assert [r["label"] for r in rows] == labels and all(r["n"] == str(seeds) for r in rows), rows
    client, parents, children = mlflow_runs(results, name)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED", \
        ([(p.info.status, p.info.start_time, p.info.end_time) for p in parents], output[-4000:])
    assert len(children) == len(labels) * seeds and len({c.data.tags["trial_key"] for c in children}) == len(children)
    assert all(c.info.status == "FINISHED" for c in children)
    return children


def start_tiny_study(tmp_path: Path, name: str, env: dict, seeds: int, epochs: int = 3):
    """A 2-configuration study on one CPU, returned once its first trial has an epoch checkpoint:
    (study file, results dir, its command-line arguments, the driver process)."""
    path = tmp_path / f"{name}.yaml"
    # no early stopping: a study given more epochs surely runs them (time for the test to act)
    path.write_text(grid_study(name, TWO_BY_TWO, seeds=seeds, epochs=epochs, patience=0))
    results = tmp_path / "results"
    args = [str(path), "--cpus", "1", "--results", str(results)]
    driver = start_study(*args, env=env)
    wait_for(driver, f"0/{2 * seeds} done")
    wait_for_unfinished_checkpoint(results / "ray" / name)
    return path, results, args, driver


def kill_group(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


# --- 1 and 6 and 8: SIGKILL at three points, a corrupt checkpoint, a changed file -------------


def test_driver_killed_at_three_points_resumes_each_time_without_retraining(tmp_path, ray_env):
    path, results, args, driver = start_tiny_study(tmp_path, "killed", ray_env, seeds=1)
    # (a) before the first trial ends
    kill_group(driver)
    assert not finished_trials(results, "killed")

    # 8: a changed study file is refused on resume, with what changed and how to start anew
    path.write_text(grid_study("killed", TWO_BY_TWO, seeds=1, epochs=5, patience=0))
    refused = in_process(*args, "--resume")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "budget.epochs: 3 -> 5" in refused.stderr and "--fresh" in refused.stderr
    path.write_text(grid_study("killed", TWO_BY_TWO, seeds=1, epochs=3, patience=0))

    # (b) mid-way: one trial finished and the next one checkpointed; that checkpoint is then damaged (6)
    driver = start_study(*args, "--resume", env=ray_env)
    wait_for(driver, "1/2 done")
    unfinished = wait_for_unfinished_checkpoint(results / "ray" / "killed")
    kill_group(driver)
    before = finished_trials(results, "killed")
    assert len(before) >= 1
    wait_until_released(unfinished / ".lock")  # the killed driver's worker is gone
    damaged = set()
    for state in unfinished.glob("run/checkpoint/state.pt"):
        state.write_bytes(state.read_bytes()[:100])
        damaged.add(unfinished.name)  # the trial key

    # 6: where Ray kept its pickled state, payloads that run code when unpickled stay inert: resume
    # and tables read only the platform's JSON records, and Ray writes nothing into the results
    marker = tmp_path / "unpickled"
    planted = plant_pickles(results / "ray" / "killed", marker)
    # 3: a finished trial's record damaged (a kill mid-write on a file system without atomic rename)
    (results / "ray" / "killed" / "trials" / next(iter(before)) / "trial.json").write_text("")

    # (c) during the export of the tables
    driver = start_study(*args, "--resume", env=ray_env)
    wait_for(driver, "trials done; exporting", timeout=400)
    kill_group(driver)
    resumed = study(*args, "--resume", env=ray_env)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "Traceback" not in resumed.stderr
    # the command that started the study, then the one that continued it (three times; the refused one not)
    start = "python -m study.run " + shlex.join(args)
    assert (results / "killed" / "command.txt").read_text().splitlines() == [start, start + " --resume"]

    children = assert_complete(results, "killed", ["small", "atr"], seeds=1)
    after = finished_trials(results, "killed")
    for key, metrics in before.items():  # finished before a kill: never trained again
        assert after[key]["elapsed_seconds"] == metrics["elapsed_seconds"] and after[key]["steps"] == metrics["steps"]
    client = mlflow_runs(results, "killed")[0]
    for child in children:
        epochs = sorted(m.step for m in client.get_metric_history(child.info.run_id, "elapsed_s"))
        if child.data.tags["trial_key"] in before:  # nothing logged again for a finished trial
            assert epochs == [1, 2, 3], (child.data.tags["label"], epochs)
        else:  # a restarted epoch is logged again, at its own step
            assert set(epochs) == {1, 2, 3}, (child.data.tags["label"], epochs)
    from study.store.records import load_records

    records = {r["key"]: r for r in load_records(results, "killed")}
    assert damaged and all(records[name]["metrics"]["resumes"] == 0 for name in damaged)  # from scratch
    tables = in_process("killed", "--results", str(results), module="study.table")
    assert tables.returncode == 0, tables.stderr[-3000:]
    assert not marker.exists(), "a pickle from the results directory was loaded"
    assert set(results.rglob("*.pkl")) == planted  # Ray kept its own pickles elsewhere
    assert all(r["metrics"]["epochs"] == 3 and r["status"] == "ok" for r in records.values())


def plant_pickles(experiment: Path, marker: Path) -> set[Path]:
    """Files named like Ray's experiment state and trial errors, each a pickle that creates the
    directory ``marker`` when it is loaded."""
    import pickle

    class Payload:
        def __reduce__(self):
            return os.makedirs, (str(marker),)

    blob = pickle.dumps(Payload())
    planted = {experiment / "tuner.pkl", experiment / "trainable.pkl", experiment / "r00s1_x" / "error.pkl"}
    for path in planted:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(blob)
    (experiment / "experiment_state-2026-01-01_00-00-00.json").write_bytes(b"")
    (experiment / "search_gen_state-2026-01-01_00-00-00.json").write_bytes(blob)
    return planted


def wait_for_unfinished_checkpoint(experiment: Path, timeout: float = 400, count: int = 1) -> Path:
    """The trial store directory of an unfinished trial once it has an epoch checkpoint (and
    ``count`` unfinished trials have one)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        running = {state.parents[2] for state in experiment.glob("trials/*/run/checkpoint/state.pt")
                   if not (experiment / "finished" / state.parents[2].name).exists()}
        if len(running) >= count:
            return sorted(running)[0]
        time.sleep(0.2)
    seen = sorted(str(path.relative_to(experiment)) for path in experiment.glob("*/*/*"))
    raise AssertionError(f"no epoch checkpoint of {count} unfinished trial(s) under {experiment}; there: {seen}")


def wait_until_released(lock: Path, timeout: float = 120) -> None:
    """Until no process holds the trial's lock (a worker can outlive its killed driver briefly)."""
    import fcntl

    deadline = time.time() + timeout
    with open(lock, "a") as handle:
        while time.time() < deadline:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(handle, fcntl.LOCK_UN)
                return
            except BlockingIOError:
                time.sleep(0.2)
    raise AssertionError(f"{lock} is still held after {timeout} s")


# --- 2: Ctrl-C and SIGTERM ----------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_driver_stops_cleanly_and_says_how_to_resume(tmp_path, ray_env, sig):
    # SIGINT tries a second driver first: the study must outlast it
    epochs = 40 if sig == signal.SIGINT else 3
    _, results, args, driver = start_tiny_study(tmp_path, "stopped", ray_env, seeds=1, epochs=epochs)
    if sig == signal.SIGTERM:  # security: the local Ray instance listens on loopback only
        addresses = listening_addresses(driver.pid)
        assert addresses and all(is_loopback(a) for a in addresses), addresses
    if sig == signal.SIGINT:  # 4: a second driver on a running study is refused, naming the first
        second = in_process(*args)  # the study's lock refuses it before anything loads or starts
        assert second.returncode == 2 and f"already running in {results} (driver PID {driver.pid} " in second.stderr
        assert "--fresh" not in second.stderr and not second.stdout
    if sig == signal.SIGINT:
        os.killpg(driver.pid, sig)  # Ctrl-C in a terminal reaches the whole process group
    else:
        os.kill(driver.pid, sig)  # `kill PID`, a batch system's stop
    rest, _ = driver.communicate(timeout=120)
    assert driver.returncode == 128 + sig, rest[-3000:]
    assert f"Resume with: python -m study.run {' '.join(args)} --resume\n" in rest  # the command it was given
    assert "Traceback" not in rest
    state = json.loads((results / "stopped" / "study.json").read_text())
    assert state["status"] == "stopped" and state["stopped_by"] == ("SIGINT" if sig == signal.SIGINT else "SIGTERM")
    _, parents, children = mlflow_runs(results, "stopped")
    assert [p.info.status for p in parents] == ["KILLED"]
    assert children and all(c.info.status == "KILLED" for c in children)
    if sig == signal.SIGTERM:
        resumed = study(*args, "--resume", env=ray_env)
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        output = resumed.stdout + resumed.stderr
        assert "MLflow logging failed" not in output and "were lost" not in output, output[-4000:]
        assert_complete(results, "stopped", ["small", "atr"], seeds=1, output=output)


# --- 3: a trial's worker process killed mid-epoch ------------------------------------------


def test_killed_trial_worker_is_retried_from_its_last_checkpoint(tmp_path, ray_env):
    path = tmp_path / "worker.yaml"
    path.write_text(grid_study("worker", "  - {label: small, set: {}}", seeds=1, epochs=4)
                    .replace("size: 300,", "size: 1000,"))
    results = tmp_path / "results"
    driver = start_study(str(path), "--cpus", "1", "--results", str(results), "--verbose", env=ray_env)
    line = wait_for(driver, "epoch 2/4")[-1]
    worker = int(re.search(r"pid=(\d+)", line).group(1))  # the trial's own output names its process
    os.kill(worker, signal.SIGKILL)
    rest, _ = driver.communicate(timeout=400)
    skip_if_ray_node_lost(driver.returncode, rest)
    assert driver.returncode == 0, rest[-3000:]
    assert "retrying it from its last checkpoint" in rest
    (metrics,) = finished_trials(results, "worker").values()
    assert metrics["status"] == "ok" and metrics["epochs"] == 4
    assert metrics["resumes"] == 1  # restored from a checkpoint, not restarted from epoch 0
    client, _, (child,) = mlflow_runs(results, "worker")
    epochs = sorted(m.step for m in client.get_metric_history(child.info.run_id, "elapsed_s"))
    # every epoch once, also the one in flight at the kill that the retry trained again
    assert epochs == list(range(1, 5)), epochs
    assert child.info.status == "FINISHED"


def test_epoch_checkpointed_but_not_reported_at_a_kill_still_reaches_the_record(tmp_path, cache_dir):
    """3: the kill can land after an epoch's checkpoint is written but before its report: the
    retry resumes after that epoch and never trains it again, so the record (which MLflow is
    reconciled against) must take it from the run's own history."""
    from nmt.config import config_from_dict
    from nmt.trainer import run
    from study.execution.trainable import TRIAL, finite_metrics, train_trial
    from study.spec.expansion import expand
    from study.spec.loading import load_study
    from study.store.trial_store import TrialStore

    path = tmp_path / "window.yaml"
    path.write_text(grid_study("window", "  - {label: small, set: {}}", seeds=1, epochs=3))
    (trial,) = expand(load_study(str(path)))
    # this process computed with torch before, so it cannot pin portable numerics: both runs compute natively,
    # as train_trial would find (a run keeps one arithmetic: a portable checkpoint is not continued natively)
    trial.config["train"]["numerics"] = "native"
    trial.storage = str(tmp_path / "store")
    store = TrialStore(Path(trial.storage))

    class Killed(BaseException):
        pass

    def report_until_killed(metrics: dict, checkpoint_dir: Path) -> None:
        if metrics["epoch"] == 2:
            raise Killed  # the checkpoint of epoch 2 is on disk; its report was never sent
        store.progress(trial.key, finite_metrics(metrics))

    with pytest.raises(Killed):
        run(config_from_dict(trial.config), store.run_dir(trial.key), report=report_until_killed, log=lambda _: None)
    assert [e["epoch"] for e in store.history(trial.key)] == [1]
    train_trial({TRIAL: trial.to_dict()})  # the retry, in this process (tune.report is then a no-op)
    history = store.history(trial.key)
    assert [e["epoch"] for e in history] == [1, 2, 3]
    assert store.finished_metrics(trial.key)["resumes"] == 1  # continued after epoch 2, not retrained
    assert history[1]["trial_key"] == trial.key and math.isfinite(history[1]["valid_ppl"])


def test_a_finished_trial_run_again_keeps_the_node_that_trained_it(tmp_path, cache_dir, monkeypatch):
    """A resumed study hands its finished trials to workers again, which report their stored
    results: the record must keep naming the node that trained the trial (committed records
    otherwise change on every resume)."""
    from study.execution.trainable import TRIAL, train_trial
    from study.spec.expansion import expand
    from study.spec.loading import load_study
    from study.store.trial_store import TrialStore

    path = tmp_path / "node.yaml"
    path.write_text(grid_study("node", "  - {label: small, set: {}}", seeds=1, epochs=1))
    (trial,) = expand(load_study(str(path)))
    # this process computed with torch before, so it cannot pin portable numerics: both runs compute natively,
    # as train_trial would find (a run keeps one arithmetic: a portable checkpoint is not continued natively)
    trial.config["train"]["numerics"] = "native"
    trial.storage = str(tmp_path / "store")
    store = TrialStore(Path(trial.storage))
    monkeypatch.setattr("study.execution.trainable.ray_node_id", lambda: "node-that-trained")
    monkeypatch.setattr("study.execution.trainable.cpu_description", lambda: "CPU that trained (family 25; avx2)")
    train_trial({TRIAL: trial.to_dict()})
    record = (store.trial_dir(trial.key) / "trial.json").read_text()
    assert all(epoch["cpu"] == "CPU that trained (family 25; avx2)" for epoch in store.history(trial.key))
    monkeypatch.setattr("study.execution.trainable.ray_node_id", lambda: "node-of-the-resume")
    monkeypatch.setattr("study.execution.trainable.cpu_description", lambda: "CPU of the resume (family 25; avx512f)")
    train_trial({TRIAL: trial.to_dict()})
    assert (store.trial_dir(trial.key) / "trial.json").read_text() == record
    assert store.identity(trial.key)["node_id"] == store.finished_metrics(trial.key)["node_id"] == "node-that-trained"
    assert store.identity(trial.key)["cpu"] == store.finished_metrics(trial.key)["cpu"] == \
        "CPU that trained (family 25; avx2)"


def test_a_finished_trial_recorded_before_cpus_were_gets_none_on_a_resume(tmp_path, cache_dir, monkeypatch):
    """A committed record from before trials recorded their CPU stays byte for byte as it was:
    the machine that resumes the study did not train it."""
    import json

    from study.execution.trainable import TRIAL, train_trial
    from study.spec.expansion import expand
    from study.spec.loading import load_study
    from study.store.trial_store import TrialStore

    path = tmp_path / "old.yaml"
    path.write_text(grid_study("old", "  - {label: small, set: {}}", seeds=1, epochs=1))
    (trial,) = expand(load_study(str(path)))
    # this process computed with torch before, so it cannot pin portable numerics: both runs compute natively,
    # as train_trial would find (a run keeps one arithmetic: a portable checkpoint is not continued natively)
    trial.config["train"]["numerics"] = "native"
    trial.storage = str(tmp_path / "store")
    store = TrialStore(Path(trial.storage))
    train_trial({TRIAL: trial.to_dict()})
    identity_path = store.trial_dir(trial.key) / "trial.json"  # the records as the older code wrote them
    identity = json.loads(identity_path.read_text())
    identity.pop("cpu")
    identity_path.write_text(json.dumps(identity, indent=2))
    metrics_path = store.finished_dir(trial.key) / "metrics.json"
    metrics = json.loads(metrics_path.read_text())
    metrics.pop("cpu")
    metrics_path.write_text(json.dumps(metrics, indent=2))
    before = identity_path.read_text()
    train_trial({TRIAL: trial.to_dict()})
    assert "cpu" not in store.identity(trial.key) and "cpu" not in store.finished_metrics(trial.key)
    assert identity_path.read_text() == before


# --- 3: the results disk fills up, or turns read-only, mid-study ---------------------------


def test_full_or_read_only_results_disk_stops_with_one_line_and_resumes(tmp_path, ray_env):
    with small_file_system(tmp_path / "results") as results:
        path = tmp_path / "disk.yaml"
        path.write_text(grid_study("disk", TWO_BY_TWO, seeds=2, epochs=3))
        args = [str(path), "--cpus", "1", "--results", str(results)]
        store = results / "ray" / "disk"
        # the command the user typed, plus --resume (the study came from a file: its name alone is no command)
        resume = f"then resume with: python -m study.run {path} --cpus 1 --results {results} --resume (finished trials are kept)"

        driver = start_study(*args, env=ray_env)
        wait_for_unfinished_checkpoint(store)
        filler = fill(results / "filler")
        output, _ = driver.communicate(timeout=300)
        skip_if_ray_node_lost(driver.returncode, output)
        assert driver.returncode == 2 and "Traceback" not in output, output[-3000:]
        assert f"error: study disk stopped: no space left on the device of {store}; free some space, {resume}" \
            in output.splitlines()
        filler.unlink()

        driver = start_study(*args, "--resume", env=ray_env)
        before = len(finished_trials(results, "disk"))
        deadline = time.time() + 300
        while len(finished_trials(results, "disk")) == before and time.time() < deadline:
            time.sleep(0.2)
        with read_only(store):
            output, _ = driver.communicate(timeout=300)
        skip_if_ray_node_lost(driver.returncode, output)
        assert driver.returncode == 2 and "Traceback" not in output and "SIGINT" not in output, output[-3000:]
        assert f"error: study disk stopped: its results directory {store} is not writable; make it writable, " \
               f"{resume}" in output.splitlines()

        resumed = study(*args, "--resume", env=ray_env)
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        assert_complete(results, "disk", ["small", "atr"], seeds=2)


def fill(path: Path) -> Path:
    """Write zeros to ``path`` until its file system has no space left."""
    chunk = bytes(1 << 20)
    with open(path, "wb") as handle:
        try:
            while True:
                handle.write(chunk)
                handle.flush()
        except OSError:
            pass
    return path


# --- 11: one MLflow child run per trial, however the trials came and the store went ----------


SAME_SAMPLES = search_study("same", "    model.cell: {type: categorical, choices: [gru]}", samples=2, epochs=2)


def test_equal_search_samples_and_an_emptied_mlflow_store_keep_one_child_run_per_trial(tmp_path, ray_env):
    import optuna

    path = tmp_path / "same.yaml"
    path.write_text(SAME_SAMPLES)
    results = tmp_path / "results"
    args = [str(path), "--cpus", "1", "--results", str(results)]
    driver = start_study(*args, env=ray_env)
    wait_for(driver, "1/2 done")
    kill_group(driver)
    for lock in (results / "ray" / "same" / "trials").glob("*/.lock"):
        wait_until_released(lock)
    for store in results.glob("mlflow.db*"):  # the tracking store emptied: a new, empty one
        store.unlink()

    resumed = study(*args, "--resume", env=ray_env)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    rows = table_rows(results, "same")
    assert len(rows) == 2 and all(r["label"].endswith(": cell=gru") for r in rows), rows
    client, parents, children = mlflow_runs(results, "same")
    assert len(children) == 2 and len({c.data.tags["trial_key"] for c in children}) == 2
    assert all(c.info.status == "FINISHED" for c in children + parents), [c.info.status for c in children]
    for child in children:  # every epoch of every trial, the one before the kill included
        assert sorted(m.step for m in client.get_metric_history(child.info.run_id, "elapsed_s")) == [1, 2]
    stored = optuna.load_study(study_name="same", storage=f"sqlite:///{results / 'optuna.db'}")
    assert sum(t.state == optuna.trial.TrialState.COMPLETE for t in stored.trials) == 2


# --- 4: a worker node of a two-node cluster dies --------------------------------------------


def test_dead_worker_node_trials_move_to_the_surviving_node(tmp_path, ray_env):
    ray_env = dict(ray_env, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16))  # as the README says
    with LoopbackCluster(ray_env, nodes=2) as cluster:
        path = tmp_path / "nodes.yaml"
        path.write_text(grid_study("nodes", TWO_BY_TWO, seeds=1, epochs=8).replace("size: 300,", "size: 600,"))
        results = tmp_path / "results"
        driver = start_study(str(path), "--results", str(results), "--address", cluster.address, env=ray_env)
        wait_for(driver, "0/2 done", timeout=300)
        wait_for_unfinished_checkpoint(results / "ray" / "nodes", count=2)  # one trial on each node
        cluster.kill_node(1)
        rest, _ = driver.communicate(timeout=500)
        skip_if_ray_node_lost(driver.returncode, rest)
        assert driver.returncode == 0, rest[-3000:]
        assert "retrying it from its last checkpoint" in rest
        finished = finished_trials(results, "nodes")
        assert len(finished) == 2 and all(m["status"] == "ok" and m["epochs"] == 8 for m in finished.values())
        from study.store.records import load_records

        nodes = {record["metrics"]["node_id"] for record in load_records(results, "nodes")}
        assert len(nodes) == 1  # both trials ended on the surviving node
        assert_complete(results, "nodes", ["small", "atr"], seeds=1)


# --- 5: NaN, exploding gradients and an exception in one trial; Optuna sees finite values ----


# lr 1e37: Adam's first step takes the weights to about 1e37, so the next batch's summed loss overflows
# float32 on any CPU; at 1e30 a tanh RNN diverged only where the matrix kernels turn inf - inf into NaN
# (an AVX-512 machine's gave -inf, and its saturated RNN trained on with a finite loss)
FAILING = """  - {label: stable, set: {}}
  - {label: exploding, set: {train.lr: 1.0e+37, train.clip: 0}}
  - {label: out of memory, set: {model.hidden: 2000000}}"""


def test_failing_and_diverging_trials_do_not_stop_the_study(tmp_path, cluster_env):
    path = tmp_path / "failing.yaml"
    path.write_text(grid_study("failing", FAILING, seeds=1, epochs=2, cell="rnn"))
    results = tmp_path / "results"
    # MLflow's own variable chooses the tracking store when --tracking-uri does not
    tracking = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    result = study(str(path), "--cpus", "2", "--results", str(results), env={**cluster_env, "MLFLOW_TRACKING_URI": tracking})
    # the study finishes and writes its table, and its exit status and last line say that a trial failed
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].endswith("but 1 of 3 trials failed (the table's status column names "
                                                            "the error; once its cause is fixed, --resume trains them "
                                                            "again): exit 1")
    rows = {r["label"]: r for r in table_rows(results, "failing")}
    assert rows["stable"]["status"] == "ok"
    assert rows["exploding"]["status"] == "diverged"
    failed = rows["out of memory"]["status"]
    assert failed.startswith("failed (") and "allocate" in failed and "\n" not in failed, failed
    table = (results / "failing" / "table.md").read_text()
    assert "| out of memory | " in table and "failed (" in table
    assert not (results / "mlflow.db").exists()
    _, parents, children = mlflow_runs(results, "failing", uri=tracking)
    statuses = {c.data.tags["label"]: (c.info.status, c.data.tags["status"]) for c in children}
    assert statuses == {"stable": ("FINISHED", "ok"), "exploding": ("FINISHED", "diverged"),
                        "out of memory": ("FAILED", "failed")}
    # the UI's Source, Version and User columns: the study file, the code's commit, the user
    for run in [*parents, *children]:
        assert run.data.tags["mlflow.source.name"] == str(path) and run.data.tags["mlflow.user"]
        assert run.data.tags.get("mlflow.source.git.commit", "unknown") == run.data.tags["git_commit"].removesuffix("+dirty")


def test_optuna_and_asha_never_see_nan_from_diverging_trials(tmp_path, cluster_env):
    import math

    import optuna

    results = tmp_path / "results"
    result = study("optuna_atr", "--smoke", "--cpus", "2", "--results", str(results), "--set", "budget.epochs=2",
                   "--set", "train.clip=0",
                   "--set", "search.space={train.lr: {type: categorical, choices: [1.0e-3, 1.0e+30]}}",
                   env=cluster_env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    stored = optuna.load_study(study_name="optuna_atr", storage=f"sqlite:///{results / 'optuna.db'}")
    assert len(stored.trials) == 3  # --smoke: 3 samples
    complete = [t for t in stored.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert complete and all(t.value is not None and math.isfinite(t.value) for t in complete)
    assert any(t.params["train.lr"] > 1 for t in complete), "no diverging trial was sampled"


# --- 7: the MLflow server unreachable at the start, or gone mid-study -----------------------


def test_unreachable_tracking_server_is_one_error_before_any_trial(tmp_path, ray_env):
    results = tmp_path / "results"
    result = study("ablation_srnmt", "--smoke", "--results", str(results),
                   "--tracking-uri", f"http://127.0.0.1:{free_port()}", env=ray_env, timeout=180)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "MLflow tracking store http://127.0.0.1:" in line and "cannot be reached" in line
    assert not (results / "ray").exists() and not (results / "ablation_srnmt").exists()


def test_tracking_server_lost_mid_study_costs_only_logging(tmp_path, ray_env):
    with mlflow_server(tmp_path, ray_env) as (tracking, server):
        path = tmp_path / "lost.yaml"
        path.write_text(grid_study("lost", TWO_BY_TWO, seeds=1, epochs=3))
        results = tmp_path / "results"
        driver = start_study(str(path), "--cpus", "1", "--results", str(results),
                             "--tracking-uri", tracking, env=ray_env)
        wait_for(driver, "0/2 done")
        wait_for_unfinished_checkpoint(results / "ray" / "lost")
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        rest, _ = driver.communicate(timeout=400)
        skip_if_ray_node_lost(driver.returncode, rest)
        assert driver.returncode == 0, rest[-3000:]
        assert "MLflow logging call(s) were lost" in rest and "python -m study.table lost" in rest
        rows = table_rows(results, "lost")
        assert [r["label"] for r in rows] == ["small", "atr"] and all(r["status"] == "ok" for r in rows)
        (results / "lost" / "table.md").unlink()
        rebuilt = in_process("lost", "--results", str(results), module="study.table")
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert (results / "lost" / "table.md").is_file()


# --- 9: two studies at once on one SQLite store ----------------------------------------------


def test_two_studies_at_once_share_one_sqlite_store(tmp_path, cluster_env):
    results = tmp_path / "results"
    drivers = []
    for name in ("first", "second"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(grid_study(name, TWO_BY_TWO, seeds=2, epochs=2))
        drivers.append(start_study(str(path), "--cpus", "1", "--results", str(results), env=cluster_env))
    for driver in drivers:
        output, _ = driver.communicate(timeout=500)
        skip_if_ray_node_lost(driver.returncode, output)
        assert driver.returncode == 0, output[-3000:]
        assert "database is locked" not in output and "MLflow logging failed" not in output, output[-3000:]
    for name in ("first", "second"):
        assert_complete(results, name, ["small", "atr"], seeds=2)


SHUTDOWN_WHILE_HANDLES_GO = """
import gc, weakref
import ray
from study.spec.options import Execution, RunOptions
from study.execution.ray_setup import BackgroundShutdown, start_ray

start_ray(RunOptions(how=Execution(cpus=1)))

@ray.remote
def square(x):
    return x * x

class Holder:
    pass

def leave_cyclic_garbage():
    holder = Holder()
    holder.itself = holder
    holder.refs = [square.remote(i) for i in range(500)]
    ray.get(holder.refs)
    return weakref.ref(holder)

garbage = leave_cyclic_garbage()
kept = [square.remote(i) for i in range(500)]
ray.get(kept)
stopping = BackgroundShutdown()
assert garbage() is None, "cyclic garbage holding ObjectRefs was left for a collection during the shutdown"
assert not gc.isenabled(), "the cyclic collector may free Ray handles while Ray shuts down"
for _ in range(20000):  # what writing the tables allocates meanwhile: cycles, none holding Ray handles
    cycle = []
    cycle.append(cycle)
stopping.join()
assert gc.isenabled(), "the cyclic collector stayed off after Ray stopped"
del kept
gc.collect()
print("driver survived")
"""


def test_ray_handles_freed_while_ray_stops_do_not_end_the_driver(ray_env):
    """Fault: the driver drops Ray handles (ObjectRefs left as garbage by Tune) while Ray shuts down
    in a background thread; Ray then ends the process ("The core worker has already been shutdown"),
    seen once as a study that exited 1 while writing its tables. The garbage is collected before
    the shutdown starts and the collector is off until it ends."""
    result = subprocess.run([sys.executable, "-c", SHUTDOWN_WHILE_HANDLES_GO], cwd=ROOT, env=ray_env,
                            capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    skip_if_ray_node_lost(result.returncode, output)
    assert result.returncode == 0 and "driver survived" in result.stdout, output[-3000:]


INTERRUPTED_EXPORT = """
import sys
import study.execution.driver as driver
from nmt.cli import run_main
from study.run import main

def interrupted(*_args, **_kwargs):
    raise KeyboardInterrupt  # Ctrl-C while the tables are written

driver.write_exports = interrupted
sys.exit(run_main(main, sys.argv[1:]))
"""


def test_ctrl_c_while_the_tables_are_written_says_how_to_resume(tmp_path, cluster_env):
    path = tmp_path / "export.yaml"
    path.write_text(grid_study("export", "  - {label: small, set: {}}", epochs=1))
    args = [str(path), "--cpus", "1", "--results", str(tmp_path / "results")]
    result = subprocess.run([sys.executable, "-c", INTERRUPTED_EXPORT, *args], cwd=ROOT, env=cluster_env,
                            capture_output=True, text=True, timeout=300)
    skip_if_ray_node_lost(result.returncode, result.stdout + result.stderr)
    assert result.returncode == 128 + signal.SIGINT and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert (f"stopped while writing the tables; every trial is kept. Resume with: python -m study.run "
            f"{' '.join(args)} --resume (it trains nothing") in result.stderr
    assert len(finished_trials(tmp_path / "results", "export")) == 1
    state = json.loads((tmp_path / "results" / "export" / "study.json").read_text())
    assert state["status"] == "stopped" and state["stopped_by"] == "SIGINT while the tables were written"


STORE_GONE = """
import sys
import study.execution.driver as driver
from nmt.cli import run_main
from study.run import main
from study.store.object_store import StorageError

def store_gone(*_args, **_kwargs):
    raise StorageError("s3://lab: the bucket does not exist; create it or correct --storage")  # deleted mid-run

driver.run_trials = store_gone
sys.exit(run_main(main, sys.argv[1:]))
"""


def test_a_run_ended_by_an_error_leaves_study_json_stopped_with_the_reason(tmp_path, cluster_env):
    path = tmp_path / "gone.yaml"
    path.write_text(grid_study("gone", "  - {label: small, set: {}}", epochs=1))
    result = subprocess.run([sys.executable, "-c", STORE_GONE, str(path), "--results", str(tmp_path / "results")],
                            cwd=ROOT, env=cluster_env, capture_output=True, text=True, timeout=300)
    skip_if_ray_node_lost(result.returncode, result.stdout + result.stderr)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "error: s3://lab: the bucket does not exist; create it or correct --storage"], result.stderr[-3000:]
    state = json.loads((tmp_path / "results" / "gone" / "study.json").read_text())
    assert state["status"] == "stopped" and "StorageError: s3://lab: the bucket does not exist" in state["stopped_by"]
    listed = in_process("gone", "--results", str(tmp_path / "results"), module="study.list")
    assert listed.returncode == 0 and "stopped" in listed.stdout, listed.stdout
