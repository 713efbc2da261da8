"""The driver touches only what it owns: paths inside the results directory, and one driver per
study and results directory (a lock that a killed driver does not leave behind)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nmt.cli import run_main
from nmt.errors import UserError
from study.store.ownership import StudyLock, owned_path

ROOT = Path(__file__).resolve().parents[3]

STUDY = """name: held
description: a study of the lock tests
data: {preset: synthetic, size: 300, valid_size: 20, test_size: 20, spm: {vocab_size: 200}}
base:
  model: {cell: gru, hidden: 16, emb: 16}
variants:
  - {label: one, set: {}}
budget: {epochs: 1}
"""


def test_owned_paths_lie_strictly_inside_the_root_and_are_not_links(tmp_path):
    root = tmp_path / "results"
    (root / "study").mkdir(parents=True)
    assert owned_path(root, root / "study", "x") == (root / "study").resolve()
    assert owned_path(root, root / "ray" / "new", "x") == (root / "ray" / "new").resolve()  # need not exist yet
    (root / "link").symlink_to(tmp_path)
    for bad in (root, root / "..", root / "a" / ".." / "..", tmp_path / "elsewhere", root / "link", Path("/")):
        with pytest.raises(UserError):
            owned_path(root, bad, "x")


def hold_lock(results: Path, study: str) -> subprocess.Popen:
    """A process that holds the study's lock, as a running driver does, until it is killed."""
    code = ("import sys, time; from pathlib import Path; from study.store.ownership import StudyLock\n"
            f"with StudyLock(Path({str(results)!r}), {study!r}, 'python -m study.run {study}'):\n"
            "    print('held', flush=True); time.sleep(600)")
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_driver_is_refused_and_a_killed_driver_leaves_no_lock(tmp_path, capsys):
    from study.run import main

    results = tmp_path / "results"
    (results / "held").mkdir(parents=True)
    (results / "held" / "study.json").write_text('{"study": "held", "status": "running"}')
    study_file = tmp_path / "held.yaml"
    study_file.write_text(STUDY)
    holder = hold_lock(results, "held")
    try:
        before = sorted(p.relative_to(results) for p in results.rglob("*"))
        for extra in ([], ["--fresh"], ["--resume"]):
            assert run_main(main, [str(study_file), "--results", str(results), *extra]) == 2
            (line,) = capsys.readouterr().err.strip().splitlines()
            assert f"study held is already running in {results} (driver PID {holder.pid} since " in line, line
            assert "--resume" in line and "--fresh" not in line  # merely running: never advise starting over
        assert sorted(p.relative_to(results) for p in results.rglob("*")) == before  # --fresh deleted nothing
    finally:
        holder.kill()
        holder.wait()
    with StudyLock(results, "held"):  # the kernel released the killed holder's lock
        with pytest.raises(UserError, match="already running"):
            StudyLock(results, "held").__enter__()
