"""The library behind every ``python -m study.*`` command, for Python (a notebook, a script): run,
resume and extend studies, dry-run them, rebuild and load their tables, time their rows,
compare studies, write reports and list what is stored. Each command parses its arguments and
makes one call here; progress goes to a ``say`` callback (``print`` by default), bad input
raises ``nmt.errors.UserError`` with the line the command prints.

::

    from study.api import load_table, run_study

    table = run_study("ablation_srnmt", smoke=True, cpus=2)    # = python -m study.run ablation_srnmt --smoke --cpus 2
    table[["label", "bleu_mean", "bleu_std", "delta", "p_value"]]

    table = run_study("my_study.yaml", seeds=3, overrides={"model.hidden": 128, "budget.epochs": 20})
    load_table("ablation_srnmt")                               # a finished study's table, nothing runs

``run_study`` runs the study in this process exactly as ``python -m study.run`` does: the same
checks, the same Ray Tune trials and MLflow runs, the same files under ``results/<study>/``
(tables, plots, ``study.json``, and ``command.txt`` with the ``python -m study.run`` command
line that reproduces the run from a shell). Relative paths (``results``, ``data_dir``) are
relative to the current directory, as on the command line.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from nmt.errors import UserError
from nmt.fileio import check_writable_dir
from study.analysis.comparison import Comparison
from study.analysis.comparison import compare_studies as compare_stored
from study.analysis.exports import RebuiltExports, rebuild_exports
from study.analysis.html_report import write_study_report
from study.analysis.listing import list_studies, show_trials
from study.analysis.progress import study_name
from study.execution.driver import run_study as run_spec
from study.execution.dry_run_driver import dry_run_study as dry_run_spec
from study.execution.overhead_bench import concurrency_bench, fixed_cost
from study.execution.row_timing import time_study
from study.execution.study_data import corpus_in
from study.spec.loading import load_study, study_path
from study.spec.model import MAX_TRIALS, checked_study_name
from study.spec.options import GROUPS, RunOptions, declared, from_keywords, keyword_names, path_text, print_line, typed_value
from study.store.object_store import checked_uri
from study.store.study_transfer import pull_studies

if TYPE_CHECKING:  # pandas is imported when a table is read, not with this module
    import pandas

StrPath = str | os.PathLike

__all__ = ["RunOptions", "StudyStopped", "run_study", "dry_run", "run_request", "load_table", "rebuild_tables",
           "time_study", "compare_studies", "write_report", "study_listing", "list_studies", "show_trials", "concurrency_bench",
           "fixed_cost"]


class StudyStopped(KeyboardInterrupt):
    """A study run stopped before it finished (SIGINT, SIGTERM): its finished trials are kept and
    ``resume=True`` continues it. ``exit_code`` is 128 + the signal, as the command exits."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def run_request(options: RunOptions, dry_run: bool = False) -> int:
    """Check, load and run (or dry-run) one requested study; returns the exit code of the run (0, or
    128 + the signal that stopped its trials). Bad input raises UserError before anything runs."""
    if options.where.storage is not None:  # the store's own check (study.spec may not import study.store)
        checked_uri(options.where.storage)
    options.check()
    what = options.what
    corpus = corpus_in(what.data_dir, what.langs) if what.data_dir else None
    spec = load_study(what.study, list(what.overrides), smoke_run=what.smoke, max_trials=what.max_trials or MAX_TRIALS,
                      corpus=corpus, seeds=what.seeds)
    return (dry_run_spec if dry_run else run_spec)(spec, options)


