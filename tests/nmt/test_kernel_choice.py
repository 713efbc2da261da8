"""The kernel switch (NMT_KERNELS) is input: a bad value is one line before anything is written or trained,
a Triton request that will crawl in the interpreter says so, and a trial records the kernels it ran."""

from __future__ import annotations

import pytest
import torch
from study_helpers import grid_study, in_process

from nmt.ops.kernel_choice import check_kernels
from nmt.ops.kernels import kernels_run


def test_a_bad_switch_is_one_line_before_a_run_or_a_study_writes_anything(tmp_path, monkeypatch, cache_dir):
    monkeypatch.setenv("NMT_KERNELS", "cuda")
    trained = in_process("--set", f"data.cache_dir={cache_dir}", "--out", str(tmp_path / "run"), module="nmt.train")
    study_file = tmp_path / "k.yaml"
    study_file.write_text(grid_study("k", "  - {label: one, set: {}}"))
    studied = in_process(str(study_file), "--results", str(tmp_path / "results"))
    for result in (trained, studied):
        (line,) = result.stderr.strip().splitlines()
        assert result.returncode == 2 and "NMT_KERNELS='cuda' is not a kernel choice; use torch" in line, line
    assert sorted(path.name for path in tmp_path.iterdir()) == ["k.yaml"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter runs only where no CUDA device is present")
def test_triton_without_cuda_warns_and_a_unit_without_kernels_records_torch(monkeypatch):
    monkeypatch.delenv("NMT_KERNELS", raising=False)
    assert check_kernels() is None and kernels_run("atr", torch.device("cpu")) == "torch"
    monkeypatch.setenv("NMT_KERNELS", "triton")
    assert "without a CUDA device" in check_kernels() and "hundreds of times slower" in check_kernels()
    assert kernels_run("atr", torch.device("cpu")) == "triton"  # ATR has Triton kernels: the interpreter runs them
    assert kernels_run("gru", torch.device("cpu")) == "torch"  # GRU has none: it runs, and records, torch
