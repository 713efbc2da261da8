"""Every committed reference result in results/reference/ is what ``python -m study.table`` rebuilds from
its stored trial records: the tables a reader sees are the tables the code makes."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from study.table import main as table_main

RESULTS = Path(__file__).resolve().parents[3] / "results" / "reference"
STUDIES = sorted(p.parent.name for p in RESULTS.glob("*/study.json"))
REBUILT = ("table.md", "table.csv", "table.tex", "table_compact.tex", "trials.csv", "command.txt")
ADDITIVITY = ("additivity.md", "additivity.csv", "additivity.tex")
CLAIMS = ("claims.md", "claims.csv", "claims.tex")


EMBEDDED_PNG = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+")


def _finished(name: str) -> bool:
    return json.loads((RESULTS / name / "study.json").read_text(encoding="utf-8")).get("status") == "complete"


def _has_tables(name: str) -> bool:
    """A finished study, or one still running whose tables were committed to show where it stands
    (rebuilt from its committed trial store)."""
    return _finished(name) or (RESULTS / name / "table.md").is_file()


@pytest.mark.parametrize("name", [name for name in STUDIES if _has_tables(name)])
def test_committed_tables_are_rebuilt_exactly(name, tmp_path, capsys):
    copy = tmp_path / "results" / name
    # the study's own figures are drawn again; an analysis's figures stay as they are
    shutil.copytree(RESULTS / name, copy, ignore=lambda folder, names: [n for n in names if n.endswith(".png")
                                                                         and Path(folder) == RESULTS / name])
    if (RESULTS / "ray" / name).is_dir():  # a study still running: its trial store is the source of truth
        shutil.copytree(RESULTS / "ray" / name, tmp_path / "results" / "ray" / name)
    additivity = [file for file in ADDITIVITY if (RESULTS / name / file).is_file()]
    claims = [file for file in CLAIMS if (RESULTS / name / file).is_file()]
    for file in REBUILT + ("report.html", *additivity, *claims):
        (copy / file).unlink()
    assert table_main([name, "--results", str(tmp_path / "results")]) == 0
    capsys.readouterr()
    # an ablation of two or more components has its additivity table, and no other study has one;
    # a study that declares claims has its claims tables
    assert [file for file in ADDITIVITY if (copy / file).is_file()] == additivity
    assert [file for file in CLAIMS if (copy / file).is_file()] == claims
    for file in REBUILT + tuple(additivity) + tuple(claims):
        assert (copy / file).read_text(encoding="utf-8") == (RESULTS / name / file).read_text(encoding="utf-8"), file
    # the report: the same text, and as many embedded figures as the study directory has PNGs
    report, committed = ((folder / "report.html").read_text(encoding="utf-8") for folder in (copy, RESULTS / name))
    assert EMBEDDED_PNG.sub("PNG", report) == EMBEDDED_PNG.sub("PNG", committed)
    assert len(EMBEDDED_PNG.findall(report)) == len(list(copy.rglob("*.png"))) > 0
