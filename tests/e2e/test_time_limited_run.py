"""--time-limit on a real study: past its limit, the trials Tune starts are held back at their first report,
before they train an epoch; the run ends with exit 3, its study marked stopped and the command that continues
it; that command trains them to the end with one MLflow run each, and no trial is left "stopped"."""

from __future__ import annotations

import json

from study_helpers import grid_study, mlflow_runs, study, table_rows

TWO_ROWS = "  - {label: gru, set: {}}\n  - {label: atr, set: {model.cell: atr}}"


def test_trials_past_the_limit_wait_for_the_next_run_which_finishes_them(tmp_path, cluster_env):
    path, results = tmp_path / "limited.yaml", tmp_path / "results"
    path.write_text(grid_study("limited", TWO_ROWS, epochs=1))
    run = (str(path), "--cpus", "2", "--results", str(results))

    # 0.36 seconds from the run's start: gone before Ray hands out its first trial
    first = study(*run, "--time-limit", "0.0001", env=cluster_env)
    assert first.returncode == 3, first.stdout[-3000:] + first.stderr[-3000:]
    assert first.stdout.count("not started (the limit has passed); --resume starts it") == 2
    assert "2 trial(s) held back (atr seed 1, gru seed 1), 0 of 2 done" in first.stderr
    assert "Continue with: python -m study.run" in first.stderr and "--time-limit 0.0001 --resume" in first.stderr
    state = json.loads((results / "limited" / "study.json").read_text())
    assert state["status"] == "stopped" and state["stopped_by"] == "--time-limit 0.0001"
    trials = results / "ray" / "limited" / "trials"
    # held back before they wrote anything: no record, no epoch, no verdict that would say "stopped"
    assert not [path for name in ("trial.json", "progress.json", "status.json") for path in trials.glob(f"*/{name}")]

    second = study(*run, "--resume", env=cluster_env)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    rows = table_rows(results, "limited")
    assert [(r["label"], r["status"]) for r in rows] == [("gru", "ok"), ("atr", "ok")]
    _, _, children = mlflow_runs(results, "limited")
    assert sorted(c.info.status for c in children) == ["FINISHED", "FINISHED"]
