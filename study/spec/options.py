"""One run of a study as asked for, declared once. Every option of ``python -m study.run`` is one field
below, in the group of its concern (what to run, where results and records live, how it runs, how it
reports), with its flag, type, range and help. Derived from these declarations, not written again:
study.run's parser and ``--help`` (``add_arguments``, ``from_arguments``), the keyword arguments of
``study.api.run_study`` and ``dry_run`` (``from_keywords``, ``keyword_names``), the command line that
``command.txt`` records (``command_line``) and what the driver reads (the ``RunOptions`` object itself,
typed from the command line to the driver).

Adding an option is one field here (and the code that acts on it)."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nmt.errors import UserError
from nmt.typed_config import bounds_text, in_bounds

SMOKE_RESULTS = Path("results") / "smoke"


def print_line(line: str) -> None:
    """Where a run's progress lines go unless the caller says otherwise: stdout, at once."""
    print(line, flush=True)


def option(default: Any, help: str, kind: type = str, *, flag: str | None = None, metavar: str | None = None,
           ge: float | None = None, gt: float | None = None, repeated: bool = False):
    """A field that is an option of study.run: ``flag`` (default: ``--`` and the field's name with dashes),
    ``kind`` (its type on the command line and in Python: bool, int, float, str or Path), ``ge`` / ``gt`` (its
    bounds, as ``nmt.typed_config.setting`` declares a config key's, checked for every caller), ``repeated`` (a
    tuple of values, the flag given once per value)."""
    meta = {"help": help, "kind": kind, "flag": flag, "metavar": metavar, "ge": ge, "gt": gt, "repeated": repeated}
    return field(default=default, metadata=meta)


def not_an_option(default: Any, **kwargs):
    """A field the command line sets by itself (the typed command) or that only Python callers give (``say``)."""
    return field(default=default, metadata={}, **kwargs)


@dataclass(frozen=True)
class StudyChoice:
    """What to run: the study, its changes, its data."""

    study: str = option("", "a built-in study (python -m study.list) or a path to a study .yaml file", flag="name")
    smoke: bool = option(False, "tiny data, model and budget, one seed: any study finishes in about 2 minutes", bool)
    overrides: tuple[str, ...] = option((), "override a study key (seeds=3, budget.epochs=4) or a trial config key "
                                            "(model.hidden=128, train.lr=1e-3, data.size=10000); repeatable",
                                        flag="--set", metavar="KEY=VALUE", repeated=True)
    seeds: int | None = option(None, "seeds per configuration (same as --set seeds=N)", int, metavar="N")
    data_dir: Path | None = option(None, "use the parallel corpus in DIR (train.L, val.L, test*.L, optionally .gz) "
                                         "instead of the study's data", Path, metavar="DIR")
    langs: str | None = option(None, "with --data-dir: the language pair SRC-TGT, e.g. en-de", metavar="SRC-TGT")
    reuse_from: tuple[str, ...] = option((), "before training, copy the finished trials of STUDY (run in the same "
                                             "--results directory) that are trials of this study - the same config, "
                                             "seed and data - so they are not trained twice; repeatable",
                                         metavar="STUDY", repeated=True)
    max_trials: int | None = option(None, "refuse a study of more than N trials (default: 2000, against typos such as "
                                          "seeds: 100000000)", int, metavar="N", ge=1)


@dataclass(frozen=True)
class ResultsPlace:
    """Where results and records live."""

    results: Path | None = option(None, "results directory (default: ./results, and ./results/smoke for --smoke runs, "
                                        "so a check never mixes with a full run's results)", Path, metavar="DIR")
    storage: str | None = option(None, "also keep the trial store (records, checkpoints, finished trials) and the "
                                       "exports in an object store, s3://BUCKET/PREFIX (AWS_ENDPOINT_URL for an "
                                       "S3-compatible one), for a cluster without a shared file system: a trial retried "
                                       "on another node continues from its last uploaded epoch, and --resume with the "
                                       "same URI continues the study from any machine, even from an empty --results "
                                       "directory", metavar="URI")
    lease_seconds: float | None = option(None, "with --storage: how long the study's lease in the store holds "
                                               "unrenewed, by the store's clock (default: 120; the driver renews it "
                                               "every third of that): a driver that died frees the study after this "
                                               "long, and one that could not renew it for this long stops", float,
                                         metavar="SECONDS", ge=3)
    tracking_uri: str | None = option(None, "MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else "
                                                        "sqlite:///<results>/mlflow.db)", metavar="URI")
    log_models: bool = option(False, "also log each finished trial's best model to its MLflow run (best.pt, its "
                                     "config and SentencePiece models; about 40 MB a trial at hidden 128)", bool)


