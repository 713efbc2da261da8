"""--dry-run: the rows, trials, budget and a time estimate, with nothing trained or written.

Modules covered here: ``study.execution.study_data`` and ``study.execution.dry_run_driver``."""

from __future__ import annotations

from nmt.numerics import PINNING
from study.execution.dry_run import trial_seconds
from study.run import main
from study.spec.loading import load_study


def test_dry_run_lists_rows_and_estimates_without_training_or_writing(tmp_path, cache_dir, capsys):
    results = tmp_path / "results"
    assert main(["cells", "--smoke", "--dry-run", "--results", str(results), "--cpus", "2"]) == 0
    out = capsys.readouterr().out
    units = len(load_study("cells").fields.grid["model.cell"])
    assert (f"grid study: {units} rows x 1 seed(s) = {units} trials; budget per trial: epochs 1, stop plateau; "
            "2 at once") in out
    for label in ("LSTM", "SR-NMT", "FSMN", "minGRU"):
        assert f"\n{label} " in out
    assert "estimate: about " in out and "at their full epoch budget" in out and "Nothing was trained or written" in out
    assert not results.exists()  # no results directory, no MLflow store


def test_trial_time_is_the_epoch_budget_of_training_and_validation_plus_the_test_search():
    timing = {"steps_per_epoch": 100, "step_s": 0.5, "valid_s": 2.0, "epochs": 10, "test_pairs": 100, "beam_s": 0.1}
    epoch, trial = trial_seconds(timing)
    assert epoch == 100 * 0.5 + 2.0 and trial == 10 * epoch + 100 * 0.1


def test_a_plateau_stopped_trial_is_priced_between_its_earliest_stop_and_its_cap():
    from nmt.config import TrainConfig
    from nmt.plateau import MIN_EPOCHS
    from study.execution.dry_run import priced_epochs

    assert priced_epochs(TrainConfig(max_epochs=12)) == 12  # patience or no early stop: the whole budget
    assert priced_epochs(TrainConfig(max_epochs=50, early_stop="plateau", min_epochs=10)) == 30
    assert priced_epochs(TrainConfig(max_epochs=41, early_stop="plateau")) == (MIN_EPOCHS + 41) / 2
    assert priced_epochs(TrainConfig(max_epochs=3, early_stop="plateau")) == 3  # a cap before the test can judge


def test_the_dry_run_of_a_plateau_study_prices_its_trials_at_the_midpoint_and_says_so(monkeypatch):
    from nmt.config import config_from_dict
    from study.execution import dry_run as dry_run_module

    def one_second_epochs(config: dict, corpora: dict) -> dict:  # every row: a 1-second epoch, no test
        train = config_from_dict(config, source="test").train
        return {"params": 1, "step_s": 1.0, "valid_s": 0.0, "beam_s": 0.0, "steps_per_epoch": 1,
                "epochs": dry_run_module.priced_epochs(train), "cap": train.max_epochs, "test_pairs": 0}

    monkeypatch.setattr(dry_run_module, "time_row", one_second_epochs)
    spec = load_study("cells", ["seeds=1", "budget.epochs=11", "budget.stop=plateau", "budget.min_epochs=5"])
    lines: list[str] = []
    assert dry_run_module.dry_run(spec, 1, 2, log=lines.append) == 0
    rows = len(spec.fields.grid["model.cell"])
    assert "budget per trial: epochs 11, min_epochs 5, stop plateau;" in lines[0]
    estimate = lines[-1]
    trial_time = dry_run_module._clock(rows * 8)
    assert (f"about 40s of wall time for {rows} trials ({trial_time} of trial time) at 8 epochs each, the midpoint "
            "between the first epoch the plateau rule can stop a trial and its cap") in estimate
    assert "early stopping ends trials sooner" not in estimate
    lines.clear()
    patience = load_study("cells", ["seeds=1", "budget.epochs=11", "budget.stop=patience"])
    assert dry_run_module.dry_run(patience, 1, 2, log=lines.append) == 0
    assert f"for {rows} trials ({dry_run_module._clock(rows * 11)} of trial time) at their full epoch budget" in lines[-1]
    lines.clear()
    assert dry_run_module.dry_run(patience, 1, 2, log=lines.append, time_limit=22 / 3600) == 0
    assert lines[-1].startswith(f"--time-limit {22 / 3600:g}: by these prices 4 of the {rows} trials would end within "
                                f"it and {rows - 4} wait for --resume")


def test_within_a_time_limit_trials_start_unpriced_until_one_ends_then_only_if_they_fit():
    from study.execution.dry_run import within_limit

    assert within_limit([100.0] * 4, 2, 200.0) == (4, 0)  # two waves of two, each ending at 100 and 200
    assert within_limit([100.0] * 4, 2, 199.0) == (2, 2)
    # unpriced at the start: both start, one ends after the limit; after the first ends (60), 90 no longer fits
    assert within_limit([60.0, 150.0, 90.0, 30.0], 2, 100.0) == (2, 1)
    assert within_limit([100.0], 1, 50.0) == (0, 0)  # started unpriced, ends after it
    assert within_limit([10.0, 10.0], 1, 10.0) == (1, 1)  # the second would start as the limit passes
    # an unpriced trial's first epoch prices it up to the epoch cap: held back there when that ends after the limit,
    # its worker free again after that epoch
    assert within_limit([100.0, 100.0, 100.0], 2, 250.0, [(5.0, 300.0), (5.0, 200.0), (5.0, 200.0)]) == (2, 1)
    assert within_limit([100.0], 1, 150.0, [(5.0, 140.0)]) == (1, 0)  # its cap fits: it goes on, and ends within it


