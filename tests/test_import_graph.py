"""The import graph of nmt/ and study/, built from the source: no cycles, the core never imports
the platform, study/'s wings import one way (spec <- store <- analysis <- execution <- commands),
and every import inside a function says why it is not at the top."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("nmt", "study")
WINGS = ("spec", "store", "analysis", "execution")  # each may import the ones before it, never after


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


MODULES = all_modules()


def imported(node: ast.Import | ast.ImportFrom, importer: str) -> list[str]:
    """The project modules an import statement loads (a package's submodules named in
    ``from package import submodule`` included)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: resolved against the importer's package
            package = importer.split(".")
            package = package if MODULES[importer].name == "__init__.py" else package[:-1]
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
    found = []
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name:
            found.append(name)
    return found


def type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(module: str) -> tuple[set[str], list[tuple[int, list[str]]]]:
    """(modules imported when the module loads, [(line, modules) of each import inside a function])."""
    tree = ast.parse(MODULES[module].read_text())
    at_load: set[str] = set()
    in_functions: list[tuple[int, list[str]]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if type_checking_block(child):
                continue  # never executed: annotations only
            if isinstance(child, ast.Import | ast.ImportFrom):
                targets = imported(child, module)
                if in_function:
                    in_functions.append((child.lineno, targets))
                else:
                    at_load.update(targets)
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(tree, False)
    return at_load - {module}, in_functions


GRAPH = {module: imports_of(module) for module in MODULES}


def parents(module: str) -> set[str]:
    """Loading a.b.c loads a and a.b first."""
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), import-time edges only."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v][0] - parents(v):  # a package's __init__ loading first is not a cycle
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in MODULES:
        if module not in index:
            connect(module)
    return found


def wing(module: str) -> int:
    """0-3 for study's wings, 4 for its commands at the top; nmt modules are below them all."""
    parts = module.split(".")
    if parts[0] == "nmt":
        return -1
    return WINGS.index(parts[1]) if len(parts) > 2 and parts[1] in WINGS else len(WINGS)


def test_the_graph_is_read():
    # a guard against a scanner that finds nothing: these edges exist
    assert "nmt.config" in GRAPH["study.spec.loading"][0]
    assert any(target.startswith("study.store") for target in GRAPH["study.execution.driver"][0])
    assert len(MODULES) > 80


def test_no_import_cycles():
    assert cycles() == []


def test_the_core_never_imports_the_platform():
    offenders = [(module, target) for module, (at_load, in_functions) in GRAPH.items() if module.startswith("nmt")
                 for target in at_load | {t for _, ts in in_functions for t in ts} if target.startswith("study")]
    assert offenders == []


def test_wings_import_one_way():
    offenders = []
    for module, (at_load, in_functions) in GRAPH.items():
        if module.startswith("study"):
            for target in at_load | {t for _, ts in in_functions for t in ts}:
                if target.startswith("study") and target != "study" and wing(target) > wing(module):
                    offenders.append(f"{module} -> {target}")
                if wing(module) < len(WINGS) and wing(target) == len(WINGS) and target != "study":
                    offenders.append(f"{module} -> {target} (a command)")
    assert offenders == []


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_inside_functions_say_why(package):
    """An import inside a function says why it is not at the top (a Ray worker's start-up weight,
    an optional dependency), in a comment on its line or above the run of imports it belongs to:
    one that only dodges a cycle is a layering fault to fix, not to hide."""
    silent = []
    for module, (_, in_functions) in GRAPH.items():
        if not module.startswith(package):
            continue
        lines = MODULES[module].read_text().splitlines()
        for line, _ in in_functions:
            first = line - 1  # the first import of the run this one belongs to
            while first > 0 and lines[first - 1].strip().startswith(("from ", "import ")):
                first -= 1
            if not any("#" in text for text in lines[first:line]) and not lines[first - 1].strip().startswith("#"):
                silent.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {lines[line - 1].strip()}")
    assert silent == []