@dataclass(frozen=True)
class Execution:
    """How it runs: new, continued or started over, and on which resources."""

    resume: bool = option(False, "continue an interrupted study; finished trials are not run again", bool)
    extend: bool = option(False, "continue a finished or interrupted study that gained rows, seeds (e.g. --seeds 5), "
                                 "search samples or epochs (--set budget.epochs=60): its finished trials are kept, those "
                                 "the old epoch budget stopped continue from their final checkpoints, the new ones "
                                 "train", bool)
    fresh: bool = option(False, "delete the study's previous results and start over", bool)
    cpus: int | None = option(None, "CPUs of the local Ray instance (default: all)", int, metavar="N", ge=1)
    max_concurrent: int | None = option(None, "at most this many trials at once", int, metavar="N", ge=1)
    gpus_per_trial: float | None = option(None, "GPU share per trial, e.g. 0.25 (default: the study's)", float,
                                          metavar="SHARE", ge=0)
    time_limit: float | None = option(None, "the hours this run may take: a trial starts, or continues from its "
                                             "checkpoint, only if its row's longest trial so far says it ends within "
                                             "them (before any trial has finished: while time is left); the trials "
                                             "under way finish, and --resume continues the rest (grids and ablations "
                                             "without ASHA; leave a margin: the price is an estimate)", float,
                                       metavar="HOURS", gt=0)
    address: str | None = option(None, "join an existing Ray cluster (e.g. 10.0.0.5:6379 or auto) instead of "
                                        "starting a local one", metavar="HOST:PORT")


@dataclass(frozen=True)
class Reporting:
    """How it reports."""

    verbose: bool = option(False, "show the trials' own output", bool)
    command: str | None = not_an_option(None)  # the command line command.txt records (default: the equivalent one)
    say: Callable[[str], None] = not_an_option(print_line, compare=False, repr=False)  # progress lines and the table


GROUPS = {"what": StudyChoice, "where": ResultsPlace, "how": Execution, "report": Reporting}
TITLES = {"what": "What to run", "where": "Where results and records live", "how": "How it runs",
          "report": "How it reports"}  # study.run's --help sections


@dataclass(frozen=True)
class RunOptions:
    """One run of a study as asked for: ``what`` to run, ``where`` its results and records live, ``how`` it
    runs, how it ``report``s."""

    what: StudyChoice = field(default_factory=StudyChoice)
    where: ResultsPlace = field(default_factory=ResultsPlace)
    how: Execution = field(default_factory=Execution)
    report: Reporting = field(default_factory=Reporting)

    @property
    def continues(self) -> bool:
        """--resume or --extend: the study's stored trials are kept and continued."""
        return self.how.resume or self.how.extend

    def results_dir(self) -> Path:
        """--results; by default results/, and results/smoke/ for a --smoke check."""
        if self.where.results is not None:
            return self.where.results
        return SMOKE_RESULTS if self.what.smoke else Path("results")

    def results_flag(self) -> str:
        """" --results DIR" when it is not the default, for the commands the driver suggests."""
        return f" --results {self.results_dir()}" if self.results_dir() != Path("results") else ""

    def check(self) -> None:
        """Every option's range and the combinations no run accepts, before anything loads (the --storage URI's
        form is the store's to check: ``study.store.object_store.checked_uri``, called first by ``study.api``)."""
        for group, name, meta in declared():
            value = getattr(getattr(self, group), name)
            if meta["kind"] is float and value is not None and not math.isfinite(value):
                raise UserError(f"{flag_of(name, meta)} {value}: must be a finite number")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not in_bounds(value, meta):
                raise UserError(f"{flag_of(name, meta)} {value:g}: {bounds_text(meta)}")
        if self.how.fresh and self.continues:
            flag = "--resume" if self.how.resume else "--extend"
            raise UserError(f"{flag} and --fresh exclude each other: continue the study, or start it over")
        if self.how.fresh and self.where.storage:
            raise UserError(f"--fresh with --storage {self.where.storage}: the tool deletes nothing in an object "
                            "store; remove the study's objects there yourself, or choose another prefix")
        if self.what.langs and not self.what.data_dir:
            raise UserError("--langs needs --data-dir (the directory of the corpus)")
        if self.where.lease_seconds is not None and not self.where.storage:
            raise UserError("--lease-seconds needs --storage (the lease lives in the object store)")

    def command_line(self) -> str:
        """The ``python -m study.run`` command that asks for this run, as command.txt records it (provenance
        text for a shell; nothing parses it): the command typed, or the one these options stand for."""
        if self.report.command is not None:
            return self.report.command
        study = self.what.study
        words = [] if study.startswith("-") else [study]
        for group, name, meta in declared():
            value = getattr(getattr(self, group), name)
            if name == "study" or value is None or value is False:
                continue
            if meta["kind"] is bool:
                words.append(flag_of(name, meta))
            for item in (value if meta["repeated"] else [] if meta["kind"] is bool else [value]):
                words += _flag_and_value(flag_of(name, meta), str(item))
        words += ["--", study] if study.startswith("-") else []
        return "python -m study.run " + " ".join(shlex.quote(word) for word in words)