def test_dry_run_leaves_out_the_trials_reuse_from_would_copy(tmp_path, cache_dir, capsys):
    from study.spec.expansion import expand
    from study.store.trial_store import TrialStore

    results = tmp_path / "results"
    spec = load_study("cells", smoke_run=True)
    gru = next(t for t in expand(spec) if t.label == "GRU")
    other = TrialStore(results / "ray" / "units")  # a study that finished the same GRU trial
    other.start(gru.key, {"key": gru.key, "label": "GRU", "row": gru.row, "seed": gru.seed, "config": gru.config})
    (other.run_dir(gru.key) / "checkpoint").mkdir(parents=True)
    other.finish(gru.key, {"test_bleu": 1.0, "numerics": "portable", "pinning": PINNING})
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["cells", "--smoke", "--dry-run", "--reuse-from", "units", "--results", str(results),
                 "--cpus", "2"]) == 0
    out = capsys.readouterr().out
    units = len(spec.fields.grid["model.cell"])
    assert f"= {units} trials (1 copied by --reuse-from, {units - 1} to train);" in out
    assert "\nGRU " not in out and "\nLSTM " in out and f"for {units - 1} trials (" in out and "at their full epoch budget" in out
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing copied or written


def _stored(store, trial, epochs: float, stop_reason: str | None = None, final_state: bool = True) -> None:
    """A trial of ``store`` that trained ``epochs`` epochs, finished for ``stop_reason`` (None: unfinished)."""
    store.start(trial.key, {"key": trial.key, "label": trial.label, "row": trial.row, "seed": trial.seed,
                            "config": trial.config})
    store.progress(trial.key, {"epoch": epochs, "epochs_trained": epochs})
    checkpoint = store.run_dir(trial.key) / "checkpoint"
    checkpoint.mkdir(parents=True, exist_ok=True)
    if final_state:
        (checkpoint / "state.pt").write_bytes(b"state after the last epoch")
    if stop_reason:
        store.finish(trial.key, {"status": "ok", "stop_reason": stop_reason, "test_bleu": 1.0, "numerics": "portable",
                                 "pinning": PINNING})


def test_a_resumed_study_counts_only_what_is_left(tmp_path):
    from study.execution.dry_run import stored_progress
    from study.spec.expansion import expand
    from study.store.migration import plan_adoption
    from study.store.trial_store import TrialStore

    store = TrialStore(tmp_path)
    lstm, gru, atr = expand(load_study("cells", ["seeds=1", "budget.epochs=3", "budget.min_epochs=0"]))[:3]
    _stored(store, lstm, 3, "max epochs")
    _stored(store, gru, 2, "early stopping")
    _stored(store, atr, 1.0)  # still training
    trials = expand(load_study("cells", ["seeds=1", "budget.epochs=3", "budget.min_epochs=0"]))
    progress = stored_progress(store, trials, plan_adoption(store, trials))
    assert progress == {lstm.key: None, gru.key: None, atr.key: 1.0}  # --resume: two finished, one at epoch 1
    # on a clone, an unfinished trial's record comes without its checkpoint: it trains from the start
    (store.run_dir(atr.key) / "checkpoint" / "state.pt").unlink()
    assert atr.key not in stored_progress(store, trials, plan_adoption(store, trials))
    _stored(store, atr, 1.0)

    # --extend to 5 epochs: the trial the old budget stopped continues from epoch 3, the early stop stays
    longer = expand(load_study("cells", ["seeds=1", "budget.epochs=5", "budget.min_epochs=0"]))
    progress = stored_progress(store, longer, plan_adoption(store, longer))
    assert progress == {longer[0].key: 3.0, longer[1].key: None, longer[2].key: 1.0}
    # ... and a capped trial without its final state trains again from the start
    (store.finished_dir(lstm.key) / "state.pt").unlink(missing_ok=True)
    progress = stored_progress(store, longer, plan_adoption(store, longer))
    assert longer[0].key not in progress
    timing = {"steps_per_epoch": 10, "step_s": 1.0, "valid_s": 0.0, "epochs": 5, "test_pairs": 10, "beam_s": 0.5}
    assert trial_seconds(timing, trained=3.0) == (10.0, 2 * 10.0 + 5.0)


def test_dry_run_of_a_resume_leaves_finished_trials_out(tmp_path, cache_dir, capsys):
    from nmt.cli import run_main
    from study.execution.study_data import prepare_data
    from study.store.study_state import write_state
    from study.spec.expansion import expand
    from study.spec.portable import portable_tree
    from study.store.records import experiment_dir
    from study.store.trial_store import TrialStore

    results = tmp_path / "results"
    args = ["cells", "--smoke", "--dry-run", "--results", str(results), "--cpus", "2"]
    assert run_main(main, [*args, "--resume"]) == 2  # nothing stored yet: refused as the run would be
    assert "nothing to resume" in capsys.readouterr().err
    spec = load_study("cells", smoke_run=True)
    spec = prepare_data(spec, lambda line: None).spec  # as a run stores it
    write_state(results / "cells", {"study": "cells", "status": "running", "request": spec.tree,
                                    "portable_request": portable_tree(spec.tree)})
    store = TrialStore(experiment_dir(results, "cells"))
    lstm, gru = expand(spec)[:2]
    _stored(store, lstm, 1, "max epochs")
    _stored(store, gru, 0.5)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main([*args, "--resume"]) == 0
    out = capsys.readouterr().out
    units = len(spec.fields.grid["model.cell"])
    assert f"= {units} trials (1 finished, 1 to continue, {units - 2} to train);" in out
    assert "\nLSTM " not in out and "\nGRU " in out and "(the epochs they have left)" in out
    # a changed study is refused as --resume would refuse it
    assert run_main(main, [*args, "--resume", "--set", "model.hidden=8"]) == 2
    assert "the study changed since it started (base.model.hidden" in capsys.readouterr().err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
