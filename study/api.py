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

import math
import os
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from nmt.errors import UserError
from nmt.fileio import check_writable_dir
from study.analysis.comparison import compare_studies
from study.analysis.exports import RebuiltExports, rebuild_exports
from study.analysis.html_report import write_study_report
from study.analysis.listing import list_studies, show_trials
from study.analysis.progress import study_name
from study.execution.driver import corpus_in
from study.execution.driver import dry_run_study as dry_run_spec
from study.execution.driver import run_study as run_spec
from study.execution.overhead_bench import concurrency_bench, fixed_cost
from study.execution.row_timing import time_study
from study.spec.loading import load_study, study_path
from study.spec.model import MAX_TRIALS, checked_study_name
from study.spec.options import RunOptions, print_line
from study.store.object_store import checked_uri
from study.store.study_transfer import pull_studies

if TYPE_CHECKING:  # pandas is imported when a table is read, not with this module
    import pandas

StrPath = str | os.PathLike
SMOKE_RESULTS = Path("results") / "smoke"

__all__ = ["StudyRequest", "StudyStopped", "run_study", "dry_run", "run_request", "load_table", "rebuild_tables",
           "time_study", "compare_studies", "write_report", "list_studies", "show_trials", "concurrency_bench",
           "fixed_cost"]


class StudyStopped(KeyboardInterrupt):
    """A study run stopped before it finished (SIGINT, SIGTERM): its finished trials are kept and
    ``resume=True`` continues it. ``exit_code`` is 128 + the signal, as the command exits."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class StudyRequest:
    """One run of a study as asked for: the options of ``python -m study.run``, one field each."""

    study: str  # a built-in study's name or a study .yaml file
    smoke: bool = False
    overrides: list[str] = field(default_factory=list)  # "KEY=VALUE" strings, as --set
    seeds: int | None = None  # seeds per configuration (as --set seeds=N)
    results: Path | None = None  # default: results/, results/smoke/ for smoke runs
    resume: bool = False
    extend: bool = False
    fresh: bool = False
    cpus: int | None = None
    max_concurrent: int | None = None
    gpus_per_trial: float | None = None
    address: str | None = None
    tracking_uri: str | None = None
    storage: str | None = None  # s3://BUCKET/PREFIX (--storage)
    data_dir: Path | None = None
    langs: str | None = None
    max_trials: int | None = None
    reuse_from: tuple[str, ...] = ()
    verbose: bool = False
    command: str | None = None  # the command line recorded in command.txt (default: the equivalent one)
    say: Callable[[str], None] = print_line  # where the run's progress lines and table go

    def check(self) -> None:
        """The options' ranges and combinations, before anything loads."""
        for flag, value in (("--max-concurrent", self.max_concurrent), ("--cpus", self.cpus),
                            ("--max-trials", self.max_trials)):
            if value is not None and value < 1:
                raise UserError(f"{flag} {value}: must be >= 1")
        if self.gpus_per_trial is not None and self.gpus_per_trial < 0:
            raise UserError(f"--gpus-per-trial {self.gpus_per_trial}: must be >= 0")
        if self.fresh and (self.resume or self.extend):
            flag = "--resume" if self.resume else "--extend"
            raise UserError(f"{flag} and --fresh exclude each other: continue the study, or start it over")
        if self.storage is not None:
            checked_uri(self.storage)
        if self.fresh and self.storage:
            raise UserError(f"--fresh with --storage {self.storage}: the tool deletes nothing in an object store; "
                            "remove the study's objects there yourself, or choose another prefix")
        if self.langs and not self.data_dir:
            raise UserError("--langs needs --data-dir (the directory of the corpus)")

    def results_dir(self) -> Path:
        if self.results is not None:
            return self.results
        return SMOKE_RESULTS if self.smoke else Path("results")

    def command_line(self) -> str:
        """The ``python -m study.run`` command that asks for this run, as command.txt records it
        (provenance text for a shell; nothing parses it)."""
        if self.command is not None:
            return self.command
        words = [] if self.study.startswith("-") else [self.study]
        words += ["--smoke"] if self.smoke else []
        for override in self.overrides:
            words += _option("--set", override)
        for flag, value in (("--seeds", self.seeds), ("--max-concurrent", self.max_concurrent),
                            ("--max-trials", self.max_trials),
                            ("--gpus-per-trial", self.gpus_per_trial), ("--cpus", self.cpus),
                            ("--address", self.address), ("--tracking-uri", self.tracking_uri), ("--storage", self.storage),
                            ("--results", self.results), ("--data-dir", self.data_dir), ("--langs", self.langs)):
            if value is not None:
                words += _option(flag, str(value))
        for study in self.reuse_from:
            words += _option("--reuse-from", study)
        words += [flag for flag, on in (("--resume", self.resume), ("--extend", self.extend),
                                        ("--fresh", self.fresh), ("--verbose", self.verbose)) if on]
        words += ["--", self.study] if self.study.startswith("-") else []
        return "python -m study.run " + " ".join(shlex.quote(word) for word in words)

    def options(self) -> RunOptions:
        return RunOptions(results=self.results_dir(), resume=self.resume or self.extend, extend=self.extend,
                          fresh=self.fresh, address=self.address, num_cpus=self.cpus,
                          max_concurrent=self.max_concurrent, gpus_per_trial=self.gpus_per_trial,
                          tracking_uri=self.tracking_uri, storage=self.storage, data_dir=self.data_dir,
                          langs=self.langs,
                          verbose=self.verbose, command=self.command_line(), reuse_from=tuple(self.reuse_from),
                          say=self.say)


