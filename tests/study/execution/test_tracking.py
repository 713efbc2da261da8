"""MLflow tracking of a study's trials: epochs replayed after a restart are not logged twice."""

from __future__ import annotations

import pickle
import time

from study_helpers import free_port

from study.execution.tracking import StudyTracker, default_tracking_uri


def _history(tracker: StudyTracker, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in tracker.client.get_metric_history(run_id, key))


def _tracker_with_trial(tmp_path):
    tracker = StudyTracker(default_tracking_uri(tmp_path), "replay")
    tracker.connect()
    tracker.start_parent("fingerprint", {"study": "replay"})
    return tracker, tracker.child("k1", "GRU", 1, {"model": {"cell": "gru"}})


def test_epoch_trained_again_in_the_same_driver_keeps_one_value_per_step(tmp_path):
    tracker, run_id = _tracker_with_trial(tmp_path)
    for step in (1, 2, 3):
        tracker.log_epoch(run_id, {"valid_bleu": 10.0 * step, "elapsed_s": float(step)}, step)
    # a worker killed after epoch 3 is retried from its epoch-2 checkpoint and reports epoch 3 again
    for step in (3, 4):
        tracker.log_epoch(run_id, {"valid_bleu": 10.0 * step + 1, "elapsed_s": float(step) + 0.5}, step)
    assert _history(tracker, run_id, "valid_bleu") == [(1, 10.0), (2, 20.0), (3, 30.0), (4, 41.0)]
    assert [s for s, _ in _history(tracker, run_id, "elapsed_s")] == [1, 2, 3, 4]
    assert tracker.failures == 0


def test_resumed_driver_reads_what_the_killed_one_logged(tmp_path):
    tracker, run_id = _tracker_with_trial(tmp_path)
    # Ray pickles the tracker with its callbacks before epoch 2 is logged; the driver then dies
    state = pickle.dumps(tracker)
    for step in (1, 2):
        tracker.log_epoch(run_id, {"valid_bleu": float(step)}, step)

    resumed = pickle.loads(state)
    assert resumed.child("k1", "GRU", 1, {"model": {"cell": "gru"}}) == run_id
    for step in (2, 3):  # the trial restarts from its epoch-1 checkpoint
        resumed.log_epoch(run_id, {"valid_bleu": float(step) + 0.5, "train_loss": 1.0 / step}, step)
    assert _history(resumed, run_id, "valid_bleu") == [(1, 1.0), (2, 2.0), (3, 3.5)]
    # a metric the killed driver never logged is logged from the first step it arrives
    assert _history(resumed, run_id, "train_loss") == [(2, 0.5), (3, 1.0 / 3)]
    assert resumed.failures == 0


def test_lost_epoch_is_logged_when_it_comes_again(tmp_path, monkeypatch):
    tracker, run_id = _tracker_with_trial(tmp_path)
    tracker.log_epoch(run_id, {"valid_bleu": 1.0}, 1)
    store = tracker.uri
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    tracker.uri, tracker._client = f"http://127.0.0.1:{free_port()}", None  # no server there while epoch 2 arrives
    tracker.log_epoch(run_id, {"valid_bleu": 2.0}, 2)
    assert tracker.failures == 1
    tracker.uri, tracker._client = store, None
    tracker.log_epoch(run_id, {"valid_bleu": 2.5}, 2)  # replayed after a restart: nothing of it in the store
    assert _history(tracker, run_id, "valid_bleu") == [(1, 1.0), (2, 2.5)]


RECORD = {"key": "k1", "label": "GRU 2L", "seed": 1, "status": "ok", "config": {},
          "metrics": {"test_bleu": 21.5, "test_chrf": 48.0, "epochs": 6.0, "best_epoch": 4.0, "params": 1234.0,
                      "weight_matrices": 3.0, "train_seconds": 80.0, "decode_words_per_s": 900.0, "valid_bleu": 19.0,
                      "train_tokens_per_s": 5000.0, "steps": 600.0, "decode_beam": 4.0, "threads": 1.0,
                      "stop_reason": "early stop (patience 2)", "device": "cpu", "final": 1.0, "seed": 1.0},
          "history": [{"epoch": e, "valid_bleu": 15.0 + e, "best_epoch": float(min(e, 4)), "train_loss": 3.0 - 0.1 * e}
                      for e in range(1, 7)]}


