"""Helpers of the end-to-end study tests: run the CLIs as real processes, read their results."""

from __future__ import annotations

import csv
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_ray_env(cache_dir: Path) -> tuple[dict, Path]:
    """Environment for a study subprocess: its own short Ray temp dir, the shared data cache."""
    ray_tmp = Path(f"/tmp/rt{os.getpid()}{int(time.time() * 1000) % 100000}")
    ray_tmp.mkdir()
    env = dict(os.environ, RAY_TMPDIR=str(ray_tmp), NMT_CACHE_DIR=str(cache_dir), OMP_NUM_THREADS="1",
               RAY_USAGE_STATS_ENABLED="0", PYTHONUNBUFFERED="1")
    env.pop("RAY_ADDRESS", None)
    return env, ray_tmp


# Ray's own node dying (seen about once per full-suite run on the 2-core CI machine, in a
# different test each time, never in a test run alone): infrastructure, not the behaviour
# under test. A run that fails with one of these lines is skipped with that line as reason.
RAY_NODE_LOST = ("Failed to connect to GCS within", "Owner's node has crashed", "cannot start a local Ray instance")


def skip_if_ray_node_lost(returncode: int, output: str) -> None:
    import pytest

    if returncode != 0:
        for line in output.splitlines():
            if any(sign in line for sign in RAY_NODE_LOST):
                pytest.skip(f"Ray's local node died in this run, not the code under test: {line.strip()[:200]}")


def study(*args: str, env: dict, timeout: int = 600, module: str = "study.run") -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", module, *args], check=False, capture_output=True, text=True,
                            cwd=ROOT, env=env, timeout=timeout)
    skip_if_ray_node_lost(result.returncode, result.stdout + result.stderr)
    return result


def start_study(*args: str, env: dict) -> subprocess.Popen:
    """A study driver in its own process group, its output (stdout and stderr) readable line by line."""
    return subprocess.Popen([sys.executable, "-m", "study.run", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def wait_for(process: subprocess.Popen, needle: str, timeout: float = 300) -> list[str]:
    """Read the process's output until a line contains ``needle``; the lines read so far."""
    lines = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = process.stdout.readline()
        if not line:
            if process.poll() is not None:
                break
            continue
        lines.append(line)
        if needle in line:
            return lines
    raise AssertionError(f"never saw {needle!r}; output:\n{''.join(lines)[-4000:]}")


def table_rows(results: Path, name: str) -> list[dict]:
    with open(results / name / "table.csv", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def mlflow_runs(results: Path, study_name: str, uri: str | None = None):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri or f"sqlite:///{results / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(study_name)
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("role") == "study"]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return client, parents, children


def grid_study(name: str, variants: str, seeds: int = 1, epochs: int = 2, cell: str = "gru") -> str:
    """A tiny study file: ``variants`` is the YAML list body (one "- {label: ..., set: {...}}" per line)."""
    return f"""
name: {name}
description: a tiny study of the fault tests
data: {{preset: synthetic, size: 300, valid_size: 20, test_size: 20, max_len: 60, spm: {{vocab_size: 200}}}}
base:
  model: {{cell: {cell}, hidden: 16, emb: 16}}
  train: {{batch_tokens: 600}}
  decode: {{beam: 2}}
variants:
{variants}
seeds: {seeds}
budget: {{epochs: {epochs}}}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
