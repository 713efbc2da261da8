"""report.html: one self-contained, deterministic HTML file per study (table, figures,
configuration, data, environment), written from a copy of a committed reference study.

Modules covered here: ``study.store.study_state``."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
from pathlib import Path

import pytest

from nmt.cli import run_main
from study.analysis.html_report import write_html_report
from study.analysis.stored_study import load_stored_study
from study.report import main

REFERENCE = Path(__file__).resolve().parents[3] / "results" / "reference"
NAME = "ablation_srnmt"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ENVIRONMENT = {"git_commit": "0123456789abcdef0123456789abcdef01234567", "version.python": "3.12.1",
               "version.torch": "2.13.0", "platform": "Linux x86_64"}


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """A copy of the study whose study.json records its environment, as new runs do."""
    directory = tmp_path_factory.mktemp("report") / "results" / NAME
    shutil.copytree(REFERENCE / NAME, directory)
    state = json.loads((directory / "study.json").read_text(encoding="utf-8"))
    state["environment"] = ENVIRONMENT
    (directory / "study.json").write_text(json.dumps(state, indent=2), encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def table(study):
    """The study's table, built once (what study.runner's write_exports hands the report)."""
    return load_stored_study(study).table()


@pytest.fixture(scope="module")
def report(study, table) -> str:
    return write_html_report(study, table).read_text(encoding="utf-8")


def markdown_rows(path: Path) -> list[list[str]]:
    """The body cells of table.md."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def same_cell(shown: str, stored: str) -> bool:
    """tabulate rewrites numbers in table.md (25.20 -> 25.2): compare numbers as numbers."""
    try:
        return float(shown) == float(stored)
    except ValueError:
        return shown == stored


def test_the_report_shows_every_row_of_the_table_with_its_cells(report, study):
    body = report.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    shown = [[html.unescape(cell) for cell in re.findall(r"<td>(.*?)</td>", row)]
             for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body)]
    stored = markdown_rows(REFERENCE / NAME / "table.md")
    assert len(shown) == len(stored) == 8
    for shown_row, stored_row in zip(shown, stored):
        assert len(shown_row) == len(stored_row)
        assert all(same_cell(a, b) for a, b in zip(shown_row, stored_row)), (shown_row, stored_row)
    assert '<tr class="reference"><td>SR-NMT 4L</td>' in report
    assert "still improving when its training ended" in report  # the table's footnote


def test_every_figure_is_embedded_as_a_png_and_nothing_is_linked(report, study):
    sources = re.findall(r'src="([^"]*)"', report)
    figures = sorted(study.glob("*.png"))
    assert len(sources) == len(figures) == 2
    for source, figure in zip(sources, figures):
        prefix = "data:image/png;base64,"
        assert source.startswith(prefix)
        data = base64.b64decode(source[len(prefix):], validate=True)
        assert data.startswith(PNG_MAGIC) and data == figure.read_bytes()
    assert re.search(r"https?://", report) is None
    for outside in ("href=", "<script", "<link", "<iframe", "@import", "url("):
        assert outside not in report


def test_the_report_holds_configuration_data_and_environment(report):
    state = json.loads((REFERENCE / NAME / "study.json").read_text(encoding="utf-8"))
    assert html.escape(state["spec"]["description"]) in report
    assert html.escape((REFERENCE / NAME / "command.txt").read_text(encoding="utf-8").strip()) in report
    assert "ablate:\n- model.layer_norm" in report  # the study as run, as YAML
    assert f"<th>train_pairs</th><td>{state['data']['train_pairs']}</td>" in report
    for key, value in ENVIRONMENT.items():
        assert f"<th>{key}</th><td>{value}</td>" in report
    assert f"<th>started</th><td>{state['started']}</td>" in report


def test_the_report_is_deterministic_and_independent_of_where_the_study_lies(study, table, report, tmp_path, capsys):
    path = study / "report.html"
    assert write_html_report(study, table).read_text(encoding="utf-8") == report
    # the command line rebuilds the table from the stored records: the same bytes again
    assert main([NAME, "--results", str(study.parent)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert path.read_bytes() == report.encode("utf-8")
    moved = tmp_path / "elsewhere" / NAME
    shutil.copytree(study, moved)
    assert write_html_report(moved, table).read_bytes() == path.read_bytes()


def test_a_study_run_by_several_commands_lists_them_all_oldest_first(tmp_path, table, capsys):
    """study.json keeps every command that ran the study (a repeated --resume once); study.table writes
    them to command.txt one a line and the report lists them, the starting command first."""
    from study.store.study_state import command_history, with_command

    directory = tmp_path / NAME
    shutil.copytree(REFERENCE / NAME, directory)
    state = json.loads((directory / "study.json").read_text(encoding="utf-8"))
    assert command_history(state) == [state["command"]]  # stored before the history was kept
    start = "python -m study.run ablation_srnmt --cpus 2"
    history = []
    for command in (start, start + " --resume", start + " --resume", start + " --extend --seeds 3", ""):
        history = with_command(history, command)
    assert history == [start, start + " --resume", start + " --extend --seeds 3"]
    state.update(command=history[-1], commands=history)
    (directory / "study.json").write_text(json.dumps(state), encoding="utf-8")
    from study.table import main as table_main

    assert table_main([NAME, "--results", str(tmp_path)]) == 0
    capsys.readouterr()
    assert (directory / "command.txt").read_text(encoding="utf-8").splitlines() == history
    report = (directory / "report.html").read_text(encoding="utf-8")
    assert "<h3>Commands</h3>" in report and html.escape("\n".join(history)) in report


def test_the_report_is_one_file(tmp_path, table):
    directory = tmp_path / NAME
    shutil.copytree(REFERENCE / NAME, directory, ignore=shutil.ignore_patterns("report.html"))
    before = {p.relative_to(directory) for p in directory.rglob("*")}
    write_html_report(directory, table)
    after = {p.relative_to(directory) for p in directory.rglob("*")}
    assert after - before == {Path("report.html")}
    assert "Not recorded: this study ran before study.json recorded" in (directory / "report.html").read_text("utf-8")


def test_bad_input_is_one_line_and_a_nonzero_exit(tmp_path, capsys):
    assert run_main(main, ["nonexistent", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: study nonexistent: no stored results") and err.count("\n") == 1
    (tmp_path / "empty").mkdir()
    assert run_main(main, ["empty", "--results", str(tmp_path)]) == 2
    assert "no study.json" in capsys.readouterr().err
    assert run_main(main, ["../escape", "--results", str(tmp_path)]) == 2
    assert "plain identifier" in capsys.readouterr().err
