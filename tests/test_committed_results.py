"""Every committed reference result in results/reference/ is what ``python -m study.table`` rebuilds from
its stored trial records: the tables a reader sees are the tables the code makes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from study.table import main as table_main

RESULTS = Path(__file__).resolve().parent.parent / "results" / "reference"
STUDIES = sorted(p.parent.name for p in RESULTS.glob("*/study.json"))
REBUILT = ("table.md", "table.csv", "table.tex", "table_compact.tex", "trials.csv", "command.txt")


@pytest.mark.parametrize("name", STUDIES)
def test_committed_tables_are_rebuilt_exactly(name, tmp_path, capsys):
    copy = tmp_path / "results" / name
    shutil.copytree(RESULTS / name, copy, ignore=shutil.ignore_patterns("*.png", "analysis"))
    for file in REBUILT:
        (copy / file).unlink()
    assert table_main([name, "--results", str(tmp_path / "results")]) == 0
    capsys.readouterr()
    for file in REBUILT:
        assert (copy / file).read_text(encoding="utf-8") == (RESULTS / name / file).read_text(encoding="utf-8"), file
