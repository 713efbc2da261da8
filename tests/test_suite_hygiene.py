"""The suite cleans up after itself: under the project's pytest settings a passing test's
temporary directory (where the end-to-end tests keep their MLflow stores, Ray results and
corpora) is gone when the run ends, and a failing test's stays for a look."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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


def test_the_slow_tests_named_in_the_budget_exist():
    """tests/slow_tests.txt (tests/suite_budget.py) names real tests, each once with its reason: a renamed or
    removed test leaves no stale permission behind."""
    import ast

    from suite_budget import read_budget

    budget = read_budget()
    assert budget and all(reason.strip() for reason in budget.values())
    for test in budget:
        path, name = test.split("::", 1)
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert name.split("[", 1)[0] in defined and name.startswith("test_"), f"tests/slow_tests.txt: {test} is no test"


def test_the_budget_file_refuses_a_line_without_its_reason(tmp_path):
    from suite_budget import listed, read_budget

    (tmp_path / "budget.txt").write_text("# comment\n\ntests/a.py::test_b  # a study\n", encoding="utf-8")
    assert read_budget(tmp_path / "budget.txt") == {"tests/a.py::test_b": "a study"}
    assert listed("tests/a.py::test_b[2]", {"tests/a.py::test_b": "x"}) and not listed("tests/a.py::test_c", {})
    (tmp_path / "bad.txt").write_text("tests/a.py::test_b\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.txt:1: expected 'tests/FILE.py::TEST  # why it needs the time'"):
        read_budget(tmp_path / "bad.txt")