def declared():
    """(group, field name, its declaration) of every option, in the order of the groups and their fields."""
    for group, cls in GROUPS.items():
        for item in dataclasses.fields(cls):
            if item.metadata:
                yield group, item.name, item.metadata


def flag_of(name: str, meta) -> str:
    return meta["flag"] or "--" + name.replace("_", "-")


def _flag_and_value(flag: str, value: str) -> list[str]:
    # "--results=-x" keeps a value that starts with "-" from reading as an option
    return [f"{flag}={value}"] if value.startswith("-") else [flag, value]


# ---------------------------------------------------------------------------
# the command line: study.run's parser, derived


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every declared option as an argument of study.run, one argument group per concern."""
    for group, cls in GROUPS.items():
        section = parser.add_argument_group(TITLES[group])
        for item in dataclasses.fields(cls):
            meta = item.metadata
            if not meta:
                continue
            if meta["flag"] == "name":  # the study, the one positional argument
                section.add_argument("name", help=meta["help"])
                continue
            extra = {"metavar": meta["metavar"]} if meta["metavar"] else {}
            if meta["kind"] is bool:
                section.add_argument(flag_of(item.name, meta), dest=item.name, action="store_true", help=meta["help"])
            elif meta["repeated"]:
                section.add_argument(flag_of(item.name, meta), dest=item.name, action="append", default=[],
                                     help=meta["help"], **extra)
            else:
                section.add_argument(flag_of(item.name, meta), dest=item.name, type=meta["kind"], help=meta["help"],
                                     **extra)


def from_arguments(args: argparse.Namespace, command: str) -> RunOptions:
    """The options study.run parsed (``add_arguments``), with the command line as typed."""
    values = {group: {} for group in GROUPS}
    for group, name, meta in declared():
        value = getattr(args, "name" if meta["flag"] == "name" else name)
        values[group][name] = tuple(value) if meta["repeated"] else value
    values["report"]["command"] = command
    return RunOptions(**{group: cls(**values[group]) for group, cls in GROUPS.items()})


# ---------------------------------------------------------------------------
# Python: the keyword arguments of study.api.run_study, derived


def keyword_names() -> list[str]:
    """run_study's keyword arguments: every option but the study (its first argument) and the typed command,
    plus ``say``."""
    return [name for _, name, meta in declared() if meta["flag"] != "name"] + ["say"]


def from_keywords(study: Any, keywords: dict[str, Any]) -> RunOptions:
    """run_study's arguments as options, each checked for its type (a UserError here, not a confusing failure
    later in the middle of a notebook); ``overrides`` arrive as ``--set`` strings."""
    unknown = sorted(set(keywords) - set(keyword_names()))
    if unknown:
        raise UserError(f"unknown argument {unknown[0]!r}; run_study takes {', '.join(keyword_names())}")
    values = {group: {} for group in GROUPS}
    values["what"]["study"] = path_text("name_or_path", study)
    for group, name, meta in declared():
        value = keywords.get(name)
        if meta["flag"] == "name" or value is None or (meta["kind"] is bool and value is False):
            continue
        if meta["repeated"]:
            items = [value] if isinstance(value, str | os.PathLike) else value
            if not isinstance(items, list | tuple):
                raise UserError(f"{name}={value!r}: expected a list of values")
            values[group][name] = tuple(str(typed_value(name, item, meta["kind"])) for item in items)
        else:
            values[group][name] = typed_value(name, value, meta["kind"])
    if "say" in keywords:
        if not callable(keywords["say"]):
            raise UserError(f"say={keywords['say']!r}: expected a function of one line, e.g. print")
        values["report"]["say"] = keywords["say"]
    return RunOptions(**{group: cls(**values[group]) for group, cls in GROUPS.items()})


def typed_value(keyword: str, value: Any, kind: type) -> Any:
    """``value`` as the option's type; a wrong type is one line naming the argument."""
    if kind is Path:
        return Path(path_text(keyword, value))
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise UserError(f"{keyword}={value!r}: expected True or False")
    accepted = (int, float) if kind is float else kind
    if isinstance(value, accepted) and not isinstance(value, bool) and (kind is not str or value):
        return kind(value)
    wanted = {int: "a whole number", float: "a number", str: "a non-empty string"}[kind]
    raise UserError(f"{keyword}={value!r}: expected {wanted}")


def path_text(keyword: str, value: Any) -> str:
    """A path argument (str or os.PathLike) as its text, unchanged ("./x.yaml" stays)."""
    if isinstance(value, str | os.PathLike) and os.fspath(value):
        return str(os.fspath(value))
    raise UserError(f"{keyword}={value!r}: expected a path (str or pathlib.Path)")
