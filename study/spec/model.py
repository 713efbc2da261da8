"""Study files (``search_spaces/<name>.yaml``): parsing, validation and expansion into trials.

A study file names a base NMT config and how it varies::

    name: ablation_srnmt
    description: SR-NMT 4 layers, components removed (Di Gangi & Federico 2018, Table 4)
    data: {preset: synthetic, size: 6000}
    base:
      model: {cell: srnmt, enc_layers: 4, dec_layers: 4, hidden: 64}
      train: {lr: 0.002}
    ablate: [model.layer_norm, model.multi_attention, model.highway]   # every subset switched off
    seeds: 2
    metric: {name: valid_bleu, mode: max}
    budget: {epochs: 6}
    table: {reference: SR-NMT 4L}

Variation comes from exactly one of ``ablate``, ``grid``/``variants`` or
``search`` (Optuna). Everything is validated before anything runs: every
trial's config is built and checked by ``nmt.config``, and every problem is
one ``ConfigError`` line naming the file, the key and the fix.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib.util
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from nmt.errors import UserError
from study.spec.claims import ClaimSpec


def builtin_studies_dir() -> Path:
    """The folder of the built-in study files: the installed ``search_spaces`` package (package
    data of this distribution, so a non-editable install has it), else the folder beside this
    source tree."""
    package = importlib.util.find_spec("search_spaces")
    # only a regular package counts: a bare ``search_spaces/`` folder in the current directory
    # (a user's own studies) would be found as a namespace package without an origin
    if package is not None and package.origin is not None:
        return Path(package.origin).parent
    # an editable install made before search_spaces was a package maps only nmt and study
    return Path(__file__).resolve().parents[1] / "search_spaces"


SPACES_DIR = builtin_studies_dir()


STUDY_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")


def checked_study_name(name: str) -> str:
    """A study's name as given to a command that reads stored results; a name that is not a plain
    identifier (and so could point outside the results directory) is one UserError line."""
    if not STUDY_NAME.fullmatch(name):
        raise UserError(f"study name {name!r}: a study name is a plain identifier (letters, digits, _ and -, "
                        f"starting with a letter); see python -m study.list")
    return name


# folders of the results directory that are not studies: Ray's storage, MLflow's artifacts and
# the committed reference results
RESERVED_NAMES = ("ray", "mlflow-artifacts", "reference", "smoke", "compare")


BUDGET_KEYS = {"epochs": "max_epochs", "steps": "max_steps", "tokens": "max_tokens", "patience": "patience",
               "min_epochs": "min_epochs", "stop": "early_stop", "minutes": "max_minutes"}  # budget.X -> train.Y


NMT_SECTIONS = ("model", "train", "decode")


MAX_TRIALS = 2000  # default cap (--max-trials): a larger study is almost always a typo (seeds: 100000000)


@dataclass
class MetricSpec:
    name: str = "valid_bleu"
    mode: Literal["max", "min"] = "max"


@dataclass
class SchedulerSpec:
    type: Literal["fifo", "asha"] = "fifo"
    grace_period: int = 1  # asha: epochs before a trial can be stopped
    reduction_factor: int = 2


@dataclass
class ResourcesSpec:
    cpu: float = 1.0  # per trial; also the torch threads of the trial
    gpu: float = 0.0  # per trial, fractions allowed (0.25 = four trials per GPU)


@dataclass
class BudgetSpec:
    """How long each trial trains, counted so that a seed gives the same model on any machine;
    a trial ends at the first budget used up (or by early stopping)."""

    epochs: int | None = None  # train.max_epochs: passes over the training data
    steps: int | None = None  # train.max_steps: optimizer updates
    tokens: int | None = None  # train.max_tokens: training target tokens seen (equal data for fast and slow units)
    patience: int | None = None  # train.patience: stop after this many epochs without validation progress (0: never)
    min_epochs: int | None = None  # train.min_epochs: early stopping never ends a trial before this many epochs
    # train.early_stop: "patience" (after `patience` epochs without progress) or "plateau" (once the validation
    # curve is on a plateau by the test that marks the table's rows; the epoch budget is then a safety net)
    stop: Literal["patience", "plateau"] | None = None
    # train.max_minutes: a safety cap on wall time, not a budget; a trial it stops is marked truncated
    minutes: float | None = None


@dataclass
class SearchSpec:
    algorithm: Literal["optuna"] = "optuna"
    sampler: Literal["tpe", "random", "nsga2"] = "tpe"
    num_samples: int = 8
    seed: int = 1
    space: dict = field(default_factory=dict)  # dotted key -> {type, low, high} | {type: categorical, choices}


@dataclass
class TableSpec:
    reference: str | None = None  # ablation: the full model's label; grid: the label of the reference row
    label: str | None = None  # grid: row label template, e.g. "{model.cell} {model.enc_layers}L"
    title: str | None = None
    plot: Literal["bar", "line", "pareto", "none"] = "bar"
    x: str | None = None  # line plot: the config key on the x axis


@dataclass
class StudyFields:
    """The YAML keys of a study file (typed; the rest of ``StudySpec`` is derived)."""

    name: str = ""
    description: str = ""
    data: dict = field(default_factory=dict)
    base: dict = field(default_factory=dict)
    ablate: list[str] | None = None
    grid: dict | None = None
    variants: list[dict] | None = None
    search: SearchSpec | None = None
    seeds: int = 1
    metric: MetricSpec | list[MetricSpec] = field(default_factory=MetricSpec)
    scheduler: SchedulerSpec = field(default_factory=SchedulerSpec)
    resources: ResourcesSpec = field(default_factory=ResourcesSpec)
    budget: BudgetSpec = field(default_factory=BudgetSpec)
    table: TableSpec = field(default_factory=TableSpec)
    claims: list[ClaimSpec] = field(default_factory=list)  # typed by study.spec.claims.parse_claims
    # how every trial's CPU computes (nmt.numerics): portable, the same numbers on Intel and AMD CPUs with AVX2,
    # or native, each CPU's own kernels; one setting per study (its stored trials are checked on --resume)
    numerics: Literal["portable", "native"] = "portable"


# keys that say how a study is read, not what it trains: --resume ignores changes to them, and
# study.table STUDY_FILE takes them from the file (claims added or refined, a title corrected)
READING_KEYS = ("claims", "description", "table.title")


# how a study's trials compute, not what they train: checked against its stored trials' records
# (study.store.resume_checks.check_numerics), so not compared as part of the file
RUN_KEYS = ("numerics",)


def trained_part(tree: dict) -> dict:
    """A study tree without the keys that only say how it is read (``READING_KEYS``: claims, the
    description, the table's title), which may change between runs of one study, and without
    ``RUN_KEYS``, which are checked against the stored trials instead."""
    out = {key: value for key, value in tree.items() if key not in READING_KEYS + RUN_KEYS}
    for dotted in READING_KEYS:
        section, _, key = dotted.partition(".")
        if key and isinstance(out.get(section), dict):
            out[section] = {k: v for k, v in out[section].items() if k != key}
    return out


@dataclass
class Trial:
    """One configuration with one seed: what Ray Tune runs as a trial."""

    key: str  # deterministic: hash of the resolved config (seed included; portable, see config_key)
    label: str  # the table row it belongs to
    row: int  # row order in the table
    seed: int
    config: dict  # the resolved NMT config (YAML shape)
    changes: dict  # the keys this row changes against the base
    storage: str = ""  # the study's trial records (study.store.trial_store; set by the runner)
    mirror: str = ""  # --storage URI the trial mirrors its records and checkpoints to ("" for none)
    home_node: str = ""  # with a mirror, the driver's Ray node: a trial on another node works in node-local scratch
    announce_start: bool = False  # --time-limit: a new trial reports before its first epoch, so it can be held back

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class StudySpec:
    fields: StudyFields
    source: str
    tree: dict  # the study file after --set overrides (what resume compares)
    max_trials: int | None = None  # refuse a larger study (None: stored results, not checked again)

    @property
    def name(self) -> str:
        return self.fields.name

    @property
    def kind(self) -> str:
        if self.fields.search is not None:
            return "search"
        return "ablation" if self.fields.ablate else "grid"

    @property
    def metrics(self) -> list[MetricSpec]:
        m = self.fields.metric
        return m if isinstance(m, list) else [m]

    @property
    def multi_objective(self) -> bool:
        return len(self.metrics) > 1

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(trained_part(self.tree), sort_keys=True, default=str).encode()).hexdigest()[:16]

    def base_tree(self) -> dict:
        """The NMT config tree shared by every trial (budget applied)."""
        tree = {section: copy.deepcopy(self.fields.base.get(section, {})) for section in NMT_SECTIONS}
        tree["data"] = copy.deepcopy(self.fields.data)
        budget = self.fields.budget
        for name, key in BUDGET_KEYS.items():
            if getattr(budget, name) is not None:
                tree["train"][key] = getattr(budget, name)
        return tree


