"""A trial store mirrored through an object store: what one node uploads, another node (or a driver
in an empty directory) gets back whole, a finished trial counts only once its marker is up, and a
second attempt cannot overwrite the first one's result. Against moto's S3 server on loopback and a
directory.

Modules covered here: ``study.execution.callbacks``, ``study.store.remote_study``,
``study.store.records``, ``study.store.study_transfer`` and ``study.store.trial_store``."""

from __future__ import annotations

import json

import pytest

from nmt.errors import UserError
from study.store.directory_backend import DirectoryStore
from study.store.object_backend import StorageError
from study.store.s3_backend import S3Store
from study.store.store_mirror import StoreMirror
from study.store.study_transfer import pull_search, push_search
from study.store.trial_store import TrialStore


KEY = "0123456789ab"


@pytest.fixture(params=["s3", "directory"])
def remote(request, tmp_path):
    if request.param == "directory":
        return DirectoryStore(tmp_path / "bucket")
    return S3Store(request.getfixturevalue("bucket"), "lab")


def trained_epochs(store: TrialStore, epochs: int) -> None:
    """A trial as the trainable leaves it after ``epochs`` epochs: records and an epoch checkpoint."""
    store.start(KEY, {"key": KEY, "label": "GRU", "row": 0, "seed": 1, "config": {}, "params": {}, "sample": None})
    for epoch in range(1, epochs + 1):
        store.progress(KEY, {"epoch": epoch, "valid_bleu": 10.0 * epoch})
    checkpoint = store.run_dir(KEY) / "checkpoint"
    checkpoint.mkdir(parents=True, exist_ok=True)
    for name, data in {"config.yaml": b"model: {}\n", "src.model": b"spm", "best.pt": b"best%d" % epochs,
                       "state.pt": b"state%d" % epochs}.items():
        (checkpoint / name).write_bytes(data)


def test_a_retry_on_another_node_gets_the_last_uploaded_epoch(remote, tmp_path):
    node_a, node_b = TrialStore(tmp_path / "a" / "ray" / "s"), TrialStore(tmp_path / "b" / "ray" / "s")
    mirror_a, mirror_b = (StoreMirror(remote, "ray/s", node.experiment) for node in (node_a, node_b))
    assert mirror_b.pull_checkpoint(KEY) is False  # nothing uploaded yet: the retry trains from the start
    trained_epochs(node_a, 3)
    mirror_a.push_records(KEY)
    mirror_a.push_checkpoint(KEY)
    trained_epochs(node_a, 4)  # the next epoch: only what changes goes up
    mirror_a.push_records(KEY)
    mirror_a.push_checkpoint(KEY, static_done=True)
    assert mirror_b.pull_checkpoint(KEY) is True
    for name in ("config.yaml", "src.model", "best.pt", "state.pt"):
        assert (node_b.run_dir(KEY) / "checkpoint" / name).read_bytes() == (node_a.run_dir(KEY) / "checkpoint" / name).read_bytes()
    assert node_b.resume_point(KEY) is not None
    assert mirror_b.pull_records() == []
    assert node_b.history(KEY) == node_a.history(KEY) and [e["epoch"] for e in node_b.history(KEY)] == [1, 2, 3, 4]
    assert node_b.identity(KEY)["label"] == "GRU"


def test_a_finished_trial_counts_once_its_marker_is_up_and_only_the_first_result_stays(remote, tmp_path):
    node_a = TrialStore(tmp_path / "a" / "ray" / "s")
    trained_epochs(node_a, 2)
    (node_a.run_dir(KEY) / "test.hyp").write_text("ein Hund\n")
    node_a.finish(KEY, {"test_bleu": 31.5, "status": "ok"})
    mirror_a = StoreMirror(remote, "ray/s", node_a.experiment)
    mirror_a.push_records(KEY)

    # an upload cut short before its marker: the files are up, the trial is not finished
    for name in ("best.pt", "state.pt", "test.hyp"):
        remote.write(f"ray/s/finished/{KEY}/{name}", (node_a.finished_dir(KEY) / name).read_bytes())
    driver = TrialStore(tmp_path / "driver" / "ray" / "s")
    assert StoreMirror(remote, "ray/s", driver.experiment).pull_records() == []
    assert driver.finished_metrics(KEY) is None and driver.identity(KEY)["seed"] == 1

    assert mirror_a.push_finished(KEY) is True
    assert StoreMirror(remote, "ray/s", driver.experiment).pull_records() == [KEY]
    assert driver.finished_metrics(KEY)["test_bleu"] == 31.5
    assert (driver.finished_dir(KEY) / "test.hyp").read_text() == "ein Hund\n"

    # a second attempt of the same trial (a worker that outlived its driver) finishes too: the first result stays
    node_b = TrialStore(tmp_path / "b" / "ray" / "s")
    trained_epochs(node_b, 2)
    node_b.finish(KEY, {"test_bleu": 99.0, "status": "ok"})
    assert StoreMirror(remote, "ray/s", node_b.experiment).push_finished(KEY) is False
    assert json.loads(remote.read(f"ray/s/finished/{KEY}/metrics.json"))["test_bleu"] == 31.5


