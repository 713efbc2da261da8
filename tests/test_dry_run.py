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
