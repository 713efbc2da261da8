"""--dry-run: the rows, trials, budget and a time estimate, with nothing trained or written."""

from __future__ import annotations

from study.dry_run import trial_seconds
from study.run import main
from study.spec import load_study


def test_dry_run_lists_rows_and_estimates_without_training_or_writing(tmp_path, cache_dir, capsys):
    results = tmp_path / "results"
    assert main(["cells", "--smoke", "--dry-run", "--results", str(results), "--cpus", "2"]) == 0
    out = capsys.readouterr().out
    units = len(load_study("cells").fields.grid["model.cell"])
    assert (f"grid study: {units} rows x 1 seed(s) = {units} trials; budget per trial: epochs 1, patience 0; "
            "2 at once") in out
    for label in ("LSTM", "SR-NMT", "FSMN", "minGRU"):
        assert f"\n{label} " in out
    assert "estimate: about " in out and "at their full epoch budget" in out and "Nothing was trained or written" in out
    assert not results.exists()  # no results directory, no MLflow store


def test_trial_time_is_the_epoch_budget_of_training_and_validation_plus_the_test_search():
    timing = {"steps_per_epoch": 100, "step_s": 0.5, "valid_pairs": 200, "greedy_s": 0.01, "epochs": 10,
              "test_pairs": 100, "beam_s": 0.1}
    epoch, trial = trial_seconds(timing)
    assert epoch == 100 * 0.5 + 200 * 0.01 and trial == 10 * epoch + 100 * 0.1


def test_dry_run_leaves_out_the_trials_reuse_from_would_copy(tmp_path, cache_dir, capsys):
    from study.spec import expand
    from study.trial_store import TrialStore

    results = tmp_path / "results"
    spec = load_study("cells", smoke_run=True)
    gru = next(t for t in expand(spec) if t.label == "GRU")
    other = TrialStore(results / "ray" / "units")  # a study that finished the same GRU trial
    other.start(gru.key, {"key": gru.key, "label": "GRU"})
    (other.run_dir(gru.key) / "checkpoint").mkdir(parents=True)
    other.finish(gru.key, {"test_bleu": 1.0})
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["cells", "--smoke", "--dry-run", "--reuse-from", "units", "--results", str(results),
                 "--cpus", "2"]) == 0
    out = capsys.readouterr().out
    units = len(spec.fields.grid["model.cell"])
    assert f"= {units} trials (1 copied by --reuse-from, {units - 1} to train);" in out
    assert "\nGRU " not in out and "\nLSTM " in out and f"for {units - 1} trials at their full epoch budget" in out
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing copied or written