def test_a_child_run_says_what_it_varies_and_logs_curves_per_epoch_and_results_once(tmp_path):
    tracker = StudyTracker(default_tracking_uri(tmp_path), "runs", description="GRU and ATR at two depths",
                           varied=["model.cell", "model.enc_layers"], run_tags={"smoke": "true", "git_commit": "abc"})
    tracker.connect()
    tracker.start_parent("fingerprint", {"command": "python -m study.run runs"})
    config = {"model": {"cell": "gru", "enc_layers": 2, "atr": {"gates": None}}, "train": {"lr": 0.001}}
    run_id = tracker.child("k1", "GRU 2L", 1, config)
    tracker.reconcile([{**RECORD, "config": config}])
    run = tracker.client.get_run(run_id)
    tags, metrics = run.data.tags, run.data.metrics
    assert tags["varied"] == "model.cell=gru, model.enc_layers=2" and "model.cell=gru" in tags["mlflow.note.content"]
    assert tags["smoke"] == "true" and tags["git_commit"] == "abc" and tags["label"] == "GRU 2L"
    # one-off facts are tags, written as in the table; the trial's identity is not repeated
    assert tags["decode_beam"] == "4" and tags["stop_reason"] == "early stop (patience 2)" and tags["device"] == "cpu"
    assert "final" not in tags and "final" not in metrics and "seed" not in metrics
    # a parameter the trial leaves unset is not logged as "None"
    assert run.data.params == {"model.cell": "gru", "model.enc_layers": "2", "train.lr": "0.001"}
    # results once (bar charts across runs); curves per epoch, never a stray final point on them
    for key in ("test_bleu", "test_chrf", "epochs", "best_epoch", "params", "decode_words_per_s"):
        assert len(tracker.client.get_metric_history(run_id, key)) == 1, key
    assert _history(tracker, run_id, "valid_bleu") == [(e, 15.0 + e) for e in range(1, 7)]
    assert metrics["best_epoch"] == 4.0 and "decode_beam" not in metrics and "threads" not in metrics
    assert run.info.status == "FINISHED" and tags["status"] == "ok"
    experiment = tracker.client.get_experiment(tracker.experiment_id)
    assert experiment.tags["mlflow.note.content"] == "GRU and ATR at two depths"


def test_the_parent_run_carries_the_table_per_row_and_whole(tmp_path):
    import json

    import pandas as pd

    tracker = StudyTracker(default_tracking_uri(tmp_path), "rows", artifact_root=tmp_path / "artifacts")
    tracker.connect()
    parent = tracker.start_parent("fingerprint", {})
    rows = pd.DataFrame({"label": ["SR-NMT 4L", "- LN, MA & highway", "no seed left"], "bleu_mean": [28.5, 25.25, None],
                         "bleu_std": [0.5, 0.25, None], "delta": [0.0, -3.25, None], "n": [3, 3, 0]})
    tracker.log_study_table(rows)
    tracker.log_study_table(rows)  # a resumed or extended study logs its table again: replaced, not appended
    metrics = tracker.client.get_run(parent).data.metrics
    assert metrics == {"bleu/SR-NMT 4L": 28.5, "bleu_std/SR-NMT 4L": 0.5, "delta/SR-NMT 4L": 0.0,
                       "bleu/- LN MA highway": 25.25, "bleu_std/- LN MA highway": 0.25, "delta/- LN MA highway": -3.25}
    path = tracker.client.download_artifacts(parent, "table.json", str(tmp_path / "download"))
    logged = json.loads(open(path).read())
    assert logged["columns"][:2] == ["label", "bleu_mean"] and [r[0] for r in logged["data"]] == list(rows["label"])
    assert logged["data"][2][1] is None  # no finished seed: empty, not NaN
    assert tracker.failures == 0