def run_request(request: StudyRequest, dry_run: bool = False) -> int:
    """Check, load and run (or dry-run) one requested study; returns the exit code of the run (0, or
    128 + the signal that stopped its trials). Bad input raises UserError before anything runs."""
    request.check()
    corpus = corpus_in(request.data_dir, request.langs) if request.data_dir else None
    seeds = [f"seeds={request.seeds}"] if request.seeds is not None else []
    spec = load_study(request.study, request.overrides + seeds, smoke_run=request.smoke,
                      max_trials=request.max_trials or MAX_TRIALS, corpus=corpus)
    return (dry_run_spec if dry_run else run_spec)(spec, request.options())


def _request(name_or_path: StrPath, smoke: bool, seeds: int | None, overrides, results: StrPath | None,
             resume: bool, extend: bool, fresh: bool, cpus: int | None, max_concurrent: int | None,
             gpus_per_trial: float | None, address: str | None, tracking_uri: str | None, data_dir: StrPath | None,
             langs: str | None, max_trials: int | None, reuse_from: Iterable[str], verbose: bool,
             say: Callable[[str], None] = print_line, storage: str | None = None) -> StudyRequest:
    """Keyword arguments as a StudyRequest, each checked for its type (a UserError here, not a
    confusing failure later in the middle of a notebook)."""
    values = {}
    for keyword, value, kind in (("seeds", seeds, int), ("max_concurrent", max_concurrent, int),
                                 ("max_trials", max_trials, int), ("gpus_per_trial", gpus_per_trial, float),
                                 ("cpus", cpus, int), ("address", address, str), ("tracking_uri", tracking_uri, str),
                                 ("storage", storage, str),
                                 ("langs", langs, str)):
        values[keyword] = None if value is None else kind(checked(keyword, value, kind))
    return StudyRequest(study=checked_path("name_or_path", name_or_path), smoke=smoke,
                        overrides=override_strings(overrides),
                        results=None if results is None else Path(checked_path("results", results)),
                        resume=resume, extend=extend, fresh=fresh,
                        data_dir=None if data_dir is None else Path(checked_path("data_dir", data_dir)),
                        reuse_from=tuple(reuse_from), verbose=verbose, say=say, **values)


