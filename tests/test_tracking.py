"""MLflow tracking of a study's trials: epochs replayed after a restart are not logged twice."""

from __future__ import annotations

import pickle

from study.tracking import StudyTracker, default_tracking_uri
from study_helpers import free_port


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