def test_runs_of_trials_that_moved_to_new_keys_are_retired_by_any_later_driver(tmp_path):
    from mlflow.entities import ViewType

    tracker = StudyTracker(default_tracking_uri(tmp_path), "moved")
    tracker.connect()
    tracker.start_parent("fingerprint", {})
    old_gru = tracker.child("old-gru", "GRU", 1, {"model": {"cell": "gru"}})
    new_gru = tracker.child("new-gru", "GRU", 1, {"model": {"cell": "gru"}})
    atr = tracker.child("atr", "ATR", 1, {"model": {"cell": "atr"}})
    other_seed = tracker.child("gru-2", "GRU", 2, {"model": {"cell": "gru"}})
    kept = tracker.child("kept-here", "RAN", 1, {"model": {"cell": "ran"}})
    # the driver that moved GRU seed 1 to "new-gru" died before retiring its old run: the next
    # driver finds it by row and seed; runs under their current keys, and rows not given, stay,
    # as does the run of a trial still stored under its old key (one adoption left where it was)
    current = {("GRU", "1"): "new-gru", ("ATR", "1"): "atr", ("RAN", "1"): "ran-new"}
    stored = {"new-gru", "atr", "gru-2", "kept-here"}
    assert tracker.supersede_children(current, stored) == 1
    assert tracker.supersede_children(current, stored) == 0  # nothing left to retire
    deleted = tracker.client.search_runs([tracker.experiment_id], "", run_view_type=ViewType.DELETED_ONLY)
    assert [(r.info.run_id, r.data.tags["superseded_by"]) for r in deleted] == [(old_gru, "new-gru")]
    active = {r.info.run_id for r in tracker.client.search_runs([tracker.experiment_id], "tags.trial_key != ''")}
    assert active == {new_gru, atr, other_seed, kept}


def test_runs_belong_to_a_results_directory_not_to_a_study_name(tmp_path):
    """Two results directories' drivers of a study of the same name on one tracking store: a
    starting driver closes only its own directory's runs left RUNNING (and an older version's,
    untagged), or those of its own parent run (a results directory that moved)."""
    uri = default_tracking_uri(tmp_path)

    def driver(results: str, parent: str | None = None) -> StudyTracker:
        tracker = StudyTracker(uri, "shared", run_tags={"results_dir": results})
        tracker.connect()
        tracker.start_parent("fingerprint", {}, parent_id=parent)
        return tracker

    a = driver("/lab/a")
    a_child = a.child("k1", "GRU", 1, {"model": {"cell": "gru"}})
    untagged = a.client.create_run(a.experiment_id, tags={"study": "shared"}).info.run_id  # an older version's
    b = StudyTracker(uri, "shared", run_tags={"results_dir": "/lab/b"})
    b.connect()
    assert b.close_stale_runs() == 1  # the untagged run only: /lab/a's driver is alive
    status = {run_id: b.client.get_run(run_id).info.status for run_id in (a.parent_id, a_child, untagged)}
    assert status == {a.parent_id: "RUNNING", a_child: "RUNNING", untagged: "KILLED"}
    moved = StudyTracker(uri, "shared", run_tags={"results_dir": "/new/place/of/a"})
    moved.connect()
    assert moved.close_stale_runs(a.parent_id) == 2  # /lab/a copied elsewhere: its parent and child are its own


def test_a_parent_run_deleted_in_the_ui_takes_its_children_with_it_on_resume(tmp_path):
    from mlflow.entities import ViewType

    tracker, child = _tracker_with_trial(tmp_path)
    old_parent = tracker.parent_id
    tracker.client.set_terminated(child, "KILLED")
    tracker.client.delete_run(old_parent)  # in the MLflow UI
    resumed = StudyTracker(default_tracking_uri(tmp_path), "replay")
    resumed.connect()
    new_parent = resumed.start_parent("fingerprint", {"study": "replay"}, parent_id=old_parent)
    assert new_parent != old_parent
    active = resumed.client.search_runs([resumed.experiment_id], "tags.trial_key != ''")
    assert active == []  # the new parent's children come from the trial store (reconcile)
    deleted = resumed.client.search_runs([resumed.experiment_id], "tags.trial_key != ''",
                                         run_view_type=ViewType.DELETED_ONLY)
    assert [(r.info.run_id, r.data.tags["superseded_by"]) for r in deleted] == [(child, new_parent)]


