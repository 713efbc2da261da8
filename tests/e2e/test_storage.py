"""A study with ``--storage s3://...`` against a real S3 API on loopback (moto's server, tests/conftest.py):
its trials and exports land in the bucket, a driver in an empty directory continues it with ``--resume``
and prints the same table without training anything again, and a second driver is refused while the
first holds the study's lease; a driver that loses the lease stops, and a store that ignores
conditional writes (a header-dropping proxy in front of the server, tests/s3_proxy.py) is refused."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from s3_proxy import proxied_store
from study_helpers import (
    LoopbackCluster,
    free_port,
    grid_study,
    in_process,
    mlflow_server,
    search_study,
    skip_if_ray_node_lost,
    start_study,
    study,
    table_rows,
    wait_until_listening,
)

from study.store.object_store import open_store, take_lease

pytestmark = pytest.mark.slow
VARIANTS = "  - {label: GRU, set: {}}\n  - {label: RNN, set: {model.cell: rnn}}"


def test_a_study_on_s3_resumes_from_an_empty_directory_with_the_same_table(tmp_path, cluster_env, s3_env, bucket):
    env = {**cluster_env, **s3_env}
    study_file = tmp_path / "tiny_s3.yaml"
    study_file.write_text(grid_study("tiny_s3", VARIANTS, seeds=1, epochs=2))
    uri = f"s3://{bucket}/lab"
    first = study(str(study_file), "--cpus", "2", "--results", str(tmp_path / "a"), "--storage", uri, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    store = open_store(uri)
    markers = [key for key in store.keys("ray/tiny_s3/finished") if key.endswith("/metrics.json")]
    assert len(markers) == 2
    table = (tmp_path / "a" / "tiny_s3" / "table.md").read_text(encoding="utf-8")
    assert store.read("tiny_s3/table.md").decode() == table
    assert sum(key.endswith("/best.pt") for key in store.keys("ray/tiny_s3/finished")) == 2
    assert store.read("ray/tiny_s3/driver.lease") is None  # let go when the run ended
    # a dry run of the resume from an empty directory sees what the run will: the store's finished trials
    planned = in_process(str(study_file), "--cpus", "2", "--results", str(tmp_path / "dry"), "--storage", uri, "--resume",
                         "--dry-run")
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert "(2 finished, 0 to continue, 0 to train)" in planned.stdout and not (tmp_path / "dry").exists()
    assert store.read("ray/tiny_s3/driver.lease") is None  # a dry run takes no lease

    # another machine, an empty directory: the records come down, nothing trains again, the same table
    second = study(str(study_file), "--cpus", "2", "--results", str(tmp_path / "b"), "--storage", uri, "--resume",
                   env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"storage: {uri}: 2 finished trial(s) of tiny_s3 there" in second.stdout
    assert (tmp_path / "b" / "tiny_s3" / "table.md").read_text(encoding="utf-8") == table
    assert "epoch 1" not in second.stdout  # (a study kept in a store scores as one without: the killed-driver test)

    # while another driver holds the study, a third is refused in one line, and nothing is written
    lease = take_lease(store, "ray/tiny_s3/driver.lease", owner="elsewhere:1")
    third = in_process(str(study_file), "--cpus", "2", "--results", str(tmp_path / "c"), "--storage", uri, "--resume")
    lease.release()
    assert third.returncode == 2 and len(third.stderr.strip().splitlines()) == 1, third.stderr
    assert "driver.lease: held by elsewhere:1" in third.stderr and not (tmp_path / "c" / "tiny_s3").exists()

    reading_commands_read_the_store(tmp_path / "reader", uri, table)
    damaged_objects_are_one_line_and_cost_nothing(tmp_path / "damaged", study_file, uri)


def one_line(result, *parts: str) -> str:
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    (line,) = result.stderr.strip().splitlines()
    assert all(part in line for part in parts), line
    return line


def reading_commands_read_the_store(folder: Path, uri: str, table: str) -> None:
    """study.table, study.list, study.compare and the Python API, each from an empty directory."""
    rebuilt = in_process("tiny_s3", "--results", str(folder / "table"), "--storage", uri, module="study.table")
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    assert f"storage: {uri}: tiny_s3: 2 finished trial(s) into" in rebuilt.stdout
    assert (folder / "table" / "tiny_s3" / "table.md").read_text(encoding="utf-8") == table
    listed = in_process("tiny_s3", "--results", str(folder / "list"), "--storage", uri, module="study.list")
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert listed.stdout.count("finished") >= 2 and "GRU" in listed.stdout and "RNN" in listed.stdout
    compared = in_process("tiny_s3", "--reference", "GRU", "--results", str(folder / "compare"), "--storage", uri,
                          module="study.compare")
    assert compared.returncode == 0, compared.stderr[-3000:]
    assert "RNN" in compared.stdout
    from study.api import load_table

    frame = load_table("tiny_s3", results=folder / "api", storage=uri)
    assert list(frame["label"]) == ["GRU", "RNN"]
    one_line(in_process("nothing_here", "--results", str(folder / "x"), "--storage", uri, module="study.table"),
             f"--storage {uri}: no study nothing_here there (studies there: tiny_s3)")


def damaged_objects_are_one_line_and_cost_nothing(folder: Path, study_file: Path, uri: str) -> None:
    """Garbage, a truncated record and a missing object in the store; a bucket that does not exist: one line,
    exit 2, nothing written locally, and once mended the study reads whole again."""
    store = open_store(uri)
    progress = next(key for key in store.keys("ray/tiny_s3/trials") if key.endswith("/progress.json"))
    marker = next(key for key in store.keys("ray/tiny_s3/finished") if key.endswith("/metrics.json"))
    hyp = marker.replace("metrics.json", "test.hyp")
    for key, damage in ((progress, b"\x00garbage"), (marker, store.read(marker)[:40]), (hyp, None)):
        original = store.read(key)
        if damage is None:
            store.delete(key)
        else:
            store.write(key, damage)
        resumed = in_process(str(study_file), "--cpus", "2", "--results", str(folder), "--storage", uri, "--resume")
        if damage is None:
            one_line(resumed, f"{uri}/{hyp}: missing beside its trial's marker metrics.json; delete {uri}/{marker}")
        else:
            one_line(resumed, f"{uri}/{key}: not valid JSON (damaged or cut short)", "delete that object")
        assert not folder.exists()  # nothing half-written
        assert store.read("ray/tiny_s3/driver.lease") is None  # the refused driver let the study go
        store.write(key, original)
    rebuilt = in_process("tiny_s3", "--results", str(folder), "--storage", uri, module="study.table")
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    bucket = uri.split("/")[2]
    one_line(in_process(str(study_file), "--results", str(folder / "no-bucket"), "--storage", f"s3://{bucket}-missing/x"),
             f"s3://{bucket}-missing: the bucket does not exist")
    assert not (folder / "no-bucket").exists()


def test_a_store_that_ignores_conditional_writes_is_refused_before_anything_is_written(tmp_path, s3_env, s3_endpoint,
                                                                                         bucket, monkeypatch):
    study_file = tmp_path / "probe_s3.yaml"
    study_file.write_text(grid_study("probe_s3", VARIANTS))
    uri, results = f"s3://{bucket}/lab", tmp_path / "results"
    with proxied_store(s3_endpoint, dropped=("If-None-Match", "If-Match")) as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        refused = in_process(str(study_file), "--cpus", "1", "--results", str(results), "--storage", uri)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    one_line(refused, f"error: --storage {uri}: the store ignores If-None-Match (a second write-once create of {uri}/"
                      ".rnmt-probe-", "need conditional writes")
    assert not results.exists() and open_store(uri).keys() == []  # no lease, no record, no probe left behind


def test_a_driver_that_lost_its_lease_stops_its_trials_and_puts_nothing_up(tmp_path, cluster_env, s3_env, bucket):
    """Another driver takes the study over (the lease object replaced, as a driver does once the lease expired):
    the first one starts no further trial, uploads no exports, and says how to resume, within a renewal."""
    study_file = tmp_path / "lease_s3.yaml"
    study_file.write_text(grid_study("lease_s3", VARIANTS, epochs=40))
    uri, results = f"s3://{bucket}/lab", tmp_path / "results"
    args = [str(study_file), "--max-concurrent", "1", "--results", str(results), "--storage", uri, "--lease-seconds", "3"]
    driver = start_study(*args, env={**cluster_env, **s3_env})  # it stops its trials itself: the shared cluster serves
    store = open_store(uri)
    deadline = time.time() + 240
    while not any(key.endswith("/progress.json") for key in store.keys("ray/lease_s3/trials")):
        assert driver.poll() is None and time.time() < deadline, driver.stdout.read()[-3000:]
        time.sleep(0.2)
    store.write("ray/lease_s3/driver.lease", json.dumps({"owner": "elsewhere:1", "seconds": 600}).encode())
    output, _ = driver.communicate(timeout=120)
    skip_if_ray_node_lost(driver.returncode, output)
    assert driver.returncode == 2 and "Traceback" not in output, output[-3000:]
    assert output.splitlines()[-1] == (
        f"error: study lease_s3 stopped: {uri}/ray/lease_s3/driver.lease: the lease was taken over by another driver, "
        f"which runs the study now; make sure no other driver runs it, then resume with: python -m study.run "
        f"{' '.join(args)} --resume (finished trials are kept)")
    assert json.loads(store.read("ray/lease_s3/driver.lease"))["owner"] == "elsewhere:1"  # the new holder's, untouched
    assert store.keys("lease_s3") == [] and store.keys("ray/lease_s3/finished") == []  # no exports, nothing finished
    assert len({key.split("/")[3] for key in store.keys("ray/lease_s3/trials")}) == 1  # the second trial never started


def test_fresh_with_storage_is_refused_in_one_line(tmp_path, ray_env):
    result = study("ablation_srnmt", "--smoke", "--fresh", "--storage", "s3://bucket/x", "--results",
                   str(tmp_path / "r"), env=ray_env)
    assert result.returncode == 2 and result.stderr.strip() == (
        "error: --fresh with --storage s3://bucket/x: the tool deletes nothing in an object store; remove the study's "
        "objects there yourself, or choose another prefix")


QUALITY = ("label", "bleu_mean", "bleu_std", "n", "epochs", "best_epoch", "valid_bleu", "chrf")


def test_a_driver_killed_mid_study_is_resumed_from_an_empty_directory_to_the_same_numbers(tmp_path, ray_env, s3_env,
                                                                                          bucket, cluster_env):
    env, joined = {**ray_env, **s3_env}, {**cluster_env, **s3_env}  # the driver killed outright has a Ray of its own
    study_file = tmp_path / "tiny_kill.yaml"
    study_file.write_text(grid_study("tiny_kill", VARIANTS, seeds=1, epochs=4))
    killed_uri = f"s3://{bucket}/killed"
    driver = start_study(str(study_file), "--cpus", "2", "--results", str(tmp_path / "a"), "--storage", killed_uri,
                         env=env)
    store = open_store(killed_uri)
    deadline = time.time() + 240
    while not any(key.endswith("/checkpoint/state.pt") for key in store.keys("ray/tiny_kill/trials")):
        assert driver.poll() is None and time.time() < deadline, "no epoch checkpoint reached the store"
        time.sleep(0.5)
    os.killpg(driver.pid, signal.SIGKILL)  # the driver and its Ray processes, mid-epoch
    driver.wait()
    assert store.read("ray/tiny_kill/driver.lease") is not None  # the dead driver could not let go

    # a new machine, an empty directory, the same URI: the study finishes from the uploaded epochs
    resumed = study(str(study_file), "--results", str(tmp_path / "b"), "--storage", killed_uri, "--resume", env=joined)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    finished = [json.loads(path.read_text()) for path in (tmp_path / "b" / "ray" / "tiny_kill" / "finished").glob("*/metrics.json")]
    assert len(finished) == 2 and any(m.get("resumes", 0) >= 1 for m in finished)  # continued, not trained again
    # the same study run straight through with no store at all
    whole = study(str(study_file), "--results", str(tmp_path / "c"), env=joined)
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert ([{k: row[k] for k in QUALITY if k in row} for row in table_rows(tmp_path / "b", "tiny_kill")]
            == [{k: row[k] for k in QUALITY if k in row} for row in table_rows(tmp_path / "c", "tiny_kill")])


def test_a_worker_node_killed_mid_epoch_hands_its_trial_to_the_other_node_through_the_store(tmp_path, ray_env, s3_env,
                                                                                             bucket):
    """Two Ray nodes in different working directories, no shared results directory: the worker node keeps its
    trial's working copy in its own scratch and the store; killed mid-epoch, its trial continues on the head node
    from the last uploaded checkpoint. MLflow is a tracking server on loopback that serves the artifacts."""
    env = {**ray_env, **s3_env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    scratch = tmp_path / "worker" / "scratch"
    places = [(tmp_path / "head", {}), (tmp_path / "worker", {"RNMT_SCRATCH": str(scratch)})]
    with mlflow_server(tmp_path, env) as (tracking, _), LoopbackCluster(env, nodes=2, places=places) as cluster:
        study_file = tmp_path / "driver" / "nodes_s3.yaml"
        study_file.parent.mkdir()
        study_file.write_text(grid_study("nodes_s3", VARIANTS, seeds=1, epochs=8).replace("size: 300,", "size: 600,"))
        uri, results = f"s3://{bucket}/cluster", tmp_path / "driver" / "results"
        # the kernel switch is set for the driver only: the nodes' trial workers get it from the driver (neither
        # GRU nor the tanh RNN has a Triton kernel: they run and record the torch paths, and the driver's check
        # of the switch accepts it)
        driver = start_study(str(study_file), "--results", str(results), "--address", cluster.address,
                             "--storage", uri, "--tracking-uri", tracking, env={**env, "NMT_KERNELS": "triton"},
                             cwd=tmp_path / "driver")
        store = open_store(uri)
        deadline = time.time() + 400
        moved = None
        while moved is None:  # a trial on the worker node with an epoch in the store
            assert driver.poll() is None and time.time() < deadline, "no trial of the worker node reached the store"
            for state in scratch.glob("*/ray/nodes_s3/trials/*/run/checkpoint/state.pt"):
                key = state.parents[2].name
                if store.version(f"ray/nodes_s3/trials/{key}/run/checkpoint/state.pt") is not None:
                    moved = key
            time.sleep(0.3)
        assert not (results / "ray" / "nodes_s3" / "trials" / moved / "run").exists()  # it never wrote there
        cluster.kill_node(1)
        rest, _ = driver.communicate(timeout=500)
        skip_if_ray_node_lost(driver.returncode, rest)
        assert driver.returncode == 0, rest[-3000:]
        finished = {path.parent.name: json.loads(path.read_text())
                    for path in (results / "ray" / "nodes_s3" / "finished").glob("*/metrics.json")}
        assert len(finished) == 2 and all(m["status"] == "ok" and m["epochs"] == 8 for m in finished.values())
        assert all(m["kernels"] == "torch" for m in finished.values())  # what ran, not what was asked
        assert finished[moved]["resumes"] >= 1  # continued from the worker node's upload, not trained again
        assert len({m["node_id"] for m in finished.values()}) == 1  # both ended on the head node
        assert not list(scratch.glob(f"*/ray/nodes_s3/finished/{moved}"))  # the worker node finished nothing
        assert store.read("nodes_s3/table.md") == (results / "nodes_s3" / "table.md").read_bytes()

        # every trial is one finished child run on the tracking server, its translations served as artifacts
        import mlflow

        client = mlflow.MlflowClient(tracking)
        (experiment,) = [e for e in client.search_experiments() if e.name == "nodes_s3"]
        runs = client.search_runs([experiment.experiment_id])
        children = [run for run in runs if "trial_key" in run.data.tags]
        assert sorted(run.data.tags["trial_key"] for run in children) == sorted(finished)
        assert all(run.info.status == "FINISHED" for run in children)
        for run in children:
            assert "test.hyp" in {item.path for item in client.list_artifacts(run.info.run_id)}
            assert len(client.get_metric_history(run.info.run_id, "valid_bleu")) == 8
        assert list((tmp_path / "artifacts").rglob("test.hyp"))  # stored by the server, not written by the client


@contextlib.contextmanager
def s3_with_credentials(tmp_path: Path):
    """A moto S3 server on loopback that checks credentials (its IAM emulation): (its endpoint, a key id and
    secret it accepts, with a bucket "lab" made with them)."""
    import boto3  # with moto: the [test] extra

    port = free_port()
    # the first three requests (the user, its key, its policy) are let through; every later one is checked
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "3", "MOTO_IAM_LOAD_MANAGED_POLICIES": "false"}
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        endpoint = f"http://127.0.0.1:{port}"
        wait_until_listening(server, port, "the moto server", timeout=60)
        admin = boto3.session.Session(aws_access_key_id="admin", aws_secret_access_key="admin", region_name="us-east-1")
        iam = admin.client("iam", endpoint_url=endpoint)
        iam.create_user(UserName="lab")
        key = iam.create_access_key(UserName="lab")["AccessKey"]
        iam.put_user_policy(UserName="lab", PolicyName="everything", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        boto3.session.Session(aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"],
                              region_name="us-east-1").client("s3", endpoint_url=endpoint).create_bucket(Bucket="lab")
        yield endpoint, key["AccessKeyId"], key["SecretAccessKey"]
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def test_wrong_credentials_are_one_line_that_repeats_no_secret(tmp_path, ray_env, monkeypatch):
    study_file = tmp_path / "creds.yaml"
    study_file.write_text(grid_study("creds", VARIANTS, seeds=1, epochs=1))
    with s3_with_credentials(tmp_path) as (endpoint, key_id, secret):
        base = {**ray_env, "AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}
        base.pop("AWS_PROFILE", None)
        wrong_secret = "wrong-secret-0123456789"
        for key, value in ((key_id, wrong_secret), ("AKIAUNKNOWNKEY000000", secret)):
            env = {**base, "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": value}
            result = study(str(study_file), "--results", str(tmp_path / "r"), "--storage", "s3://lab/x", env=env)
            line = one_line(result, "s3://lab/x: the storage refused these credentials", "check AWS_PROFILE")
            assert value not in result.stdout + result.stderr and secret not in line
            assert not (tmp_path / "r").exists()
        # the right ones reach the bucket: the refusals above were the credentials'
        from study.store.object_store import S3Store

        for name, value in {**base, "AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret}.items():
            if name.startswith("AWS_"):
                monkeypatch.setenv(name, value)
        S3Store("lab", "x").check()


SEARCH = search_study("search_s3", "    model.cell: {type: categorical, choices: [gru, rnn]}\n"
                      "    train.lr: {type: loguniform, low: 0.001, high: 0.01}", samples=2, sampler="tpe", epochs=2)


def test_an_optuna_search_on_s3_continues_from_an_empty_directory_with_its_sampler_history(tmp_path, cluster_env, s3_env,
                                                                                            bucket):
    import optuna

    env = {**cluster_env, **s3_env}
    study_file = tmp_path / "search_s3.yaml"
    study_file.write_text(SEARCH)
    uri = f"s3://{bucket}/search"
    first = study(str(study_file), "--cpus", "2", "--results", str(tmp_path / "a"), "--storage", uri, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert open_store(uri).version("ray/search_s3/optuna.db") is not None
    resumed = study(str(study_file), "--cpus", "2", "--results", str(tmp_path / "b"), "--storage", uri, "--resume",
                    env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "epoch 1" not in resumed.stdout
    assert table_rows(tmp_path / "b", "search_s3") == table_rows(tmp_path / "a", "search_s3")
    here, there = (optuna.load_study(study_name="search_s3", storage=f"sqlite:///{tmp_path / folder / 'optuna.db'}")
                   for folder in ("a", "b"))
    assert [(t.number, t.params, t.values, t.state) for t in there.trials] == \
        [(t.number, t.params, t.values, t.state) for t in here.trials]
    assert len(there.trials) == 2
