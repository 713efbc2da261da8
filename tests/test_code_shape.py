"""The shape of the code a newcomer meets: study/ shows its entry points at the top and its wings
below, and no function runs past 60 lines unless its docstring says why."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENTRY_POINTS = {"__init__", "api", "cli", "run", "table", "list", "speed", "compare", "report", "bench"}
WINGS = {"spec", "store", "analysis", "execution"}
LONGEST = 60


def test_the_top_of_study_holds_only_its_entry_points_and_wings():
    modules = {path.stem for path in (ROOT / "study").glob("*.py")}
    folders = {path.name for path in (ROOT / "study").iterdir() if path.is_dir() and (path / "__init__.py").exists()}
    assert modules == ENTRY_POINTS and folders == WINGS


# the one declaration of a run's options, from which study.run builds its parser (study.spec.options)
PARSING = {"run": {("study.spec.options", "add_arguments"), ("study.spec.options", "from_arguments")}}


def test_commands_hold_argument_parsing_and_one_library_call():
    """A command's main() reaches the library through study.api only; study.run's parser is derived
    from the declared options, and it imports nothing else of them."""
    for name in ENTRY_POINTS - {"__init__", "api", "cli"}:
        tree = ast.parse((ROOT / "study" / f"{name}.py").read_text(encoding="utf-8"))
        imports = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
        parsing = {(node.module, alias.name) for node in imports if node.module != "study.api" for alias in node.names
                   if node.module.startswith("study")}
        assert parsing == PARSING.get(name, set()), name
        assert "study.api" in {node.module for node in imports}, name


def test_no_function_runs_past_60_lines_without_a_reason():
    long = []
    for path in sorted([*(ROOT / "nmt").rglob("*.py"), *(ROOT / "study").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > LONGEST and f"more than {LONGEST} lines" not in " ".join((ast.get_docstring(node) or "").split()):
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


MOST_PARAMETERS = 8


def test_no_function_in_study_takes_more_than_8_parameters():
    """Options travel as one typed object (study.spec.options), a run's shared state as one StudyRun: a
    function that needs more than 8 values is missing such an object."""
    crowded = []
    for path in sorted((ROOT / "study").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                arguments = node.args
                names = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
                count = len([name for name in names if name not in ("self", "cls")])
                count += (arguments.vararg is not None) + (arguments.kwarg is not None)
                if count > MOST_PARAMETERS:
                    crowded.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({count} parameters)")
    assert crowded == []


def test_no_runs_of_three_blank_lines():
    """Two blank lines separate top-level definitions; three or more are noise that hides structure."""
    runs = [f"{path.relative_to(ROOT)}:{text[:match.start()].count(chr(10)) + 2}"
            for folder in ("nmt", "study", "tests", "scripts") for path in sorted((ROOT / folder).rglob("*.py"))
            for text in [path.read_text(encoding="utf-8")] for match in re.finditer(r"\n\n\n\n", text)]
    assert runs == []