def run_study(name_or_path: StrPath, *, smoke: bool = False, seeds: int | None = None,
              overrides: Mapping[str, Any] | Iterable[str] | str = (), results: StrPath | None = None,
              resume: bool = False, extend: bool = False, fresh: bool = False, cpus: int | None = None,
              max_concurrent: int | None = None, gpus_per_trial: float | None = None, address: str | None = None,
              tracking_uri: str | None = None, data_dir: StrPath | None = None, langs: str | None = None,
              max_trials: int | None = None, reuse_from: Iterable[str] = (), verbose: bool = False,
              say: Callable[[str], None] = print_line, storage: str | None = None) -> pandas.DataFrame:
    """Run a study and return its table: one row per configuration, the columns of
    ``results/<study>/table.csv`` (``label``, ``bleu_mean``, ``bleu_std``, ``ci_low``,
    ``ci_high``, ``delta``, ``p_value``, ``n``, ...).

    Every argument is the ``python -m study.run`` option of the same name (see its ``--help``):

    - ``name_or_path``: a built-in study (``python -m study.list``) or a study ``.yaml`` file.
    - ``smoke``: tiny data, model and budget, one seed: a check of the study file in minutes,
      not a result. Its results go to ``results/smoke/`` unless ``results`` is given.
    - ``seeds``: seeds per configuration.
    - ``overrides``: study or trial config keys to change, as ``{"model.hidden": 128,
      "budget.epochs": 20}`` or as ``--set`` strings ``["model.hidden=128"]``. A string value is
      read as YAML, like on the command line (``"3"`` is the number 3).
    - ``results``: the results directory (default ``results``, ``results/smoke`` with ``smoke``).
    - ``resume`` / ``extend`` / ``fresh``: continue an interrupted study / continue one that
      gained rows, seeds or samples / delete the study's results and start over.
    - ``cpus``, ``max_concurrent``, ``gpus_per_trial``: the local Ray instance's CPUs, at most
      this many trials at once, the GPU share of each trial.
    - ``address``: run on an existing Ray cluster (``"10.0.0.5:6379"``, ``"auto"``).
    - ``tracking_uri``: an MLflow tracking server instead of ``<results>/mlflow.db``.
    - ``storage``: ``"s3://bucket/prefix"``: the trial store and exports are kept there too, for a
      cluster without a shared file system (``--storage``).
    - ``data_dir``, ``langs``: train on the parallel corpus in ``data_dir`` with language pair
      ``langs`` (``"en-de"``) instead of the study's data.
    - ``max_trials``: refuse a study of more trials (default 2000).
    - ``reuse_from``: studies whose finished trials this one shares instead of training them again.
    - ``verbose``: show the trials' own output.
    - ``say``: where the progress lines and the final table go (default: printed); warnings go to
      stderr.

    Raises ``nmt.errors.UserError`` on bad input, before anything is trained or written, and
    ``StudyStopped`` (a ``KeyboardInterrupt``) when the run was stopped (the kernel interrupted,
    SIGTERM): its finished trials are kept and ``resume=True`` continues it.
    """
    request = _request(name_or_path, smoke, seeds, overrides, results, resume, extend, fresh, cpus, max_concurrent,
                       gpus_per_trial, address, tracking_uri, data_dir, langs, max_trials, reuse_from, verbose, say,
                       storage)
    exit_code = run_request(request)
    name = study_path(request.study).stem  # a study's name is its file's name (checked when it loaded)
    if exit_code != 0:
        raise StudyStopped(f"study {name} stopped before it finished (exit code {exit_code}); its finished trials "
                           f"are kept: run_study({request.study!r}, resume=True, ...) with the same other arguments "
                           f"continues it", exit_code)
    return load_table(name, request.results_dir())