def run_study(name_or_path: StrPath, **options) -> pandas.DataFrame:
    """Run a study and return its table: one row per configuration, the columns of
    ``results/<study>/table.csv`` (``label``, ``bleu_mean``, ``bleu_std``, ``ci_low``,
    ``ci_high``, ``delta``, ``p_value``, ``n``, ...).

    ``name_or_path`` is a built-in study (``python -m study.list``) or a study ``.yaml`` file. Every
    keyword argument is the ``python -m study.run`` option of the same name (listed below, from its
    declaration in ``study.spec.options``), except:

    - ``overrides``: study or trial config keys to change, as ``{"model.hidden": 128,
      "budget.epochs": 20}`` or as ``--set`` strings ``["model.hidden=128"]``. A string value is
      read as YAML, like on the command line (``"3"`` is the number 3).
    - ``say``: where the progress lines and the final table go (default: printed); warnings go to
      stderr.

    Raises ``nmt.errors.UserError`` on bad input, before anything is trained or written, and
    ``StudyStopped`` (a ``KeyboardInterrupt``) when the run was stopped (the kernel interrupted,
    SIGTERM): its finished trials are kept and ``resume=True`` continues it.
    """
    request = _options(name_or_path, options)
    exit_code = run_request(request)
    name = study_path(request.what.study).stem  # a study's name is its file's name (checked when it loaded)
    if exit_code != 0:
        raise StudyStopped(f"study {name} stopped before it finished (exit code {exit_code}); its finished trials "
                           f"are kept: run_study({request.what.study!r}, resume=True, ...) with the same other "
                           f"arguments continues it", exit_code)
    return load_table(name, request.results_dir())


def dry_run(name_or_path: StrPath, **options) -> int:
    """What ``run_study`` with the same arguments would train, and an estimate of its time, printed;
    trains and writes nothing (``python -m study.run NAME --dry-run``)."""
    return run_request(_options(name_or_path, options), dry_run=True)


def _options(name_or_path: StrPath, keywords: dict[str, Any]) -> RunOptions:
    """run_study's keyword arguments as the run's options, ``overrides`` as ``--set`` strings."""
    if "overrides" in keywords:
        keywords = {**keywords, "overrides": override_strings(keywords["overrides"])}
    return from_keywords(name_or_path, keywords)


