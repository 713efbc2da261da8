"""The prepared GPU check (scripts/gpu_check.py) run without a GPU, at tiny sizes: every part but the
CUDA tests measures and reports what it says, and its bad input is one line. On a GPU machine it is
run as its docstring says (docs/speed.md)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.py"


def en_de_folder(path: Path) -> Path:
    """A small corpus laid out as the Multi30k files are (train, val, test_2016_flickr; en and de), drawn from the
    built-in synthetic task so that the test runs wherever the suite does."""
    from nmt.data.synthetic import generate_corpus

    path.mkdir()
    corpus = generate_corpus(1, 80, 20, 20)
    for split, name in (("train", "train"), ("valid", "val"), ("test", "test_2016_flickr")):
        for side, lang in ((0, "en"), (1, "de")):
            (path / f"{name}.{lang}").write_text("".join(pair[side] + "\n" for pair in corpus[split]), encoding="utf-8")
    return path


def gpu_check(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NMT_CACHE_DIR": str(cache_dir), "OMP_NUM_THREADS": "1"}
    env.pop("NMT_KERNELS", None)
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_part_or_an_epoch_that_breaks_is_reported_beside_the_rest():
    """Device time is scarce: what broke is named in the report, and what ran is kept."""
    report = {"device": "H200", "torch": "2.11", "started": "now", "bench": {"error": "RuntimeError: no kernel"},
              "epochs": [{"study": "s", "row": "SR-NMT 1L", "kernels": "triton", "steps": 0, "tokens": 0,
                          "error": "CompilationError: tl.foo"},
                         {"study": "s", "row": "SR-NMT 1L", "kernels": "torch", "steps": 9, "tokens": 90,
                          "tokens_per_s": 4321.0}]}
    table = load_script().markdown(report)
    assert "Part bench failed: RuntimeError: no kernel" in table and "ratio to nn.LSTM" not in table
    assert "| s | SR-NMT 1L | triton | 0 | CompilationError: tl.foo |" in table
    assert "| s | SR-NMT 1L | torch | 9 | 4,321 |" in table


def test_the_doubling_rule_picks_the_most_trials_that_still_paid():
    module = load_script()
    rows = [{"trials": n, "total_tokens_per_s": t} for n, t in ((1, 100.0), (2, 180.0), (4, 195.0), (8, 400.0))]
    assert module.trials_per_gpu(rows) == 2  # 4 gained 8% over 2: the later 8 does not count
    assert module.trials_per_gpu(rows[:1]) == 1
    assert module.trials_per_gpu([{**r, "total_tokens_per_s": 100.0 * r["trials"]} for r in rows]) == 8


@pytest.mark.slow
def test_the_check_runs_every_part_on_a_cpu_at_tiny_sizes(tmp_path, cache_dir):
    out = tmp_path / "check"
    tiny = ["--set", "data.spm.vocab_size=120", "--set", "model.hidden=8",
            "--set", "model.emb=8"]
    result = gpu_check("--data-dir", str(en_de_folder(tmp_path / "en-de")), "--out", str(out), "--device", "cpu",
                       "--parts", "bench", "epochs", "packing", "--hidden", "8", "--cells", "nn.LSTM", "srnmt",
                       "--bench-batch", "2x4", "--repeats", "1", "--kernels", "torch",
                       "--studies", "depth_srnmt_m30k", "context_gates_m30k", *tiny, "--trials", "1", "2",
                       "--steps", "2", cache_dir=cache_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["device"] == "cpu" and set(report) >= {"bench", "epochs", "packing", "packing_seconds"}
    ratios = report["bench"]["torch"]
    assert ratios["nn.LSTM H=8"] == 1.0 and ratios["srnmt H=8"] > 0
    # each study's reference row, seed 1, on the torch paths only (--kernels torch)
    assert [(r["study"], r["row"], r["kernels"]) for r in report["epochs"]] == [
        ("depth_srnmt_m30k", "SR-NMT 1L", "torch"), ("context_gates_m30k", "GRU", "torch")]
    assert all(r["steps"] > 0 and r["tokens"] > 0 and r["tokens_per_s"] > 0 for r in report["epochs"])
    packing = report["packing"]
    assert [r["trials"] for r in packing["rows"]] == [1, 2] and packing["kernels"] == "torch"
    assert all(r["total_tokens_per_s"] > 0 and r["per_trial_tokens_per_s"] > 0 for r in packing["rows"])
    assert packing["trials_per_gpu"] in (1, 2)
    table = (out / "gpu_check.md").read_text()
    assert "| srnmt H=8 |" in table and "| depth_srnmt_m30k | SR-NMT 1L | torch |" in table
    assert f"--gpus-per-trial {1 / packing['trials_per_gpu']:g}" in table
    assert table in result.stdout  # printed at the end too
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("gpu-check-packing-*"))  # its barriers are gone


def test_bad_input_is_one_line(tmp_path, cache_dir):
    missing = gpu_check("--data-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out"), "--device", "cpu",
                        cache_dir=cache_dir)
    assert missing.returncode == 2 and missing.stderr.strip().splitlines() == [
        f"error: --data-dir {tmp_path / 'nowhere'}: directory not found; give the folder of the Multi30k files"]
    assert not (tmp_path / "out").exists()
    shape = gpu_check("--data-dir", str(tmp_path), "--out", str(tmp_path / "out"), "--bench-batch", "64",
                      cache_dir=cache_dir)
    assert shape.returncode == 2 and "'64': give the batch as BxT, e.g. 64x30" in shape.stderr
    if not torch.cuda.is_available():
        no_gpu = gpu_check("--data-dir", str(tmp_path), "--out", str(tmp_path / "out"), cache_dir=cache_dir)
        assert no_gpu.returncode == 2 and len(no_gpu.stderr.strip().splitlines()) == 1
        assert "--device cuda: no CUDA device here" in no_gpu.stderr
