"""A study with ``--storage s3://...`` against a real S3 API on loopback (moto's server, tests/conftest.py):
its trials and exports land in the bucket, a driver in an empty directory continues it with ``--resume``
and prints the same table without training anything again, and a second driver is refused while the
first holds the study's lease."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from study_helpers import grid_study, start_study, study, table_rows

from study.store.object_store import open_store, take_lease

pytestmark = pytest.mark.slow
VARIANTS = "  - {label: GRU, set: {}}\n  - {label: RNN, set: {model.cell: rnn}}"


def test_a_study_on_s3_resumes_from_an_empty_directory_with_the_same_table(tmp_path, ray_env, s3_env, bucket):
    env = {**ray_env, **s3_env}
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

    # another machine, an empty directory: the records come down, nothing trains again, the same table
    second = study(str(study_file), "--cpus", "2", "--results", str(tmp_path / "b"), "--storage", uri, "--resume",
                   env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"storage: {uri}: 2 finished trial(s) of tiny_s3 there" in second.stdout
    assert (tmp_path / "b" / "tiny_s3" / "table.md").read_text(encoding="utf-8") == table
    assert "epoch 1" not in second.stdout

    # while another driver holds the study, a third is refused in one line, and nothing is written
    lease = take_lease(store, "ray/tiny_s3/driver.lease", owner="elsewhere:1")
    third = study(str(study_file), "--cpus", "2", "--results", str(tmp_path / "c"), "--storage", uri, "--resume",
                  env=env)
    lease.release()
    assert third.returncode == 2 and len(third.stderr.strip().splitlines()) == 1, third.stderr
    assert "driver.lease: held by elsewhere:1" in third.stderr and not (tmp_path / "c" / "tiny_s3").exists()


def test_fresh_with_storage_is_refused_in_one_line(tmp_path, ray_env):
    result = study("ablation_srnmt", "--smoke", "--fresh", "--storage", "s3://bucket/x", "--results",
                   str(tmp_path / "r"), env=ray_env)
    assert result.returncode == 2 and result.stderr.strip() == (
        "error: --fresh with --storage s3://bucket/x: the tool deletes nothing in an object store; remove the study's "
        "objects there yourself, or choose another prefix")


QUALITY = ("label", "bleu_mean", "bleu_std", "n", "epochs", "best_epoch", "valid_bleu", "chrf")


def test_a_driver_killed_mid_study_is_resumed_from_an_empty_directory_to_the_same_numbers(tmp_path, ray_env, s3_env,
                                                                                          bucket):
    env = {**ray_env, **s3_env}
    study_file = tmp_path / "tiny_kill.yaml"
    study_file.write_text(grid_study("tiny_kill", VARIANTS, seeds=1, epochs=6))
    killed_uri, whole_uri = f"s3://{bucket}/killed", f"s3://{bucket}/whole"
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
    resumed = study(str(study_file), "--cpus", "2", "--results", str(tmp_path / "b"), "--storage", killed_uri,
                    "--resume", env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    finished = [json.loads(path.read_text()) for path in (tmp_path / "b" / "ray" / "tiny_kill" / "finished").glob("*/metrics.json")]
    assert len(finished) == 2 and any(m.get("resumes", 0) >= 1 for m in finished)  # continued, not trained again
    whole = study(str(study_file), "--cpus", "2", "--results", str(tmp_path / "c"), "--storage", whole_uri, env=env)
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert ([{k: row[k] for k in QUALITY if k in row} for row in table_rows(tmp_path / "b", "tiny_kill")]
            == [{k: row[k] for k in QUALITY if k in row} for row in table_rows(tmp_path / "c", "tiny_kill")])