def finished_in_store(remote, tmp_path) -> TrialStore:
    """KEY finished on node a and in the store (with its translations)."""
    node_a = TrialStore(tmp_path / "a" / "ray" / "s")
    trained_epochs(node_a, 2)
    (node_a.run_dir(KEY) / "test.hyp").write_text("a b\n")
    node_a.finish(KEY, {"status": "ok", "epochs": 2, "test_bleu": 12.5})
    mirror = StoreMirror(remote, "ray/s", node_a.experiment)
    mirror.push_records(KEY)
    mirror.push_finished(KEY)
    return node_a


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
@pytest.mark.parametrize("name", [f"trials/{KEY}/progress.json", f"finished/{KEY}/metrics.json"])
def test_a_damaged_record_is_one_line_naming_the_object_and_nothing_comes_down(remote, tmp_path, damage, name):
    finished_in_store(remote, tmp_path)
    original = remote.read(f"ray/s/{name}")
    remote.write(f"ray/s/{name}", b"\x00\xff garbage" if damage == "garbage" else original[: len(original) // 2])
    node_b = TrialStore(tmp_path / "b" / "ray" / "s")
    with pytest.raises(StorageError) as refused:
        StoreMirror(remote, "ray/s", node_b.experiment).pull_records()
    assert str(refused.value).startswith(f"{remote.where(f'ray/s/{name}')}: not valid JSON (damaged or cut short)")
    assert "\n" not in str(refused.value) and "delete that object" in str(refused.value)
    assert not node_b.experiment.exists()  # checked whole before anything was written
    remote.write(f"ray/s/{name}", original)  # nothing else was lost: mended, it comes down whole
    assert StoreMirror(remote, "ray/s", node_b.experiment).pull_records() == [KEY]


@pytest.mark.parametrize("name, record, problem", [
    (f"trials/{KEY}/progress.json", b'{"epoch": 1, "valid_bleu": "high"}', "'valid_bleu'"),
    (f"trials/{KEY}/trial.json", b'{"key": "../../x"}', "trial.json"),
    (f"finished/{KEY}/metrics.json", b'{"test_bleu": 1e999, "status": "ok"}', "'test_bleu'")])
def test_a_valid_json_that_is_no_valid_record_is_refused_before_anything_comes_down(remote, tmp_path, name, record,
                                                                                     problem):
    finished_in_store(remote, tmp_path)
    remote.write(f"ray/s/{name}", record)
    node_b = TrialStore(tmp_path / "b" / "ray" / "s")
    with pytest.raises(UserError) as refused:
        StoreMirror(remote, "ray/s", node_b.experiment).pull_records()
    line = str(refused.value)
    assert line.startswith(remote.where(f"ray/s/{name}")) and problem in line and "\n" not in line, line
    assert not node_b.experiment.exists()  # checked whole before anything was written


def test_translations_missing_beside_a_marker_are_one_line_and_a_trial_without_a_test_needs_none(remote, tmp_path):
    finished_in_store(remote, tmp_path)
    remote.delete(f"ray/s/finished/{KEY}/test.hyp")
    node_b = TrialStore(tmp_path / "b" / "ray" / "s")
    with pytest.raises(StorageError, match=rf"finished/{KEY}/test.hyp: missing beside its trial's marker metrics.json; "
                                           rf"delete .*finished/{KEY}/metrics.json and run the study with --resume"):
        StoreMirror(remote, "ray/s", node_b.experiment).pull_records()
    assert not node_b.experiment.exists()
    remote.write(f"ray/s/finished/{KEY}/metrics.json", json.dumps({"status": "diverged", "epochs": 1}).encode())
    assert StoreMirror(remote, "ray/s", node_b.experiment).pull_records() == [KEY]  # it never translated the test set
    assert node_b.finished_metrics(KEY)["status"] == "diverged"


def test_a_study_of_a_longer_name_is_not_listed_with_it(remote, tmp_path):
    finished_in_store(remote, tmp_path)
    remote.write("ray/s2/trials/x/trial.json", b"{}")
    assert sorted(remote.keys("ray/s")) == sorted(key for key in remote.keys("ray") if key.startswith("ray/s/"))


def optuna_study_with(database, trials: int):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    search = optuna.create_study(study_name="s", storage=f"sqlite:///{database}", load_if_exists=True)
    for _ in range(trials):
        search.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=1)
    return search


def test_a_search_keeps_its_optuna_study_through_the_store(tmp_path):
    import optuna

    remote = DirectoryStore(tmp_path / "bucket")
    optuna_study_with(tmp_path / "a.db", 2)
    optuna.create_study(study_name="other", storage=f"sqlite:///{tmp_path / 'a.db'}")
    push_search(remote, "s", tmp_path / "a.db")  # the file holds another study too
    pull_search(remote, "s", tmp_path / "b.db")  # a new machine: the study comes down, and only it
    assert optuna.get_all_study_names(f"sqlite:///{tmp_path / 'b.db'}") == ["s"]
    pulled = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'b.db'}")
    assert [t.params for t in pulled.trials] == [t.params for t in optuna_study_with(tmp_path / "a.db", 0).trials]
    optuna_study_with(tmp_path / "b.db", 1)  # this machine went further than the store: its own copy stays
    pull_search(remote, "s", tmp_path / "b.db")
    assert len(optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'b.db'}").trials) == 3
    optuna_study_with(tmp_path / "a.db", 2)  # the store went further: its copy replaces the older local one
    push_search(remote, "s", tmp_path / "a.db")
    pull_search(remote, "s", tmp_path / "b.db")
    assert len(optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'b.db'}").trials) == 4
    remote.write("ray/s/optuna.db", (tmp_path / "a.db").read_bytes()[:1000])
    with pytest.raises(StorageError, match=r"ray/s/optuna.db: not the Optuna study s \(damaged or cut short\)"):
        pull_search(remote, "s", tmp_path / "c.db")