def _signature_and_arguments() -> None:
    """run_study's and dry_run's signatures, and the argument list of run_study's docstring, from the
    options' declarations (``help(run_study)`` and an editor show every option)."""
    keywords = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=_default(name))
                for name in keyword_names()]
    signature = inspect.Signature([inspect.Parameter("name_or_path", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                                   *keywords])
    run_study.__signature__ = signature
    dry_run.__signature__ = signature.replace(return_annotation=int)
    lines = [f"    - ``{name}``: {meta['help']}." for _, name, meta in declared() if meta["flag"] != "name"]
    if run_study.__doc__:  # None under python -OO
        run_study.__doc__ += "\n    Options:\n\n" + "\n".join(lines) + "\n"


def _default(name: str) -> Any:
    if name == "say":
        return print_line
    return next(item.default for cls in GROUPS.values() for item in dataclasses.fields(cls) if item.name == name)


_signature_and_arguments()


def fetch_studies(storage: str, names: Iterable[StrPath] | None = None, results: StrPath = "results",
                  say: Callable[[str], None] = print) -> dict[str, int]:
    """Bring studies run with ``--storage URI`` (``s3://bucket/prefix``) from that store into ``results``
    (every study there when ``names`` is None), so that the reading commands and functions work on them
    from any machine; {study: finished trials}. Nothing is written into the store."""
    uri = typed_value("storage", storage, str)
    wanted = None if names is None else [study_name(path_text("name", name)) for name in names]
    root = Path(path_text("results", results))
    check_writable_dir(root, "--results")  # a file there is one line, before anything comes down
    fetched = pull_studies(uri, wanted, root)
    for name, finished in fetched.items():
        say(f"storage: {uri}: {name}: {finished} finished trial(s) into {root / name}")
    return fetched


def study_listing(name: StrPath | None = None, results: Iterable[StrPath] | None = None,
                  storage: str | None = None) -> list[str]:
    """The built-in studies, their size and budget and which results of each exist (``python -m study.list``);
    with ``name``, where each trial of that study stands (``python -m study.list NAME``). ``results``: the
    directories to look in (default: results, results/smoke, results/reference); ``storage``: an object store
    whose studies (or ``name``) are copied into the first of them first."""
    if isinstance(results, str | os.PathLike):  # one directory, not the characters of its name
        results = [results]
    places = None if results is None else [Path(path_text("results", place)) for place in results] or None
    if storage is not None:
        fetch_studies(storage, [name] if name else None, (places or [Path("results")])[0])
    study = None if name is None else path_text("name", name)
    return show_trials(places, study) if study else list_studies(places)


def compare_studies(sources: Iterable[StrPath], results: StrPath = "results", out: StrPath | None = None,
                    reference: str | None = None, title: str | None = None,
                    storage: str | None = None) -> tuple[Comparison, list[Path]]:
    """Compare stored studies (names under ``results`` or result directories) in one table and figure, written
    to ``out`` (default: under ``results/compare/``); ``reference``: the row every difference is measured
    against; ``storage``: the studies' ``--storage`` URI, copied into ``results`` first (``python -m
    study.compare``)."""
    names = [path_text("source", source) for source in sources]
    if storage is not None:
        fetch_studies(storage, names, results)
    return compare_stored(names, Path(path_text("results", results)),
                          out=None if out is None else Path(path_text("out", out)), reference=reference, title=title)


def rebuild_tables(name: StrPath, results: StrPath = "results", say: Callable[[str], None] = print,
                   storage: str | None = None) -> RebuiltExports:
    """Rebuild a study's tables, plots and report from its stored trials, training nothing
    (``python -m study.table NAME``); returns what was written and the table. ``storage``: the
    study's ``--storage`` URI, read from there (``fetch_studies``)."""
    if storage is not None:
        fetch_studies(storage, [name], results, say)
    return rebuild_exports(Path(path_text("results", results)), path_text("name", name), say=say)


def write_report(name: str, results: StrPath = "results") -> Path:
    """(Re)write ``results/NAME/report.html`` from stored results (``python -m study.report``)."""
    return write_study_report(name, Path(path_text("results", results)))


def load_table(name: StrPath, results: StrPath = "results", storage: str | None = None) -> pandas.DataFrame:
    """The table of a study that ran (``<results>/<name>/table.csv``) as a DataFrame, without
    running anything: ``load_table("cells", results="results/reference")`` reads a committed
    reference study, ``load_table("cells", results="results/smoke")`` a ``--smoke`` check.
    ``name`` may also be the study's ``.yaml`` file. Raises ``nmt.errors.UserError`` when the
    directory holds no table of that study. ``storage``: the study's ``--storage`` URI, its table read
    from there (``fetch_studies``)."""
    # pandas loads when a table is read, not with the API
    import pandas as pd

    if storage is not None:
        fetch_studies(storage, [name], results, say=lambda line: None)


    text = path_text("name", name)
    study = Path(text).stem if text.endswith((".yaml", ".yml")) else text
    checked_study_name(study)  # also keeps the path inside the results directory
    path = Path(path_text("results", results)) / study / "table.csv"
    if not path.is_file():
        raise UserError(f"study {study}: no table in {results} ({path} not found); run it with "
                        f"run_study({study!r}) (or python -m study.run {study}), or rebuild the table from stored "
                        f"results with python -m study.table {study}")
    return pd.read_csv(path)


def override_strings(overrides: Mapping[str, Any] | Iterable[str] | str) -> list[str]:
    """``--set`` strings: ``{"model.hidden": 128}`` -> ``["model.hidden=128"]``; a string stays
    (one override), strings in a list stay."""
    if isinstance(overrides, str):
        return [overrides]
    if isinstance(overrides, Mapping):
        return [f"{key}={yaml_text(key, value)}" for key, value in overrides.items()]
    try:
        items = list(overrides)
    except TypeError:
        raise UserError(f"overrides={overrides!r}: expected a dict of keys and values or a list of "
                        f"'KEY=VALUE' strings") from None
    for item in items:
        if not isinstance(item, str):
            raise UserError(f"overrides: {item!r}: expected a 'KEY=VALUE' string, e.g. 'model.hidden=128' (or "
                            f"pass a dict: {{'model.hidden': 128}})")
    return items


def yaml_text(key: str, value: Any) -> str:
    """A Python value as the YAML text ``--set`` reads back as that value (a string stays a string:
    "no" is not read as false, "a: b" not as a mapping)."""
    if not _plain(value):
        raise UserError(f"overrides: {key}={value!r}: expected a number, bool, None, string, list or dict")
    # PyYAML writes floats so that YAML reads them back as floats (1.0e-05; JSON's 1e-05 reads as a string)
    return yaml.safe_dump(value, default_flow_style=True, width=float("inf")).removesuffix("\n...\n").strip()


def _plain(value: Any) -> bool:
    """A value YAML writes and reads back unchanged: finite numbers, bools, None, strings, and lists
    and dicts of those."""
    if isinstance(value, float):
        return math.isfinite(value)
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False
