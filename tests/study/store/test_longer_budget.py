"""--extend with a larger budget: trials the old budget stopped continue from their final
checkpoints to the result a trial with the larger budget from the start gets; the others stay.

Modules covered here: ``study.store.resume_checks``."""

from __future__ import annotations

import pytest
from study_helpers import grid_study, mlflow_runs, study, table_rows

from nmt.numerics import PINNING
from study.spec.expansion import expand
from study.spec.loading import load_study
from study.store.longer_budget import budget_raised, continue_under_new_budget, extension_outcome, without_budget
from study.store.migration import adopt_stored_trials
from study.store.trial_store import TrialStore

TWO_UNITS = "  - {label: GRU, set: {}}\n  - {label: tanh, set: {model.cell: rnn}}"


def _metrics(results, name):
    store = TrialStore(results / "ray" / name)
    return {store.identity(key)["label"]: store.finished_metrics(key) for key in store.keys()}


@pytest.mark.slow
def test_a_raised_epoch_budget_continues_capped_trials_to_the_result_of_a_longer_run(tmp_path, cluster_env):
    path = tmp_path / "grow.yaml"
    path.write_text(grid_study("grow", TWO_UNITS, epochs=1))
    results, longer = tmp_path / "results", tmp_path / "longer"
    first = study(str(path), "--cpus", "2", "--results", str(results), env=cluster_env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    extended = study(str(path), "--extend", "--set", "budget.epochs=2", "--cpus", "2", "--results", str(results),
                     env=cluster_env)
    assert extended.returncode == 0, extended.stdout[-3000:] + extended.stderr[-3000:]
    assert "larger budget: 2 stored trial(s) continue - 2 reopened from their final checkpoints" in extended.stdout
    fresh = study(str(path), "--set", "budget.epochs=2", "--cpus", "2", "--results", str(longer), env=cluster_env)
    assert fresh.returncode == 0, fresh.stdout[-3000:] + fresh.stderr[-3000:]

    continued, from_start = _metrics(results, "grow"), _metrics(longer, "grow")
    for label in ("GRU", "tanh"):
        assert continued[label]["epochs"] == 2 and continued[label]["resumes"] == 1
        for key in ("valid_bleu", "valid_ppl", "test_bleu", "test_chrf", "best_epoch", "steps", "train_tokens"):
            assert continued[label][key] == from_start[label][key], (label, key)
    assert [r["epochs_max"] for r in table_rows(results, "grow")] == ["2.0", "2.0"]
    store = TrialStore(results / "ray" / "grow")
    assert len(store.keys()) == 2 and not list((results / "ray" / "grow" / "finished").glob("*.reopened"))
    assert all(store.identity(key)["config"]["train"]["max_epochs"] == 2 for key in store.keys())
    # MLflow: one live run per trial, under its new key, with both epochs; the 1-epoch runs are retired
    client, _, children = mlflow_runs(results, "grow")
    assert sorted(c.data.tags["trial_key"] for c in children) == sorted(store.keys())
    assert all(c.data.params["train.max_epochs"] == "2" for c in children)
    assert all(len(client.get_metric_history(c.info.run_id, "valid_bleu")) == 2 for c in children)
    from mlflow.entities import ViewType

    retired = client.search_runs([children[0].info.experiment_id], "tags.superseded_by != ''",
                                 run_view_type=ViewType.DELETED_ONLY)
    assert sorted(r.data.tags["superseded_by"] for r in retired) == sorted(store.keys())


def _finished_trial(store: TrialStore, trial, stop_reason: str, checkpoint: bool = True, epochs: int = 3) -> None:
    store.start(trial.key, {"key": trial.key, "label": trial.label, "row": trial.row, "seed": trial.seed,
                            "config": trial.config})
    run = store.run_dir(trial.key) / "checkpoint"
    run.mkdir(parents=True)
    if checkpoint:
        (run / "state.pt").write_bytes(b"state after the last epoch")
        (run / "best.pt").write_bytes(b"best")
    (store.run_dir(trial.key) / "test.hyp").write_text("a hyp\n")
    store.finish(trial.key, {"status": "ok", "stop_reason": stop_reason, "test_bleu": 1.0, "epochs": float(epochs),
                             "numerics": "portable", "pinning": PINNING})


@pytest.mark.parametrize("stop_reason, checkpoint, outcome", [
    ("early stopping", True, "kept"), ("max epochs", True, "reopened"), ("max epochs", False, "restarted")])
def test_each_stored_trial_continues_as_its_stop_reason_says(tmp_path, stop_reason, checkpoint, outcome):
    old = expand(load_study("cells", ["seeds=1", "budget.epochs=3", "budget.min_epochs=0"]))[0]
    new = expand(load_study("cells", ["seeds=1", "budget.epochs=5", "budget.min_epochs=0"]))[0]
    assert old.key != new.key and without_budget(old.config) == without_budget(new.config)
    store = TrialStore(tmp_path)
    _finished_trial(store, old, stop_reason, checkpoint)
    assert continue_under_new_budget(store, old.key, new) == outcome
    assert not store.trial_dir(old.key).exists() and not store.finished_dir(old.key).exists()
    assert store.identity(new.key)["config"]["train"]["max_epochs"] == 5
    if outcome == "kept":
        assert store.finished_metrics(new.key)["stop_reason"] == "early stopping"
        return
    assert store.finished_metrics(new.key) is None and not store.finished_dir(new.key).exists()
    if outcome == "reopened":  # the trial resumes from the state after its last epoch
        assert store.resume_point(new.key) is not None
        assert (store.resume_point(new.key) / "state.pt").read_bytes() == b"state after the last epoch"
        assert not (store.resume_point(new.key) / "metrics.json").exists()
    else:
        assert store.resume_point(new.key) is None


@pytest.mark.parametrize("stop_reason, epochs, checkpoint, outcome", [
    ("early stopping", 6, True, "kept"), ("early stopping", 9, True, "kept"), ("early stopping", 5, True, "reopened"),
    ("early stopping", 5, False, "restarted"), ("max epochs", 10, True, "kept"), (None, 4, True, "continued")])
def test_a_later_min_epochs_keeps_the_trials_it_would_not_change(tmp_path, stop_reason, epochs, checkpoint, outcome):
    """Held back until epoch 6, a trial early stopping ended at epoch 6 or later trains as it did;
    one it ended at 5 continues from its final checkpoint (nmt takes the step the stop skipped,
    tests/nmt/test_train.py) or, without one, trains again from the start; the epoch budget, not
    raised, stays as it stopped."""
    settings = ["seeds=1", "budget.epochs=10", "budget.patience=2", "budget.stop=patience", "budget.min_epochs=0"]
    old = expand(load_study("cells", settings))[0]
    new = expand(load_study("cells", [*settings, "budget.min_epochs=6"]))[0]
    assert old.key != new.key and without_budget(old.config) == without_budget(new.config)
    assert budget_raised(old.config, new.config)
    store = TrialStore(tmp_path)
    if stop_reason:
        _finished_trial(store, old, stop_reason, checkpoint, epochs=epochs)
    else:  # unfinished: nothing has stopped it, so it continues from its checkpoint
        store.start(old.key, {"key": old.key, "label": old.label, "row": old.row, "seed": old.seed,
                              "config": old.config})
        (store.run_dir(old.key) / "checkpoint").mkdir(parents=True)
        (store.run_dir(old.key) / "checkpoint" / "state.pt").write_bytes(b"epoch 4")
    assert extension_outcome(store, old.key, new.config["train"]) == outcome
    assert continue_under_new_budget(store, old.key, new) == outcome
    assert store.identity(new.key)["config"]["train"]["min_epochs"] == 6
    if outcome == "kept":
        assert store.finished_metrics(new.key)["epochs"] == epochs
    elif outcome == "restarted":
        assert store.finished_metrics(new.key) is None and store.resume_point(new.key) is None
    elif outcome == "reopened":
        assert store.finished_metrics(new.key) is None
        assert (store.resume_point(new.key) / "state.pt").read_bytes() == b"state after the last epoch"
    else:
        assert store.finished_metrics(new.key) is None
        assert (store.resume_point(new.key) / "state.pt").read_bytes() == b"epoch 4"


def test_only_more_epochs_let_a_trial_continue():
    config = {"model": {}, "train": {"max_epochs": 10, "max_steps": None, "max_tokens": None, "patience": 3}}

    def train(**changes):
        return {"model": {}, "train": {**config["train"], **changes}}

    assert budget_raised(config, train(max_epochs=20)) and budget_raised(config, train(max_epochs=None))
    assert not budget_raised(config, config) and not budget_raised(config, train(max_epochs=5))
    # a step or token cap can stop a trial inside an epoch, where a longer run never stops
    assert without_budget(config) != without_budget(train(max_steps=100, max_epochs=20))
    assert without_budget(config) != without_budget(train(patience=4))  # patience is not a cap: no continuing
    # a later first epoch for early stopping keeps or retrains; an earlier one would change finished trials
    assert budget_raised(config, train(min_epochs=5)) and budget_raised(train(min_epochs=5), train(min_epochs=8))
    assert not budget_raised(train(min_epochs=5), config) and not budget_raised(train(min_epochs=5),
                                                                                 train(min_epochs=3, max_epochs=20))


def test_extend_refuses_a_smaller_budget():
    from nmt.errors import UserError
    from study.store.resume_checks import check_extension_changes

    spec = load_study("cells", ["budget.epochs=5", "budget.min_epochs=0"])
    state = {"spec": {"budget": {"epochs": 12}}}
    with pytest.raises(UserError, match="budget.epochs: 12 -> 5"):
        check_extension_changes(spec, state, ["budget.epochs: 12 -> 5"])
    check_extension_changes(load_study("cells", ["budget.epochs=20"]), state, ["budget.epochs: 12 -> 20"])
    with pytest.raises(UserError, match="budget.patience"):
        check_extension_changes(spec, state, ["budget.patience: 0 -> 3"])
    later = load_study("cells", ["budget.epochs=12", "budget.min_epochs=6"])
    check_extension_changes(later, state, ["budget.min_epochs: None -> 6"])
    with pytest.raises(UserError, match="budget.min_epochs: 6 -> 4"):
        check_extension_changes(load_study("cells", ["budget.epochs=12", "budget.min_epochs=4"]),
                                {"spec": {"budget": {"epochs": 12, "min_epochs": 6}}}, ["budget.min_epochs: 6 -> 4"])
    with pytest.raises(UserError, match="budget.steps"):
        check_extension_changes(load_study("cells", ["budget.steps=100"]), state, ["budget.steps: None -> 100"])
    asha = load_study("cells", ["budget.epochs=20", "scheduler={type: asha, grace_period: 1, reduction_factor: 2}"])
    with pytest.raises(UserError, match="ASHA"):
        check_extension_changes(asha, state, ["budget.epochs: 12 -> 20"])


def test_a_reopen_cut_short_is_taken_up_by_the_next_run(tmp_path, monkeypatch):
    old = expand(load_study("cells", ["seeds=1", "budget.epochs=3", "budget.min_epochs=0"]))[0]
    new = expand(load_study("cells", ["seeds=1", "budget.epochs=5", "budget.min_epochs=0"]))[0]
    store = TrialStore(tmp_path)
    _finished_trial(store, old, "max epochs")

    def killed(*_):
        raise KeyboardInterrupt  # the driver dies after the old key's files changed, before the move

    with monkeypatch.context() as patch:
        patch.setattr(TrialStore, "rekey", killed)
        with pytest.raises(KeyboardInterrupt):
            continue_under_new_budget(store, old.key, new)
    assert store.finished_metrics(old.key) is None and store.resume_point(old.key) is not None
    lines = []
    assert adopt_stored_trials(store, [new], log=lines.append) == {old.key: new.key}
    assert lines == ["larger budget: 1 stored trial(s) continue - 1 continuing from their own checkpoints "
                     "(unfinished)"]
    assert (store.resume_point(new.key) / "state.pt").read_bytes() == b"state after the last epoch"
    assert store.keys() == [new.key] and store.finished_metrics(new.key) is None


def test_a_rekey_cut_short_after_the_finished_result_moved_is_adopted_again(tmp_path):
    trial = expand(load_study("cells", ["seeds=1"]))[0]
    store = TrialStore(tmp_path)
    _finished_trial(store, trial, "early stopping")
    store.finished_dir(trial.key).replace(store.finished_dir("oldkey0000"))  # as an older key scheme left it
    store.trial_dir(trial.key).replace(store.trial_dir("oldkey0000"))
    store.finished_dir("oldkey0000").replace(store.finished_dir(trial.key))  # a rekey moves the result first...
    assert adopt_stored_trials(store, [trial], log=lambda _: None) == {"oldkey0000": trial.key}  # ...and is finished
    assert store.keys() == [trial.key] and store.finished_metrics(trial.key)["stop_reason"] == "early stopping"


def test_an_extension_refused_for_a_dropped_seed_moves_no_stored_trial(tmp_path):
    from nmt.errors import UserError
    from study.store.migration import plan_adoption
    from study.store.resume_checks import check_extension

    old = expand(load_study("cells", ["seeds=2", "budget.epochs=3", "budget.min_epochs=0"]))
    store = TrialStore(tmp_path)
    for trial in old[:2]:  # LSTM seeds 1 and 2, stopped by their epochs
        _finished_trial(store, trial, "max epochs")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    spec = load_study("cells", ["seeds=1", "budget.epochs=5", "budget.min_epochs=0"])  # more epochs, but seed 2 dropped
    trials = expand(spec)
    plan = plan_adoption(store, trials)
    assert [move.trial.key for move in plan] == [trials[0].key]
    with pytest.raises(UserError, match="LSTM seed 2"):
        check_extension(spec, trials, tmp_path, plan)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_an_extension_that_drops_a_stored_trial_is_refused_before_ray_starts(tmp_path, cache_dir, capsys,
                                                                             monkeypatch):
    from nmt.cli import run_main
    from study.store.study_state import write_state
    from study.run import main
    from study.spec.loading import load_study, spec_to_dict
    from study.spec.portable import portable_tree
    from study.store.records import experiment_dir

    path, results = tmp_path / "drop.yaml", tmp_path / "results"
    path.write_text(grid_study("drop", TWO_UNITS, seeds=2, epochs=1))
    spec = load_study(str(path))
    write_state(results / "drop", {"study": "drop", "status": "complete", "request": spec.tree,
                                   "portable_request": portable_tree(spec.tree), "spec": spec_to_dict(spec)})
    store = TrialStore(experiment_dir(results, "drop"))
    for trial in expand(spec):
        _finished_trial(store, trial, "max epochs")
    def files():  # (the study's lock file comes and goes, so directories' times change)
        return {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}

    before = files()
    ray_starts = []
    monkeypatch.setattr("study.execution.ray_setup.start_ray", ray_starts.append)
    code = run_main(main, [str(path), "--extend", "--seeds", "1", "--set", "budget.epochs=2",
                           "--results", str(results), "--cpus", "2"])
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(error) == 1
    assert "2 stored trial(s) are no longer in the study (GRU seed 2, tanh seed 2)" in error[0]
    assert not ray_starts  # refused as bad input, before Ray starts
    assert files() == before  # nothing moved or written