def dry_run(name_or_path: StrPath, **kwargs) -> int:
    """What ``run_study`` with the same arguments would train, and an estimate of its time, printed;
    trains and writes nothing (``python -m study.run NAME --dry-run``)."""
    defaults = dict(smoke=False, seeds=None, overrides=(), results=None, resume=False, extend=False, fresh=False,
                    cpus=None, max_concurrent=None, gpus_per_trial=None, address=None, tracking_uri=None,
                    data_dir=None, langs=None, max_trials=None, reuse_from=(), verbose=False, say=print_line,
                    storage=None)
    unknown = set(kwargs) - set(defaults)
    if unknown:
        raise UserError(f"dry_run: unknown argument {sorted(unknown)[0]!r}; it takes run_study's arguments")
    return run_request(_request(name_or_path, **{**defaults, **kwargs}), dry_run=True)


def fetch_studies(storage: str, names: Iterable[StrPath] | None = None, results: StrPath = "results",
                  say: Callable[[str], None] = print) -> dict[str, int]:
    """Bring studies run with ``--storage URI`` (``s3://bucket/prefix``) from that store into ``results``
    (every study there when ``names`` is None), so that the reading commands and functions work on them
    from any machine; {study: finished trials}. Nothing is written into the store."""
    uri = checked("storage", storage, str)
    wanted = None if names is None else [study_name(checked_path("name", name)) for name in names]
    root = Path(checked_path("results", results))
    check_writable_dir(root, "--results")  # a file there is one line, before anything comes down
    fetched = pull_studies(uri, wanted, root)
    for name, finished in fetched.items():
        say(f"storage: {uri}: {name}: {finished} finished trial(s) into {root / name}")
    return fetched


def rebuild_tables(name: StrPath, results: StrPath = "results", say: Callable[[str], None] = print,
                   storage: str | None = None) -> RebuiltExports:
    """Rebuild a study's tables, plots and report from its stored trials, training nothing
    (``python -m study.table NAME``); returns what was written and the table. ``storage``: the
    study's ``--storage`` URI, read from there (``fetch_studies``)."""
    if storage is not None:
        fetch_studies(storage, [name], results, say)
    return rebuild_exports(Path(checked_path("results", results)), checked_path("name", name), say=say)


def write_report(name: str, results: StrPath = "results") -> Path:
    """(Re)write ``results/NAME/report.html`` from stored results (``python -m study.report``)."""
    return write_study_report(name, Path(checked_path("results", results)))


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


    text = checked_path("name", name)
    study = Path(text).stem if text.endswith((".yaml", ".yml")) else text
    checked_study_name(study)  # also keeps the path inside the results directory
    path = Path(checked_path("results", results)) / study / "table.csv"
    if not path.is_file():
        raise UserError(f"study {study}: no table in {results} ({path} not found); run it with "
                        f"run_study({study!r}) (or python -m study.run {study}), or rebuild the table from stored "
                        f"results with python -m study.table {study}")
    return pd.read_csv(path)


def _option(flag: str, value: str) -> list[str]:
    # "--results=-x" keeps a value that starts with "-" from reading as an option
    return [f"{flag}={value}"] if value.startswith("-") else [flag, value]


def checked(keyword: str, value: Any, kind: type) -> str:
    """``value`` as its command-line text; a wrong type is a UserError here rather than the
    parser's exit (SystemExit) in the middle of a notebook. Ranges are study.run's to check."""
    if kind is Path:
        return checked_path(keyword, value)
    accepted = (int, float) if kind is float else kind
    if isinstance(value, accepted) and not isinstance(value, bool) and (kind is not str or value):
        return str(value)
    wanted = {int: "a whole number", float: "a number", str: "a non-empty string"}[kind]
    raise UserError(f"{keyword}={value!r}: expected {wanted}")


def checked_path(keyword: str, value: Any) -> str:
    if isinstance(value, str | os.PathLike) and os.fspath(value):
        return str(os.fspath(value))
    raise UserError(f"{keyword}={value!r}: expected a path (str or pathlib.Path)")


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
