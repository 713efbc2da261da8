"""Trials stored by an older version (flat unit options, another key) are adopted under the
keys this version gives them, and only when their config is the same trial's."""

from __future__ import annotations

import copy

from nmt.fileio import write_json
from study.spec.expansion import expand
from study.spec.loading import load_study
from study.store.migration import adopt_stored_trials
from study.store.trial_store import TrialStore


def old_shape(config: dict) -> dict:
    """A config as versions before the unit registry wrote it: every unit option flat, null
    (or false) for the options the unit lacks, threads and device set by the runner."""
    old = copy.deepcopy(config)
    model = old["model"]
    for key, value in model.pop(model["cell"], {}).items():
        model[key] = value
    for key in ("gates", "forget_sign", "candidate", "ran_output", "memory", "order", "input_window",
                "memory_layers", "memory_lr_scale", "context_scale", "highway"):
        model.setdefault(key, None)
    model.setdefault("peephole", False)
    old["train"].update(threads=1, device="cpu")
    return old


def store_old_trial(store: TrialStore, key: str, trial, config: dict, finished: bool) -> None:
    write_json(store.trial_dir(key) / "trial.json", {"key": key, "label": trial.label, "row": trial.row,
                                                     "seed": trial.seed, "config": config, "params": {}})
    if finished:
        write_json(store.finished_dir(key) / "metrics.json", {"status": "ok", "test_bleu": 12.5})


def test_trials_of_the_old_key_scheme_move_to_their_new_keys(tmp_path):
    trials = expand(load_study("ablation_srnmt"))[:3]  # SR-NMT: the highway option moved under model.srnmt
    store = TrialStore(tmp_path)
    store_old_trial(store, "aaaaaaaaaaaa", trials[0], old_shape(trials[0].config), finished=True)
    store_old_trial(store, "bbbbbbbbbbbb", trials[1], old_shape(trials[1].config), finished=False)
    changed = old_shape(trials[2].config)
    changed["model"]["hidden"] += 2  # another model: never adopted
    store_old_trial(store, "cccccccccccc", trials[2], changed, finished=True)
    logged = []
    assert len(adopt_stored_trials(store, trials, log=logged.append)) == 2
    assert store.finished_metrics(trials[0].key)["test_bleu"] == 12.5
    assert store.identity(trials[0].key)["key"] == trials[0].key
    assert store.identity(trials[1].key) is not None and store.finished_metrics(trials[1].key) is None
    assert set(store.keys()) == {trials[0].key, trials[1].key, "cccccccccccc"}
    assert store.finished_metrics("cccccccccccc") is not None  # left where it was
    assert logged == ["adopted 2 trial(s) stored by an older version of the tool under their new keys"]
    assert adopt_stored_trials(store, trials) == {}  # nothing left to move
