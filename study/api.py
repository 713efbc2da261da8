"""Run studies from Python (a notebook, a script) and get their tables as pandas DataFrames.

::

    from study.api import load_table, run_study

    table = run_study("ablation_srnmt", smoke=True, cpus=2)    # = python -m study.run ablation_srnmt --smoke --cpus 2
    table[["label", "bleu_mean", "bleu_std", "delta", "p_value"]]

    table = run_study("my_study.yaml", seeds=3, overrides={"model.hidden": 128, "budget.epochs": 20})
    load_table("ablation_srnmt")                               # a finished study's table, nothing runs

``run_study`` is ``python -m study.run`` called in this process: the same checks, the same
Ray Tune trials and MLflow runs, the same files under ``results/<study>/`` (tables, plots,
``study.json``, and ``command.txt`` with the ``python -m study.run`` command line that
reproduces the run from a shell). It prints the same progress lines and table. Bad input (an
unknown study, a bad value, results that a run would overwrite) raises
``nmt.errors.UserError`` with the message the command prints. Relative paths (``results``,
``data_dir``) are relative to the current directory, as on the command line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from nmt.errors import UserError

if TYPE_CHECKING:  # pandas is imported when a table is read, not with this module
    import pandas

StrPath = str | os.PathLike


def run_study(name_or_path: StrPath, *, smoke: bool = False, seeds: int | None = None,
              overrides: Mapping[str, Any] | Iterable[str] | str = (), results: StrPath | None = None,
              resume: bool = False, extend: bool = False, fresh: bool = False, cpus: int | None = None,
              max_concurrent: int | None = None, gpus_per_trial: float | None = None, address: str | None = None,
              tracking_uri: str | None = None, data_dir: StrPath | None = None, langs: str | None = None,
              max_trials: int | None = None, verbose: bool = False) -> pandas.DataFrame:
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
    - ``data_dir``, ``langs``: train on the parallel corpus in ``data_dir`` with language pair
      ``langs`` (``"en-de"``) instead of the study's data.
    - ``max_trials``: refuse a study of more trials (default 2000).
    - ``verbose``: show the trials' own output.

    Raises ``nmt.errors.UserError`` on bad input, before anything is trained or written, and
    ``KeyboardInterrupt`` when the run was stopped (the kernel interrupted, SIGTERM): its
    finished trials are kept and ``resume=True`` continues it.
    """
    study = checked_path("name_or_path", name_or_path)
    # the study first, as typed on the command line; a file name the parser would take for an
    # option goes last, after "--"
    argv = ([] if study.startswith("-") else [study]) + (["--smoke"] if smoke else [])
    for override in override_strings(overrides):
        argv += option("--set", override)
    for flag, value, kind in (("--seeds", seeds, int), ("--max-concurrent", max_concurrent, int),
                              ("--max-trials", max_trials, int), ("--gpus-per-trial", gpus_per_trial, float),
                              ("--cpus", cpus, int), ("--address", address, str), ("--tracking-uri", tracking_uri, str),
                              ("--results", results, Path), ("--data-dir", data_dir, Path), ("--langs", langs, str)):
        if value is not None:
            argv += option(flag, checked(flag[2:].replace("-", "_"), value, kind))
    argv += [flag for flag, on in (("--resume", resume), ("--extend", extend), ("--fresh", fresh),
                                   ("--verbose", verbose)) if on]
    argv += ["--", study] if study.startswith("-") else []

    from study import run as study_run
    from study.spec import study_path

    exit_code = study_run.main(argv)  # it records "python -m study.run " + argv in command.txt
    name = study_path(study).stem  # a study's name is its file's name (checked when it loaded)
    if exit_code != 0:  # study.run returns 128 + the signal that stopped the trials; bad input raises
        raise KeyboardInterrupt(f"study {name} stopped before it finished (exit code {exit_code}); its finished "
                                f"trials are kept: run_study({study!r}, resume=True, ...) with the same other "
                                f"arguments continues it")
    default_results = study_run.SMOKE_RESULTS if smoke else Path("results")
    return load_table(name, results if results is not None else default_results)


def load_table(name: StrPath, results: StrPath = "results") -> pandas.DataFrame:
    """The table of a study that ran (``<results>/<name>/table.csv``) as a DataFrame, without
    running anything: ``load_table("cells", results="results/reference")`` reads a committed
    reference study, ``load_table("cells", results="results/smoke")`` a ``--smoke`` check.
    ``name`` may also be the study's ``.yaml`` file. Raises ``nmt.errors.UserError`` when the
    directory holds no table of that study."""
    import pandas as pd

    from study.spec import STUDY_NAME

    text = checked_path("name", name)
    study = Path(text).stem if text.endswith((".yaml", ".yml")) else text
    if not STUDY_NAME.fullmatch(study):  # also keeps the path inside the results directory
        raise UserError(f"study name {study!r}: a study name is a plain identifier (letters, digits, _ and -, "
                        f"starting with a letter); see python -m study.list")
    path = Path(checked_path("results", results)) / study / "table.csv"
    if not path.is_file():
        raise UserError(f"study {study}: no table in {results} ({path} not found); run it with "
                        f"run_study({study!r}) (or python -m study.run {study}), or rebuild the table from stored "
                        f"results with python -m study.table {study}")
    return pd.read_csv(path)


def option(flag: str, value: str) -> list[str]:
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
