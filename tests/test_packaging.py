"""The installed package and its console scripts: a wheel holds the built-in study files, the
nmt configs and the scripts, and an unpacked wheel finds its studies without the source tree;
``rnmt-study`` dispatches to the ``python -m`` commands with their help, errors and exit codes.

Modules covered here: ``study.cli``."""

from __future__ import annotations

import configparser
import importlib
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from nmt.cli import SCRIPT_NAMES
from study import cli

ROOT = Path(__file__).resolve().parents[1]
# what a build reads; copied, since building in the checkout would leave build/ and egg-info there
BUILD_SOURCES = ("pyproject.toml", "LICENSE", "README.md", "nmt", "study", "search_spaces")
BUILTIN_STUDIES = sorted(p.stem for p in (ROOT / "search_spaces").glob("*.yaml"))


def scripts_of_pyproject() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("setuptools", reason="building the wheel without build isolation needs setuptools")
    work = tmp_path_factory.mktemp("wheel")
    (work / "source").mkdir()
    for name in BUILD_SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, work / "source" / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, work / "source" / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-q", "-w", str(work / "dist"), str(work / "source")],
                           capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (found,) = (work / "dist").glob("*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """The wheel unpacked: the site-packages layout of a non-editable install."""
    target = tmp_path_factory.mktemp("site-packages")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    return target


def entry_points(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        parser = configparser.ConfigParser()
        parser.read_string(archive.read(name).decode("utf-8"))
    return dict(parser["console_scripts"])


def test_wheel_holds_the_study_files_the_configs_and_the_scripts(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    study_files = {p.relative_to(ROOT).as_posix() for p in (ROOT / "search_spaces").rglob("*.yaml")}
    assert any("multi30k/" in name for name in study_files)  # the nested folder is part of what is checked
    assert study_files <= names, sorted(study_files - names)
    configs = {p.relative_to(ROOT).as_posix() for p in (ROOT / "nmt" / "configs").glob("*.yaml")}
    assert configs and configs <= names, sorted(configs - names)
    assert {"search_spaces/__init__.py", "study/cli.py", "study/api.py", "nmt/cli.py"} <= names
    assert entry_points(wheel) == scripts_of_pyproject()
    # the license as an SPDX expression, and its text in the wheel
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode("utf-8")
        (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(license_file).decode("utf-8").startswith("MIT License")
    assert "License-Expression: MIT" in text.splitlines()


def test_every_console_script_names_a_function():
    scripts = scripts_of_pyproject()
    assert {"rnmt-study", "rnmt-train", "rnmt-translate", "rnmt-bench"} <= set(scripts)
    for script, target in scripts.items():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), script


def test_unpacked_wheel_finds_its_studies_without_the_source_tree(wheel, installed, tmp_path):
    # a folder of one's own studies named search_spaces/ in the current directory does not
    # replace the built-in ones
    (tmp_path / "search_spaces").mkdir()
    (tmp_path / "search_spaces" / "mine.yaml").write_text("name: mine\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(PYTHONPATH=str(installed), PYTHONDONTWRITEBYTECODE="1")

    where = subprocess.run([sys.executable, "-c", "import study, study.spec.model as s; print(study.__file__); "
                            "print(s.SPACES_DIR)"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120, check=False)
    assert where.returncode == 0, where.stderr[-3000:]
    assert where.stdout.split() == [str(installed / "study" / "__init__.py"), str(installed / "search_spaces")]

    listed = subprocess.run([sys.executable, "-m", "study.list"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:len(BUILTIN_STUDIES) + 1]] == BUILTIN_STUDIES

    # the console script as pip writes it: import the entry point's function, call it with no arguments
    module, function = entry_points(wheel)["rnmt-study"].split(":")
    script = (f"import sys; from {module} import {function}; sys.argv = ['rnmt-study', 'list']; "
              f"sys.exit({function}())")
    scripted = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
    assert scripted.returncode == 0, scripted.stderr[-3000:]
    assert scripted.stdout == listed.stdout
    assert "mine" not in listed.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["search_spaces"]  # listing writes nothing


# ---------------------------------------------------------------------------
# the rnmt-study dispatcher


def test_help_lists_every_command_with_its_summary(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: rnmt-study COMMAND")
    for name, command in cli.STUDY_COMMANDS.items():
        assert f"  {name}" in out and command.summary in out
    assert {"run", "list", "table", "bench"} <= set(cli.STUDY_COMMANDS)


def test_list_runs_study_list(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(f"\n{name} " in out for name in BUILTIN_STUDIES)
    assert "run one with: python -m study.run NAME" in out


@pytest.mark.parametrize("argv, expected", [
    (["rn"], "error: unknown command 'rn' (did you mean 'run'?); rnmt-study has: run, list"),
    ([], "error: rnmt-study needs a command: run, list"),
    (["--verbose"], "error: unknown command '--verbose'; rnmt-study has: run, list"),
])
def test_missing_or_unknown_command_is_one_line_and_exit_2(capsys, argv, expected):
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith(expected), captured.err


def test_bad_input_gives_the_same_line_and_exit_code_as_python_m(capsys):
    assert cli.main(["run", "no_such_study"]) == 2
    line = capsys.readouterr().err
    module = subprocess.run([sys.executable, "-m", "study.run", "no_such_study"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, check=False)
    assert module.returncode == 2 and module.stderr == line and line.count("\n") == 1


def help_text(function, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as stopped:
        function(argv)
    assert stopped.value.code == 0
    return capsys.readouterr().out


def test_subcommand_help_is_the_module_help_under_the_script_name(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps to the terminal width
    commands = [(f"rnmt-study {name}", cli.main, [name], c.module) for name, c in cli.STUDY_COMMANDS.items()]
    commands += [(f"rnmt-analyze {name}", cli.analyze, [name], c.module) for name, c in cli.ANALYSIS_COMMANDS.items()]
    commands += [("rnmt-train", cli.train, [], "nmt.train"), ("rnmt-translate", cli.translate, [], "nmt.translate"),
                 ("rnmt-bench", cli.bench, [], "nmt.bench")]
    for prog, function, argv, module in commands:
        script_help = help_text(function, [*argv, "--help"], capsys)
        module_help = help_text(importlib.import_module(module).main, ["--help"], capsys)
        assert script_help.startswith(f"usage: {prog} "), (prog, script_help[:200])
        assert module_help.startswith(f"usage: python -m {module} "), (module, module_help[:200])
        # the usage lines wrap differently (the names differ in length); the rest is the same
        assert script_help.split("\n\n", 1)[1] == module_help.split("\n\n", 1)[1], prog
    assert not SCRIPT_NAMES  # the script's name ends with its command


def test_every_command_and_console_script_answers_version(capsys):
    from nmt.cli import package_version

    version = package_version()
    assert version == tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]["version"]
    commands = [(f"rnmt-study {name}", cli.main, [name], c.module) for name, c in cli.STUDY_COMMANDS.items()]
    commands += [(f"rnmt-analyze {name}", cli.analyze, [name], c.module) for name, c in cli.ANALYSIS_COMMANDS.items()]
    commands += [("rnmt-train", cli.train, [], "nmt.train"), ("rnmt-translate", cli.translate, [], "nmt.translate"),
                 ("rnmt-bench", cli.bench, [], "nmt.bench")]
    for prog, function, argv, module in commands:
        assert help_text(function, [*argv, "--version"], capsys) == f"{prog} {version}\n"
        assert help_text(importlib.import_module(module).main, ["--version"], capsys) == f"python -m {module} {version}\n"
    synthetic = importlib.import_module("nmt.data.synthetic")
    assert help_text(synthetic._main, ["--version"], capsys) == f"python -m nmt.data.synthetic {version}\n"
    for function, prog in ((cli.main, "rnmt-study"), (cli.analyze, "rnmt-analyze")):
        assert function(["--version"]) == 0 and capsys.readouterr().out == f"{prog} {version}\n"
    assert not SCRIPT_NAMES
