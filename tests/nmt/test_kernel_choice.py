"""The kernel switch (NMT_KERNELS) is input: a bad value is one line before anything is written or trained,
a Triton request that will crawl in the interpreter says so, and a trial records the kernels it ran. Which
units run on Triton kernels is what each declares (``Unit.triton_kernels``), and the declaration matches the
recurrences its modules call.

Modules covered here: ``nmt.ops.kernel_choice`` and ``nmt.ops.kernels``."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
import torch
from study_helpers import grid_study, in_process

import nmt.cells
from nmt.ops.kernel_choice import check_kernels
from nmt.ops.kernels import kernels_run
from nmt.units import Unit, units

OPS = Path(__file__).resolve().parents[2] / "nmt" / "ops"


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


def modules_imported(path: Path) -> set[str]:
    return {node.module for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ImportFrom) and node.module}


def recurrences_with_kernels() -> set[str]:
    """The recurrences with Triton kernels: the modules of nmt.ops that pick their method through nmt.ops.kernels."""
    return {f"nmt.ops.{path.stem}" for path in OPS.glob("*.py") if "nmt.ops.kernels" in modules_imported(path)}


def declaring_modules() -> dict[str, list[Path]]:
    """unit name -> the files of its own modules: the one that declares it, and its own encoder's and decoder's."""
    found = {}
    for info in pkgutil.iter_modules(nmt.cells.__path__):
        module = importlib.import_module(f"nmt.cells.{info.name}")
        unit = getattr(module, "UNIT", None)
        if isinstance(unit, Unit):
            own = [part for part in (unit.encoder, unit.decoder) if part is not None]
            found[unit.name] = [Path(module.__file__)] + [Path(inspect.getsourcefile(part)) for part in own]
    return found


def test_each_unit_declares_triton_kernels_exactly_when_its_modules_call_a_recurrence_that_has_them():
    """A unit that calls a recurrence with Triton kernels and does not declare it would run them unrecorded
    (a trial says torch); one that declares them without calling one would be timed both ways for nothing by
    the GPU check."""
    with_kernels = recurrences_with_kernels()
    assert {"nmt.ops.linear_scan", "nmt.ops.atr_scan", "nmt.ops.ran_scan", "nmt.ops.sru_v2_scan"} <= with_kernels
    calling = {name for name, paths in declaring_modules().items()
               if any(modules_imported(path) & with_kernels for path in paths)}
    declared = {name for name, unit in units().items() if unit.triton_kernels}
    assert declared == calling, (f"declared Triton kernels but calls no recurrence that has them: "
                                 f"{sorted(declared - calling)}; calls one but does not declare it: "
                                 f"{sorted(calling - declared)} (set triton_kernels in the unit's UNIT)")


def test_the_kernels_a_trial_records_follow_each_units_declaration(monkeypatch):
    """With the switch on, on a device the kernels take, a unit records triton exactly when it declares them."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv("NMT_KERNELS", "triton")
    recorded = {name: kernels_run(name, device) for name in units()}
    assert recorded == {name: "triton" if unit.triton_kernels else "torch" for name, unit in units().items()}
    monkeypatch.setenv("NMT_KERNELS", "torch")
    assert {kernels_run(name, device) for name in units()} == {"torch"}
