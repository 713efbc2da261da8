"""The benchmark commands run end to end at tiny sizes and report what they promise."""

from __future__ import annotations

import json

import pytest
from study_helpers import study

from nmt.bench import bench_cells_names, forward_flops_per_token, main, model_config
from nmt.cli import run_main
from nmt.model import build_model
from study.bench import main as study_bench_main


def test_cell_and_model_benchmark_reports_ratios_and_peak(capsys):
    code = main(["--hidden", "16", "--threads", "1", "--batch", "4", "--length", "5", "--model-size", "16",
                 "--vocab", "60", "--beams", "1", "2", "--repeats", "1", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["device"] in ("cpu", "cuda") and report["batch"] == 4
    cells = {row["cell"]: row for row in report["cells"]}
    assert set(cells) == set(bench_cells_names())
    assert cells["nn.LSTM"]["vs_lstm"] == 1.0
    for row in cells.values():
        assert row["tokens_per_s"] > 0 and row["gflops"] > 0 and row["peak_gflops"] > 0
        assert row["of_peak"] == pytest.approx(row["gflops"] / row["peak_gflops"])
    models = {row["model"]: row for row in report["models"]}
    assert {"ablation_srnmt/SR-NMT 4L", "pair/LSTM 2L", "cells/fsmn", "cells/atr"} <= set(models)
    for row in models.values():
        assert row["train_tokens_per_s"] > 0 and row["activation_bytes_per_token"] > 0
        assert row["gflops"] == pytest.approx(row["train_flops_per_token"] * row["train_tokens_per_s"] / 1e9)
        assert row["of_peak"] == pytest.approx(row["gflops"] / row["peak_gflops"])
        assert row["decode_words_per_s_beam1"] > 0 and row["decode_words_per_s_beam2"] > 0
    assert models["ablation_srnmt/SR-NMT 4L"]["layers"] == "4+4"


def test_model_flops_count_every_product_once():
    def flops(**changes):
        cfg = model_config({"hidden": 16, "emb": 16, **changes})
        return forward_flops_per_token(build_model(cfg, 60, 60), source_length=7)

    gru = flops(cell="gru")
    # a softmax tied to the target embeddings is still a product; the lookups never are
    assert flops(cell="gru", tie_embeddings=True) == gru
    # scalar and vector memories both apply N+1 taps to every unit
    assert flops(cell="fsmn", fsmn={"memory": "scalar"}) == flops(cell="fsmn", fsmn={"memory": "vector"})
    # scores and context of one attention grow with the source length: (A + M) products per position
    cfg = model_config({"cell": "gru", "hidden": 16, "emb": 16})
    model = build_model(cfg, 60, 60)
    assert forward_flops_per_token(model, 8) - forward_flops_per_token(model, 7) == 2 * (16 + 16)
    # a second decoder layer adds its recurrent unit's six 16 x 16 matrices (input from the layer below)
    assert flops(cell="gru", dec_layers=2) - gru == 2 * 6 * 16 * 16


def test_benchmark_bad_values_are_one_line(capsys):
    assert run_main(main, ["--hidden", "0"]) == 2
    assert "--hidden 0" in capsys.readouterr().err
    assert run_main(study_bench_main, ["--sequential-threads", "0"]) == 2
    assert "--sequential-threads 0: must be >= 1" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_study_level_benchmark_prints_both_wall_times(ray_env):
    result = study("--trials", "2", "--epochs", "1", "--size", "300", "--hidden", "16", "--sequential-threads", "1",
                   "--json", env=ray_env, module="study.bench")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["trials"] == 2 and report["concurrent_seconds"] > 0 and report["sequential_seconds"] > 0
    assert report["sequential_threads"] == 1
    assert report["ratio"] == pytest.approx(report["concurrent_seconds"] / report["sequential_seconds"], rel=0.01)