def test_a_study_run_here_first_puts_its_finished_trials_up_when_it_moves_to_a_store(remote, tmp_path):
    from study.store.remote_study import mirrored_study

    here = TrialStore(tmp_path / "results" / "ray" / "s")  # finished without --storage
    trained_epochs(here, 2)
    (here.run_dir(KEY) / "test.hyp").write_text("ein Hund\n")
    here.finish(KEY, {"status": "ok", "epochs": 2, "test_bleu": 31.5})
    said = []
    with mirrored_study(remote.uri, "s", tmp_path / "results" / "s", here.experiment, said.append):
        assert json.loads(remote.read(f"ray/s/finished/{KEY}/metrics.json"))["test_bleu"] == 31.5  # at once
    assert f"storage: {remote.uri}: put up 1 trial(s) of s that finished here before" in said
    elsewhere = TrialStore(tmp_path / "elsewhere" / "ray" / "s")  # a reader with an empty directory
    assert StoreMirror(remote, "ray/s", elsewhere.experiment).pull_records() == [KEY]
    assert (elsewhere.finished_dir(KEY) / "test.hyp").read_text() == "ein Hund\n"
    with mirrored_study(remote.uri, "s", tmp_path / "results" / "s", here.experiment, said.append):
        pass
    assert sum("put up" in line for line in said) == 1  # once up, never again


def test_a_trial_that_failed_before_it_recorded_itself_lists_as_failed(tmp_path):
    """Its store unreachable on its first step (a bucket deleted mid-run): the driver's verdict records who it
    was, so the listing and the tables show a failed trial, not one never started."""
    from types import SimpleNamespace

    from study.execution.callbacks import VerdictCallback
    from study.execution.disk_watch import StorageStopper
    from study.store.records import trial_record

    store = TrialStore(tmp_path / "ray" / "s")
    store.experiment.mkdir(parents=True)
    config = {"trial": {"key": KEY, "label": "GRU", "row": 0, "seed": 2, "config": {"model": {"cell": "gru"}}}}
    trial = SimpleNamespace(config=config, error_msg="StorageError: s3://lab: the bucket does not exist",
                            get_error=lambda: "Traceback ...\nStorageError: s3://lab: the bucket does not exist")
    VerdictCallback(store, StorageStopper(store.experiment)).on_trial_error(0, [], trial)
    record = trial_record(store, KEY)
    assert record["status"] == "failed" and record["label"] == "GRU" and record["seed"] == 2
    assert "the bucket does not exist" in record["error"]


def test_a_lease_lost_while_the_tables_are_written_puts_nothing_up_and_says_how_to_resume(tmp_path):
    import time

    from study.store.remote_study import mirrored_study

    remote = DirectoryStore(tmp_path / "bucket")
    study_dir = tmp_path / "results" / "s"
    again = "python -m study.run s --storage x --resume"
    with pytest.raises(StorageError) as lost:
        with mirrored_study(remote.uri, "s", study_dir, tmp_path / "results" / "ray" / "s", print, lease_seconds=3,
                            again=again) as keeper:
            study_dir.mkdir(parents=True)
            (study_dir / "table.md").write_text("| a |\n")  # the trials ended, the tables are written
            remote.write("ray/s/driver.lease", json.dumps({"owner": "elsewhere:1", "seconds": 600}).encode())
            deadline = time.monotonic() + 10
            while keeper.lost is None and time.monotonic() < deadline:  # the next renewal, a second later, finds it
                time.sleep(0.05)
    assert str(lost.value) == (f"{remote.uri}/ray/s/driver.lease: the lease was taken over by another driver, which "
                               f"runs the study now; the exports were not put up: make sure no other driver runs the "
                               f"study, then resume with: {again}")
    assert remote.read("s/table.md") is None  # nothing put up
    assert json.loads(remote.read("ray/s/driver.lease"))["owner"] == "elsewhere:1"  # the new holder's, untouched
