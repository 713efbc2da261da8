"""A run's options, declared once (study.spec.options): study.run's parser, run_study's keywords and the
command line command.txt records are derived from the declarations and agree with each other; ranges and
combinations are checked for every caller alike.

Modules covered here: ``study.spec.options`` and ``study.run``."""

from __future__ import annotations

import inspect
import shlex
from pathlib import Path

import pytest

from nmt.errors import UserError
from study.api import dry_run, run_study
from study.run import build_parser
from study.spec.options import (
    Execution,
    RunOptions,
    StudyChoice,
    declared,
    flag_of,
    from_arguments,
    from_keywords,
    keyword_names,
)

# one value of each option's type, unlike its default
SAMPLES = {bool: True, int: 3, float: 0.5, str: "a b", Path: Path("some dir")}


def sample_keywords() -> dict:
    """Every keyword of run_study with a value unlike its default (repeated options with two values)."""
    keywords = {}
    for _, name, meta in declared():
        if meta["flag"] == "name":
            continue
        keywords[name] = ("x=1", "y=2") if meta["repeated"] else SAMPLES[meta["kind"]]
    keywords.pop("fresh")  # excludes --resume and --extend
    keywords["langs"] = "en-de"
    return keywords


def test_every_option_survives_the_round_trip_from_python_to_the_command_line_and_back():
    """run_study's keywords -> the command line command.txt records -> study.run's parser -> the same options."""
    options = from_keywords("cells", sample_keywords())
    words = shlex.split(options.command_line())
    assert words[:3] == ["python", "-m", "study.run"]
    parsed = from_arguments(build_parser().parse_args(words[3:]), command="typed")
    assert parsed.what == options.what and parsed.where == options.where and parsed.how == options.how
    assert parsed.report.verbose and parsed.report.command == "typed"


def test_the_parser_run_study_and_its_help_are_derived_from_the_declarations():
    parser = build_parser()
    flags = {option for action in parser._actions for option in action.option_strings}
    for _, name, meta in declared():
        if meta["flag"] != "name":
            assert flag_of(name, meta) in flags
            assert f"``{name}``: {meta['help']}" in run_study.__doc__
    assert flags - {flag_of(name, meta) for _, name, meta in declared()} == {"-h", "--help", "--version", "--dry-run", "--debug"}
    signature = inspect.signature(run_study)
    assert list(signature.parameters) == ["name_or_path", *keyword_names()]
    assert inspect.signature(dry_run).parameters == signature.parameters


@pytest.mark.parametrize("keywords, message", [
    ({"max_trials": 0}, "--max-trials 0: must be >= 1"),
    ({"max_concurrent": -1}, "--max-concurrent -1: must be >= 1"),
    ({"gpus_per_trial": -0.5}, "--gpus-per-trial -0.5: must be >= 0"),
    ({"time_limit": 0.0}, "--time-limit 0: must be > 0"),
    ({"storage": "s3://lab/x", "lease_seconds": 2.0}, "--lease-seconds 2: must be >= 3"),
    ({"resume": True, "fresh": True}, "--resume and --fresh exclude each other"),
    ({"extend": True, "fresh": True}, "--extend and --fresh exclude each other"),
    ({"fresh": True, "storage": "s3://lab/x"}, "--fresh with --storage s3://lab/x: the tool deletes nothing"),
    ({"langs": "en-de"}, "--langs needs --data-dir"),
])
def test_ranges_and_combinations_are_one_line_for_python_and_the_command_line(keywords, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        from_keywords("cells", keywords).check()
    words = shlex.split(from_keywords("cells", keywords).command_line())[3:]
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        from_arguments(build_parser().parse_args(words), command="").check()


@pytest.mark.parametrize("keywords, message", [
    ({"smoke": "yes"}, "smoke='yes': expected True or False"),
    ({"cpus": 2.0}, "cpus=2.0: expected a whole number"),
    ({"gpus_per_trial": "half"}, "gpus_per_trial='half': expected a number"),
    ({"results": 3}, "results=3: expected a path"),
    ({"address": ""}, "address='': expected a non-empty string"),
    ({"cpu": 2}, "unknown argument 'cpu'; run_study takes smoke, overrides"),
])
def test_a_keyword_of_the_wrong_type_or_name_is_one_line(keywords, message):
    with pytest.raises(UserError, match=message):
        from_keywords("cells", keywords)


def test_defaults_and_the_results_directory():
    options = RunOptions(what=StudyChoice(study="cells"))
    assert options.command_line() == "python -m study.run cells"
    assert options.results_dir() == Path("results") and options.results_flag() == ""
    smoke = RunOptions(what=StudyChoice(study="cells", smoke=True))
    assert smoke.results_dir() == Path("results/smoke") and smoke.results_flag() == " --results results/smoke"
    assert RunOptions(how=Execution(extend=True)).continues and not RunOptions().continues


def test_the_resume_command_after_a_stop_keeps_every_option_of_a_python_call():
    """A run_study call that stops is told the study.run command that continues it, its options kept."""
    from study.execution.driver import continue_command
    from study.spec.loading import load_study

    options = from_keywords("cells", {"smoke": True, "seeds": 2, "overrides": ("model.hidden=8",)})
    assert continue_command(load_study("cells"), options) == \
        "python -m study.run cells --smoke --set model.hidden=8 --seeds 2 --resume"
