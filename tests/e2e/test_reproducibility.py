"""Same seeds, same table: a study's quality columns and test translations do not depend on
how busy the machine is or on how many trials run at once.

Three runs of one tiny study (real Ray, MLflow, SentencePiece and sacreBLEU): two trials at a
time on an idle machine, two at a time beside a process that keeps a core busy, and one at a
time. Their BLEU, chrF, validation BLEU, epochs, best epochs, steps and every hypothesis file
must be identical; only the speed columns may differ.
"""

from __future__ import annotations

import csv
import subprocess
import sys

import pytest
from study_helpers import grid_study, study

pytestmark = pytest.mark.slow

QUALITY = ("label", "seed", "status", "test_bleu", "valid_bleu", "test_chrf", "epochs", "best_epoch", "steps",
           "train_tokens", "still_improving", "params")
SPEED = ("train_tokens_per_s", "decode_words_per_s")
ROWS = """  - {label: atr, set: {model.cell: atr, model.dropout: 0.3}}"""  # two seeds: two trials side by side


def busy_core() -> subprocess.Popen:
    """A CPU-bound process beside the study (the 'busy machine' of the issue that motivated this)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def run_once(tmp_path, ray_env, name: str, *options: str, busy: bool = False) -> tuple[list[dict], dict[str, str]]:
    path = tmp_path / "repro.yaml"
    path.write_text(grid_study("repro", ROWS, seeds=2, epochs=2))
    results = tmp_path / name
    burner = busy_core() if busy else None
    try:
        result = study(str(path), "--cpus", "2", "--results", str(results), *options, env=ray_env)
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    with open(results / "repro" / "trials.csv", encoding="utf-8") as handle:
        trials = list(csv.DictReader(handle))
    hyps = {p.name: p.read_text(encoding="utf-8") for p in sorted((results / "repro" / "hyps").glob("*.hyp"))}
    return trials, hyps


def quality(trials: list[dict]) -> list[tuple]:
    return sorted(tuple(t[k] for k in QUALITY) for t in trials)


def test_idle_busy_concurrent_and_sequential_runs_give_the_same_table(tmp_path, cluster_env):
    idle, idle_hyps = run_once(tmp_path, cluster_env, "idle")
    busy, busy_hyps = run_once(tmp_path, cluster_env, "busy", busy=True)
    sequential, sequential_hyps = run_once(tmp_path, cluster_env, "sequential", "--max-concurrent", "1")

    assert len(idle) == 2 and all(t["status"] == "ok" for t in idle)
    assert len(idle_hyps) == 2 and all(text.strip() for text in idle_hyps.values())
    assert quality(busy) == quality(idle), "a busy machine changed the results"
    assert busy_hyps == idle_hyps
    assert quality(sequential) == quality(idle), "running trials one at a time changed the results"
    assert sequential_hyps == idle_hyps
    # the speed columns are the machine's, and they are still measured
    assert all(float(t[key]) > 0 for t in idle + busy for key in SPEED)

    tables = [(tmp_path / name / "repro" / "table.csv").read_text(encoding="utf-8").splitlines()
              for name in ("idle", "busy", "sequential")]
    header = tables[0][0].split(",")
    speed_columns = [header.index(c) for c in SPEED]

    def without_speed(lines: list[str]) -> list[list[str]]:
        return [[v for i, v in enumerate(next(csv.reader([line]))) if i not in speed_columns] for line in lines]

    assert without_speed(tables[1]) == without_speed(tables[0]) == without_speed(tables[2])
