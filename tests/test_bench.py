"""The benchmark commands run end to end at tiny sizes and report what they promise."""

from __future__ import annotations

import json

import pytest
from study_helpers import study

from nmt.bench import CELLS, main
from nmt.cli import run_main


def test_cell_and_model_benchmark_reports_ratios_and_peak(capsys):
    code = main(["--hidden", "16", "--threads", "1", "--batch", "4", "--length", "5", "--model-size", "16",
                 "--vocab", "60", "--beams", "1", "2", "--repeats", "1", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["device"] in ("cpu", "cuda") and report["batch"] == 4
    cells = {row["cell"]: row for row in report["cells"]}
    assert set(cells) == set(CELLS)
    assert cells["nn.LSTM"]["vs_lstm"] == 1.0
    for row in cells.values():
        assert row["tokens_per_s"] > 0 and row["gflops"] > 0 and row["peak_gflops"] > 0
        assert row["of_peak"] == pytest.approx(row["gflops"] / row["peak_gflops"])
    models = {row["model"]: row for row in report["models"]}
    assert {"ablation_srnmt/SR-NMT 4L", "pair/LSTM 2L", "cells/fsmn", "cells/atr"} <= set(models)
    for row in models.values():
        assert row["train_tokens_per_s"] > 0 and row["activation_bytes_per_token"] > 0
        assert row["decode_words_per_s_beam1"] > 0 and row["decode_words_per_s_beam2"] > 0
    assert models["ablation_srnmt/SR-NMT 4L"]["layers"] == "4+4"


def test_benchmark_bad_values_are_one_line(capsys):
    assert run_main(main, ["--hidden", "0"]) == 2
    assert "--hidden 0" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_study_level_benchmark_prints_both_wall_times(ray_env):
    result = study("--trials", "2", "--epochs", "1", "--size", "300", "--hidden", "16", "--json",
                   env=ray_env, module="study.bench")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["trials"] == 2 and report["concurrent_seconds"] > 0 and report["sequential_seconds"] > 0
    assert report["ratio"] == pytest.approx(report["concurrent_seconds"] / report["sequential_seconds"], rel=0.01)
