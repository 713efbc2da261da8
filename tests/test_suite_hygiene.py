"""The suite cleans up after itself: under the project's pytest settings a passing test's
temporary directory (where the end-to-end tests keep their MLflow stores, Ray results and
corpora) is gone when the run ends, and a failing test's stays for a look."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TWO_TESTS = '''
def test_passes(tmp_path):
    (tmp_path / "mlflow.db").write_text("store")


def test_fails(tmp_path):
    (tmp_path / "mlflow.db").write_text("store")
    assert False
'''


def test_a_passing_tests_temporary_files_are_deleted_and_a_failing_ones_kept(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_two.py").write_text(TWO_TESTS, encoding="utf-8")
    base = tmp_path / "base"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(project), "--basetemp", str(base),
                           str(project / "test_two.py")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    left = sorted(p.parent.name for p in base.rglob("mlflow.db"))
    assert left == ["test_fails0"], left
