"""The tests mirror the modules: every module of nmt/ and study/ with behaviour (one that defines a
function or a class; an ``__init__.py`` that only re-exports has none) has its own test file,
``tests/<package path>/test_<module>.py`` (``study/store/records.py``: ``tests/study/store/test_records.py``;
a package's ``__init__.py``: ``tests/nmt/test_cells.py`` for ``nmt/cells/__init__.py``), or is named in
the module docstring of a test file under tests/ that covers it, dotted (``study.store.records``) or as
a path (``study/store/records.py``). Read from the files alone: nothing here imports the modules."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("nmt", "study")
TESTS = ROOT / "tests"


def has_behaviour(path: Path) -> bool:
    """Whether the module defines a function or a class (constants and re-exports alone are not behaviour)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for node in ast.walk(tree))


def module_parts(path: Path) -> tuple[str, ...]:
    """``nmt/data/subword.py`` -> (nmt, data, subword); a package's ``__init__.py`` is the package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def own_test_file(parts: tuple[str, ...]) -> Path:
    return TESTS.joinpath(*parts[:-1], f"test_{parts[-1]}.py")


def docstrings_of_the_tests() -> str:
    """The module docstrings of every test file under tests/, together; this file's own is left out (its examples
    name modules it does not test)."""
    docstrings = (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
                  for path in sorted(TESTS.rglob("test_*.py")) if path.resolve() != Path(__file__).resolve())
    return "\n".join(docstrings)


def named_in(text: str, path: Path, parts: tuple[str, ...]) -> bool:
    """Whether ``text`` names the module, dotted or as its path, as a whole name: ``nmt.data`` is not named
    by ``nmt.data.subword``, though a full stop may end the sentence that names it."""
    dotted = re.escape(".".join(parts))
    file_path = re.escape(path.relative_to(ROOT).as_posix())
    return bool(re.search(rf"(?<![\w./])(?:{dotted}|{file_path})(?!\w|\.\w|/)", text))


def modules_without_a_test() -> list[str]:
    docstrings = docstrings_of_the_tests()
    missing = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = module_parts(path)
            if has_behaviour(path) and not own_test_file(parts).exists() and not named_in(docstrings, path, parts):
                missing.append(".".join(parts))
    return missing


def test_every_module_with_behaviour_has_a_test_file_or_is_named_in_ones_docstring():
    missing = modules_without_a_test()
    assert not missing, (
        f"{len(missing)} module(s) with behaviour and no test: {', '.join(missing)}. For each, add a test file "
        "tests/<package path>/test_<module>.py, or name the module (dotted, e.g. study.store.records, or as a path, "
        "study/store/records.py) in the module docstring of the test file that covers it.")


def test_a_module_is_named_only_as_a_whole_name():
    path = ROOT / "nmt" / "data" / "__init__.py"
    parts = ("nmt", "data")
    assert named_in("Covers nmt.data.", path, parts) and named_in("``nmt/data/__init__.py``", path, parts)
    assert not named_in("Covers nmt.data.subword", path, parts) and not named_in("nmt.database", path, parts)
    assert not named_in("tests/nmt/data/__init__.py", path, parts)
