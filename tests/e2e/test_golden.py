"""Golden numbers: under portable numerics the same seeds give the same numbers on Intel and AMD CPUs
with AVX2, so the numbers one machine computed (tests/golden/golden.json) are asserted, to the last
bit, on whatever machine runs this, listed there or not: the README main study's first trial (its first
12 epochs), and the smoke run of the same study's every row (frozen copies in tests/golden/, so that a later change
of the built-in study does not change what is tested).

golden.json lists each CPU on which these numbers were reproduced (``verified_on``); a CPU not yet
listed that passes is added there and to nmt.numerics.PINNINGS, which the tables' notes quote. Where
this fails on a CPU with AVX2, portable does not hold there: that is a bug to find, not numbers to
make anew. Dump every op's output of a few training steps on both machines and compare (as
tests/nmt/test_numerics_vendors.py does under an emulated AMD CPU), and fix the op's pinning."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.numerics import PINNING, PINNINGS, PORTABLE_ENV, cpu_name, has_avx2
from study_helpers import study

GOLDEN = Path(__file__).resolve().parents[1] / "golden"

needs_avx2 = pytest.mark.skipif(not has_avx2(), reason="portable numerics need an x86-64 CPU with AVX2; this one has none")


def golden() -> dict:
    return json.loads((GOLDEN / "golden.json").read_text(encoding="utf-8"))


def unpinned_env(cache_dir: Path) -> dict:
    """The environment of a user's shell: no pin of ours (the commands set them), one thread."""
    env = {k: v for k, v in os.environ.items() if k not in PORTABLE_ENV}
    return {**env, "OMP_NUM_THREADS": "1", "NMT_CACHE_DIR": str(cache_dir)}


def test_the_golden_numbers_are_of_this_pinning_and_name_where_they_held():
    """golden.json's numbers are of the pinning portable means now, and the CPUs it lists are the ones the
    tables' notes name (nmt.numerics.PINNINGS)."""
    expected = golden()
    assert expected["pinning"] == PINNING
    assert tuple(cpu["cpu"] for cpu in expected["verified_on"]) == PINNINGS[PINNING].verified_on
    assert all(set(cpu) == {"vendor", "cpu", "model", "how", "date", "torch"} for cpu in expected["verified_on"])
    assert {cpu["vendor"] for cpu in expected["verified_on"]} <= {"Intel", "AMD"}


def where_verified() -> str:
    return "; ".join(f"{cpu['model']} ({cpu['how']}, {cpu['date']})" for cpu in golden()["verified_on"])


@pytest.mark.slow
@needs_avx2  # no Ray: off the "ray" group, so the other worker trains it beside the Ray studies
def test_the_main_study_s_first_trial_gives_the_golden_numbers(tmp_path, cache_dir):
    config = tmp_path / "first.yaml"
    text = (GOLDEN / "main_first_trial.yaml").read_text(encoding="utf-8")
    config.write_text(text.replace("cache_dir: null", f"cache_dir: {cache_dir}"), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "nmt.train", "--config", str(config), "--out", str(tmp_path / "run")],
                          env=unpinned_env(cache_dir), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    expected = golden()
    assert metrics["numerics"] == "portable"
    assert {key: metrics[key] for key in expected["main_first_trial"]} == expected["main_first_trial"], (
        f"{cpu_name()} computes other numbers than {where_verified()}: portable numerics do not hold here")


@pytest.mark.slow
@needs_avx2
def test_the_smoke_run_gives_the_golden_table(tmp_path, cluster_env):
    results = tmp_path / "results"
    done = study(str(GOLDEN / "golden_smoke.yaml"), "--smoke", "--cpus", "2", "--results", str(results), env=cluster_env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    folder = results / "golden_smoke"
    chrf = {row["label"]: float(row["test_chrf"]) for row in csv.DictReader(open(folder / "trials.csv"))}
    ppl = {row["label"]: float(row["valid_ppl"]) for row in csv.DictReader(open(folder / "progress.csv"))}
    expected = golden()
    assert {label: {"test_chrf": chrf[label], "valid_ppl": ppl[label]} for label in chrf} == expected["smoke"], (
        f"{cpu_name()} computes other numbers than {where_verified()}: portable numerics do not hold here")