def test_an_epoch_backfilled_by_a_later_driver_keeps_the_time_its_trial_reported_it(tmp_path):
    from study.store.trial_store import REPORTED_AT

    tracker, run_id = _tracker_with_trial(tmp_path)
    reported = [1_700_000_000.5, 1_700_000_300.25]
    config = {"model": {"cell": "gru"}}
    record = {"key": "k1", "label": "GRU", "seed": 1, "status": "ok", "config": config, "metrics": {"test_bleu": 1.0},
              "history": [{"epoch": step, "valid_bleu": float(step), REPORTED_AT: at} for step, at in enumerate(reported, 1)]
              + [{"epoch": 3, "valid_bleu": 3.0}]}  # an epoch recorded before the time was kept: logged now
    before = time.time()
    tracker.reconcile([record])
    logged = sorted(tracker.client.get_metric_history(run_id, "valid_bleu"), key=lambda m: m.step)
    assert [m.timestamp for m in logged[:2]] == [int(at * 1000) for at in reported]
    assert logged[2].timestamp >= int(before * 1000)


def test_a_child_run_names_its_corpus_as_a_dataset_by_the_digest_of_its_content(tmp_path):
    tracker, _ = _tracker_with_trial(tmp_path)
    corpus = {}
    for folder in ("here", "there"):  # the same corpus at two paths is the same dataset
        (tmp_path / folder).mkdir()
        for name in ("train.en", "train.de"):
            (tmp_path / folder / name).write_text("a man rides a bike .\n", encoding="utf-8")
        corpus[folder] = {"train": [str(tmp_path / folder / "train.en"), str(tmp_path / folder / "train.de")],
                          "cache_dir": str(tmp_path / folder), "size": None}
    runs = [tracker.child(f"k{i}", "GRU", i, {"model": {"cell": "gru"}, "data": corpus[folder]})
            for i, folder in ((2, "here"), (3, "there"))]
    datasets = [tracker.client.get_run(run_id).inputs.dataset_inputs for run_id in runs]
    assert [len(inputs) for inputs in datasets] == [1, 1]
    (first,), (second,) = datasets
    assert first.dataset.digest == second.dataset.digest and first.dataset.name == "train.en + train.de"
    assert [(tag.key, tag.value) for tag in first.tags] == [("mlflow.data.context", "training")]
    (tmp_path / "there" / "train.de").write_text("a dog runs .\n", encoding="utf-8")  # another corpus, another digest
    other = tracker.child("k4", "GRU", 4, {"model": {"cell": "gru"}, "data": corpus["there"]})
    assert tracker.client.get_run(other).inputs.dataset_inputs[0].dataset.digest != first.dataset.digest


def test_log_models_adds_the_best_model_s_files_to_a_finished_trial_s_run(tmp_path):
    from study.store.records import MODEL_FILES

    files = []
    for name in MODEL_FILES[:3]:
        (tmp_path / name).write_bytes(b"weights" if name == "best.pt" else b"x")
        files.append(str(tmp_path / name))
    config = {"model": {"cell": "gru"}}
    for log_models, key in ((False, "k1"), (True, "k2")):
        tracker = StudyTracker(default_tracking_uri(tmp_path), "models", artifact_root=tmp_path / "artifacts",
                               log_models=log_models)
        tracker.connect()
        tracker.start_parent("fingerprint", {"study": "models"})
        run_id = tracker.child(key, "GRU", 1, config)
        tracker.reconcile([{**RECORD, "key": key, "config": config, "model": files}])
        logged = {item.path for item in tracker.client.list_artifacts(run_id, "model")}
        assert logged == ({f"model/{name}" for name in MODEL_FILES[:3]} if log_models else set())
