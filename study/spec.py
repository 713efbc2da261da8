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
import itertools
import json
import math
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from nmt.config import ModelConfig, TrainConfig, check_vocabulary_size, config_from_dict, model_option, smoke
from nmt.typed_config import apply_overrides, build_dataclass, flatten, read_yaml, suggest
from nmt.errors import ConfigError
from study.labels import component_names, display_value


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
# folders of the results directory that are not studies: Ray's storage, MLflow's artifacts and
# the committed reference results
RESERVED_NAMES = ("ray", "mlflow-artifacts", "reference", "smoke", "compare")
BUDGET_KEYS = {"epochs": "max_epochs", "steps": "max_steps", "tokens": "max_tokens", "patience": "patience",
               "min_epochs": "min_epochs", "minutes": "max_minutes"}  # budget.X -> train.Y
NMT_SECTIONS = ("model", "train", "decode")
MAX_TRIALS = 2000  # default cap (--max-trials): a larger study is almost always a typo (seeds: 100000000)
# Metrics every epoch reports (what schedulers and searchers can act on) and those known only at the end.
EPOCH_METRICS = ("valid_bleu", "valid_ppl", "train_loss", "train_ppl", "train_tokens_per_s", "best_valid_bleu")
FINAL_METRICS = ("test_bleu", "test_chrf", "decode_words_per_s", "params", "weight_matrices")


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


@dataclass
class Trial:
    """One configuration with one seed: what Ray Tune runs as a trial."""

    key: str  # deterministic: hash of the resolved config (seed included; portable, see config_key)
    label: str  # the table row it belongs to
    row: int  # row order in the table
    seed: int
    config: dict  # the resolved NMT config (YAML shape)
    changes: dict  # the keys this row changes against the base
    storage: str = ""  # the study's trial records (study.trial_store; set by the runner)

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
        return hashlib.sha256(json.dumps(self.tree, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def base_tree(self) -> dict:
        """The NMT config tree shared by every trial (budget applied)."""
        tree = {section: copy.deepcopy(self.fields.base.get(section, {})) for section in NMT_SECTIONS}
        tree["data"] = copy.deepcopy(self.fields.data)
        budget = self.fields.budget
        for name, key in BUDGET_KEYS.items():
            if getattr(budget, name) is not None:
                tree["train"][key] = getattr(budget, name)
        return tree


# ---------------------------------------------------------------------------
# loading


def study_path(name_or_path: str) -> Path:
    """A built-in study name (search_spaces/<name>.yaml) or a path to a study file."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml"):
        if not candidate.is_file():
            raise ConfigError(f"{candidate}: study file not found; check the path")
        return candidate
    path = SPACES_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        names = builtin_studies()
        raise ConfigError(f"unknown study {name_or_path!r}{suggest(name_or_path, names, '', quote=True)}; "
                          f"built-in studies: {', '.join(names)} (or give a path to a .yaml study file)")
    return path


def builtin_studies() -> list[str]:
    return sorted(p.stem for p in SPACES_DIR.glob("*.yaml"))


def split_override(key: str) -> str:
    """``model.hidden`` -> ``base.model.hidden``; ``data.size`` and study keys stay."""
    first = key.split(".", 1)[0]
    return f"base.{key}" if first in NMT_SECTIONS else key


def load_study(name_or_path: str, overrides: list[str] | None = None, smoke_run: bool = False,
               max_trials: int = MAX_TRIALS, corpus: dict | None = None) -> StudySpec:
    """The study file with its --set overrides; ``corpus``: data keys that replace the study's
    corpus (--data-dir), set before validation so the corpus that will be used is the one checked."""
    path = study_path(name_or_path)
    tree = read_yaml(path)
    source = str(path)
    if overrides:
        from nmt.typed_config import parse_override

        pairs = [parse_override(item) for item in overrides]
        tree = apply_overrides(tree, [(split_override(k), v) for k, v in pairs], source="--set")
    if corpus:
        tree = apply_overrides(tree, [(f"data.{key}", value) for key, value in corpus.items()], source="--data-dir")
    spec = spec_from_dict(tree, source, expected_name=path.stem, max_trials=max_trials)
    trials = expand(spec)  # validates every trial config now, before anything runs
    check_corpus_vocabularies(spec, trials)  # as asked, before --smoke shrinks the vocabulary
    if smoke_run:
        spec = shrink_for_smoke(spec)
        expand(spec)
    return spec


def check_corpus_vocabularies(spec: StudySpec, trials: list[Trial]) -> None:
    """Every vocabulary size the study's trials ask for fits the corpus (nmt.config.check_vocabulary_size)."""
    seen = set()
    for trial in trials:
        data = trial.config["data"]
        fingerprint = json.dumps(data, sort_keys=True, default=str)
        if fingerprint not in seen:
            seen.add(fingerprint)
            check_vocabulary_size(config_from_dict(trial.config, source=spec.source).data, spec.source)


def spec_to_dict(spec: StudySpec) -> dict:
    """The effective study (after --set, --smoke and data resolution) in study-file shape;
    ``spec_from_dict`` reads it back (study.table rebuilds tables from it)."""
    tree = dataclasses.asdict(spec.fields)
    return {key: value for key, value in tree.items() if value is not None}


def spec_from_dict(tree: dict, source: str, expected_name: str | None = None,
                   max_trials: int | None = None) -> StudySpec:
    if not isinstance(tree, dict):
        raise ConfigError(f"{source}: a study file is a mapping with name, description, base, ...")
    tree = copy.deepcopy(tree)
    raw_metric = tree.get("metric")
    if isinstance(raw_metric, list):  # typed checking handles one MetricSpec; lists are checked item by item
        tree.pop("metric")
    fields = build_dataclass(StudyFields, tree, source, prefix="", explicit=set())
    if isinstance(raw_metric, list):
        fields.metric = [build_dataclass(MetricSpec, m if isinstance(m, dict) else {"name": m}, source,
                                         prefix=f"metric[{i}].", explicit=set()) for i, m in enumerate(raw_metric)]
        tree["metric"] = raw_metric
    spec = StudySpec(fields, source, tree, max_trials)
    validate_spec(spec, expected_name)
    return spec


def validate_spec(spec: StudySpec, expected_name: str | None) -> None:
    f, source = spec.fields, spec.source

    def fail(key: str, why: str) -> None:
        raise ConfigError(f"{source}: {key}: {why}")

    if not f.name:
        fail("name", "missing; give the study a name (the file name without .yaml)")
    if not STUDY_NAME.fullmatch(f.name):
        fail("name", f"= {f.name!r}: a study name is a plain identifier (letters, digits, _ and -, starting with a "
                     "letter): it names the study's folder under the results directory")
    if f.name in RESERVED_NAMES:
        fail("name", f"= {f.name!r} is the name of a folder the platform keeps in the results directory "
                     f"({', '.join(RESERVED_NAMES)}); choose another name")
    if expected_name is not None and f.name != expected_name:
        fail("name", f"is {f.name!r} but the file is {expected_name}.yaml; make them the same")
    if not f.description:
        fail("description", "missing; one line saying what the study reproduces (paper and table)")
    for section in f.base:
        if section not in NMT_SECTIONS:
            fail(f"base.{section}", f"unknown section{suggest(section, list(NMT_SECTIONS), 'base.')}; "
                                    f"base holds {', '.join(NMT_SECTIONS)} (data goes in the top-level data block)")
    if f.grid is not None:
        if not f.grid:
            fail("grid", "is empty; give at least one axis, e.g. grid: {model.cell: [gru, atr]}")
        for axis, values in f.grid.items():
            if not isinstance(values, list) or not values:
                fail(f"grid.{axis}", f"= {values!r}: an axis is a non-empty list of values")
    if f.variants is not None:
        if not f.variants:
            fail("variants", "is empty; give a list of {label: ..., set: {key: value}}")
        for i, variant in enumerate(f.variants):
            if not isinstance(variant, dict) or set(variant) - {"label", "set"} or not isinstance(variant.get("set", {}), dict):
                fail(f"variants[{i}]", "each variant is {label: TEXT, set: {KEY: VALUE, ...}}")
            if not variant.get("label"):
                fail(f"variants[{i}].label", "missing; variants need a row label")
            if not isinstance(variant["label"], str):
                fail(f"variants[{i}].label", f"= {variant['label']!r}: a row label is text; quote it, "
                                             f"e.g. label: \"{variant['label']}\"")
    ways = [name for name, value in (("ablate", f.ablate), ("grid", f.grid or f.variants), ("search", f.search))
            if value]
    if not ways:
        fail("ablate/grid/search", "the study varies nothing; add ablate (components to switch off), "
                                   "grid (axes), variants or search (Optuna)")
    if len(ways) > 1:
        fail(ways[1], f"cannot be combined with {ways[0]}; use one of ablate, grid/variants, search per study")
    if f.seeds < 1:
        fail("seeds", f"= {f.seeds}: must be >= 1")
    _validate_metrics(spec, fail)
    r = f.resources
    if r.cpu <= 0:
        fail("resources.cpu", f"= {r.cpu}: must be > 0")
    if r.gpu < 0:
        fail("resources.gpu", f"= {r.gpu}: must be >= 0 (fractions like 0.25 share a GPU)")
    b = f.budget
    for name in ("epochs", "steps", "tokens"):
        if getattr(b, name) is not None and getattr(b, name) < 1:
            fail(f"budget.{name}", f"= {getattr(b, name)}: must be >= 1")
    if b.patience is not None and b.patience < 0:
        fail("budget.patience", f"= {b.patience}: must be >= 0 (0 = never stop early)")
    if b.min_epochs is not None and b.min_epochs < 0:
        fail("budget.min_epochs", f"= {b.min_epochs}: must be >= 0 (0 = early stopping may act from the first epoch)")
    base_epochs = (f.base.get("train") or {}).get("max_epochs")
    epochs = b.epochs or base_epochs or TrainConfig.max_epochs
    if b.min_epochs and isinstance(epochs, int) and b.min_epochs > epochs:
        cap = "budget.epochs" if b.epochs else "base.train.max_epochs" if base_epochs else "the default epoch budget"
        fail("budget.min_epochs", f"= {b.min_epochs} is more than {cap} ({epochs}), so early stopping could never "
                                  f"act; lower it or raise budget.epochs")
    if b.minutes is not None and b.minutes <= 0:
        fail("budget.minutes", f"= {b.minutes}: must be > 0 (it is a safety cap; leave it out for none)")
    s = f.scheduler
    if s.grace_period < 1 or s.reduction_factor < 2:
        fail("scheduler", "grace_period must be >= 1 and reduction_factor >= 2")
    if s.type == "asha":
        epochs = b.epochs or f.base.get("train", {}).get("max_epochs") or config_from_dict(
            spec.base_tree(), source=source).train.max_epochs
        if s.grace_period > epochs:
            fail("scheduler.grace_period", f"= {s.grace_period} is longer than the budget of {epochs} epochs, so "
                                           f"asha could never stop a trial; make it at most {epochs}")
    if f.search is not None:
        _validate_search(spec, fail)
    if f.table.plot == "line" and not f.table.x:
        fail("table.x", "a line plot needs the config key on its x axis, e.g. table.x: model.enc_layers")
    if f.table.x:
        axes = varied_keys(spec)
        if f.table.x not in axes:
            fail("table.x", f"= {f.table.x!r} is not a key the study varies{suggest(f.table.x, axes, '', quote=True)}"
                            f"; it varies {', '.join(axes) or 'nothing along an axis (ablate, search)'}")
    _check_size(spec, fail)


def varied_keys(spec: StudySpec) -> list[str]:
    """The config keys a grid study varies: its axes (both keys of a linked "a+b" axis) and the
    keys its variants set."""
    keys = [key for axis in (spec.fields.grid or {}) for key in axis.split("+")]
    for variant in spec.fields.variants or []:
        keys += [key for key in variant.get("set", {}) if key not in keys]
    return keys


def study_axes(spec: StudySpec) -> list[str]:
    """Every config key the study varies, whatever the way: grid axes and variants, ablated
    components, or searched parameters."""
    if spec.fields.search is not None:
        return list(spec.fields.search.space)
    return list(spec.fields.ablate or []) + [key for key in varied_keys(spec) if key not in (spec.fields.ablate or [])]


def count_trials(spec: StudySpec) -> int:
    """How many trials the study runs, counted without expanding it."""
    f = spec.fields
    if f.search is not None:
        return f.search.num_samples
    if f.ablate:
        rows = 2 ** len(f.ablate)
    else:
        rows = max(1, len(f.variants or [])) * math.prod(len(values) for values in (f.grid or {}).values())
    return rows * f.seeds


def _check_size(spec: StudySpec, fail) -> None:
    trials = count_trials(spec)
    if spec.max_trials is not None and trials > spec.max_trials:
        what = "search.num_samples" if spec.fields.search else "seeds" if spec.fields.seeds > spec.max_trials else \
            "ablate" if spec.fields.ablate else "grid"
        fail(what, f"the study would run {trials:,} trials, more than the cap of {spec.max_trials:,}; make it "
                   f"smaller, or raise the cap with --max-trials {trials}")


def _validate_metrics(spec: StudySpec, fail) -> None:
    known = EPOCH_METRICS + FINAL_METRICS
    for metric in spec.metrics:
        if metric.name not in known:
            fail("metric.name", f"= {metric.name!r} is not reported by trials"
                                f"{suggest(metric.name, list(known), '', quote=True)}; choose one of {', '.join(known)}")
    if len(spec.metrics) > 2:
        fail("metric", "at most two objectives (e.g. valid_bleu up and train_tokens_per_s up)")
    if spec.multi_objective:
        if spec.fields.search is None:
            fail("metric", "several objectives need a search (search: {algorithm: optuna, ...})")
        if spec.fields.scheduler.type != "fifo":
            fail("scheduler", "early stopping (asha) needs a single metric; use scheduler: fifo with several objectives")
    if spec.fields.scheduler.type == "asha" and spec.metrics[0].name not in EPOCH_METRICS:
        fail("metric.name", f"= {spec.metrics[0].name!r} is known only when a trial ends; asha compares "
                            f"trials every epoch: use one of {', '.join(EPOCH_METRICS)}")


DISTRIBUTIONS = ("uniform", "loguniform", "int", "categorical")


def _validate_search(spec: StudySpec, fail) -> None:
    search = spec.fields.search
    if search.num_samples < 1:
        fail("search.num_samples", f"= {search.num_samples}: must be >= 1")
    if not search.space:
        fail("search.space", "is empty; give distributions, e.g. train.lr: {type: loguniform, low: 1e-4, high: 3e-3}")
    if search.sampler == "nsga2" and not spec.multi_objective:
        fail("search.sampler", "nsga2 is a multi-objective sampler; use tpe or random with one metric")
    for key, dist in search.space.items():
        where = f"search.space.{key}"
        if not isinstance(dist, dict) or "type" not in dist:
            fail(where, "each entry is {type: uniform|loguniform|int|categorical, low/high or choices}")
        kind = dist["type"]
        if kind not in DISTRIBUTIONS:
            fail(f"{where}.type", f"= {kind!r}: choose one of {', '.join(DISTRIBUTIONS)}")
        if kind == "categorical":
            if set(dist) != {"type", "choices"} or not isinstance(dist["choices"], list) or not dist["choices"]:
                fail(where, "a categorical distribution is {type: categorical, choices: [a, b, ...]}")
            continue
        if set(dist) != {"type", "low", "high"}:
            fail(where, f"a {kind} distribution is {{type: {kind}, low: L, high: H}}")
        low, high = dist["low"], dist["high"]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
            fail(where, f"low and high must be numbers (got {low!r}, {high!r})")
        if not low < high:
            fail(where, f"low = {low} must be < high = {high}; swap them")
        if kind == "loguniform" and low <= 0:
            fail(where, f"low = {low}: a loguniform distribution needs low > 0")
        if kind == "int" and not (isinstance(low, int) and isinstance(high, int)):
            fail(where, "an int distribution needs integer low and high")
    for key, dist in search.space.items():
        section = key.split(".", 1)[0]
        if section not in NMT_SECTIONS:
            fail(f"search.space.{key}", "only model, train and decode keys can be searched (the data is "
                                        "prepared once for every trial)")
        values = dist["choices"] if dist["type"] == "categorical" else [dist["low"], dist["high"]]
        for value in values:  # every value a trial can sample builds a valid config, checked now
            try:
                config_from_dict(apply_overrides(spec.base_tree(), [(key, value)]), source="")
            except ConfigError as err:
                fail(f"search.space.{key}",
                     f"the value {value!r} makes a bad trial config ({str(err).removeprefix(': ')})")


def shrink_for_smoke(spec: StudySpec) -> StudySpec:
    """--smoke: tiny data, model and budget, one seed, a few samples; every axis kept."""
    spec = copy.deepcopy(spec)
    f = spec.fields
    f.seeds = 1
    f.budget = BudgetSpec(epochs=1, patience=f.budget.patience)
    if (f.base.get("train") or {}).get("min_epochs"):  # within the one epoch a smoke trial trains
        f.base["train"]["min_epochs"] = 1
    f.scheduler.grace_period = 1
    if f.search is not None:
        f.search.num_samples = min(f.search.num_samples, 3)
    probe = config_from_dict(spec.base_tree(), source=spec.source)
    small = smoke(probe)
    f.data = {**f.data, **{k: getattr(small.data, k) for k in ("size", "valid_size", "test_size", "max_len", "limit")},
              "spm": {**f.data.get("spm", {}), "vocab_size": small.data.spm.vocab_size}}
    if f.data.get("preset", "synthetic") == "synthetic" and not any(f.data.get(k) for k in ("train", "valid", "test")):
        f.data.pop("limit", None)
    model = f.base.setdefault("model", {})
    model["hidden"], model["emb"] = small.model.hidden, small.model.emb
    f.base.setdefault("train", {})["batch_tokens"] = small.train.batch_tokens
    f.base.setdefault("decode", {})["beam"] = small.decode.beam
    unit = probe.model.unit
    for name, value in dataclasses.asdict(small.model.options).items():  # the unit's own sizes the base sets (FSMN order)
        if value == getattr(probe.model.options, name):
            continue
        if unit.flat_key(name) in model:  # the old flat form
            model[unit.flat_key(name)] = value
        elif name in (model.get(unit.name) or {}):
            model[unit.name][name] = value
    if f.search is not None:  # keep sampled sizes small too
        for key in ("model.hidden", "model.emb"):
            if key in f.search.space:
                f.search.space[key] = {"type": "categorical", "choices": [16, 32]}
    spec.tree = {**spec.tree, "smoke": True}
    return spec


# ---------------------------------------------------------------------------
# expansion into trials


def expand(spec: StudySpec) -> list[Trial]:
    """Every (configuration, seed) of the study, validated. Search studies expand to their
    base config only (Optuna samples the rest while the study runs)."""
    rows = _rows(spec)
    trials: list[Trial] = []
    for row, (label, changes) in enumerate(rows):
        for seed in range(1, spec.fields.seeds + 1):
            tree = apply_overrides(spec.base_tree(), [*changes.items(), ("train.seed", seed)])
            cfg = config_from_dict(tree, source=f"{spec.source} ({label})")
            config = cfg.to_dict()
            key = config_key(config)
            trials.append(Trial(key, label, row, seed, config, dict(changes)))
    return trials


def config_key(config: dict) -> str:
    """Deterministic trial key: same resolved config (seed included), same key, on any machine:
    it is computed over ``portable_config`` (data files by content, no cache directory)."""
    return hashlib.sha256(json.dumps(portable_config(config), sort_keys=True).encode()).hexdigest()[:12]


# ---------------------------------------------------------------------------
# machine-independent views: what a trial key and --resume compare

DATA_FILES = ("train", "valid", "test")  # data keys that hold [SRC, TGT] file paths
_DIGESTS: dict[tuple[str, int, int], str] = {}  # (real path, size, mtime) -> "name@digest", per process


def portable_config(config: dict) -> dict:
    """The config as any machine sees it: the data block through ``portable_data``. A config
    without data files and without a cache directory is returned as it is (its key is the
    hash of the plain config)."""
    data = config.get("data")
    if not isinstance(data, dict):
        return config
    view = portable_data(data)
    return config if view == data else {**config, "data": view}


def portable_data(data: dict) -> dict:
    """A data block without what differs between machines holding the same corpus:
    ``cache_dir`` is dropped (set to None, its default: where the SentencePiece models and
    synthetic corpora are cached does not change them) and every data file path becomes
    ``"<base name>@<sha256 prefix of its content>"``, so two copies of a corpus at different
    paths are the same data, and a changed file is different data."""
    view = dict(data)
    if view.get("cache_dir") is not None:
        view["cache_dir"] = None
    for split in DATA_FILES:
        files = view.get(split)
        if isinstance(files, list):
            view[split] = [file_digest(path) if isinstance(path, str) else path for path in files]
    return view


def portable_tree(tree: dict) -> dict:
    """A study tree (study file shape, the ``request`` of study.json) with its data block made portable."""
    data = tree.get("data")
    return {**tree, "data": portable_data(data)} if isinstance(data, dict) else tree


def file_digest(path: str) -> str:
    """``"<base name>@<first 16 hex digits of the SHA-256 of its bytes>"``, read in chunks and
    kept per file (path, size and modification time) for the life of the process: ``expand``
    runs for every trial. A file that cannot be read (stored results rebuilt on a machine
    without the corpus) keeps its path: nothing is compared against it there."""
    try:
        real = Path(path).expanduser().resolve()
        stat = real.stat()
    except (OSError, RuntimeError):
        return path
    cache_key = (str(real), stat.st_size, stat.st_mtime_ns)
    if cache_key not in _DIGESTS:
        digest = hashlib.sha256()
        try:
            with open(real, "rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
        except OSError:  # a directory, no permission: bad input that prepare_data reports in one line
            return path
        _DIGESTS[cache_key] = f"{real.name}@{digest.hexdigest()[:16]}"
    return _DIGESTS[cache_key]


def _rows(spec: StudySpec) -> list[tuple[str, dict]]:
    f = spec.fields
    if f.search is not None:
        return [("search base", {})]
    if f.ablate:
        return _ablation_rows(spec)
    return _grid_rows(spec)


def _ablation_rows(spec: StudySpec) -> list[tuple[str, dict]]:
    """The full model, then every subset of components switched off, smallest subsets first
    (the order of the SR-NMT paper's Table 4)."""
    f = spec.fields
    base = config_from_dict(spec.base_tree(), source=spec.source)
    hints = typing.get_type_hints(ModelConfig)
    for key in f.ablate:
        found = model_option(base.model, key)
        if found is None:
            name = key.partition(".")[2]
            raise ConfigError(f"{spec.source}: ablate: {key!r} is not a model component of cell {base.model.cell!r}"
                              f"{suggest(name, list(hints), 'model.', quote=True)}; ablate lists boolean "
                              "model keys such as model.layer_norm")
        hint, value = found
        if hint not in (bool, bool | None):
            raise ConfigError(f"{spec.source}: ablate: {key} is not a boolean component (it takes "
                              f"{value!r}); ablate switches components off - use grid for other values")
        if value is not True:
            raise ConfigError(f"{spec.source}: ablate: {key} is already off in the base config (cell "
                              f"{base.model.cell}); an ablation starts from the full model with it on")
    if len(set(f.ablate)) != len(f.ablate):
        raise ConfigError(f"{spec.source}: ablate lists a component twice; name each once")
    reference = f.table.reference or "full model"
    rows = [(reference, {})]
    for size in range(1, len(f.ablate) + 1):
        for removed in itertools.combinations(f.ablate, size):
            rows.append((ablation_label(removed), {key: False for key in removed}))
    return rows


def ablation_label(removed: tuple[str, ...]) -> str:
    """Paper-style row labels: "- LayerNorm" for one component, "- LN & MA" for several."""
    names = [component_names(key) for key in removed]
    if len(names) == 1:
        return f"- {names[0][0]}"
    shorts = [short for _, short in names]
    return "- " + ", ".join(shorts[:-1]) + " & " + shorts[-1]


def _grid_rows(spec: StudySpec) -> list[tuple[str, dict]]:
    f = spec.fields
    axes = []
    for axis, values in (f.grid or {}).items():
        keys = axis.split("+")  # "model.enc_layers+model.dec_layers": linked axes take the same value
        axes.append([{key: value for key in keys} for value in values])
    variants = [(v["label"], dict(v.get("set", {}))) for v in (f.variants or [])] or [(None, {})]
    rows = []
    for variant_label, variant_changes in variants:
        for combination in itertools.product(*axes) if axes else [()]:
            changes = {**variant_changes}
            for part in combination:
                changes.update(part)
            rows.append((grid_label(spec, variant_label, changes), changes))
    labels = [label for label, _ in rows]
    duplicates = {label for label in labels if labels.count(label) > 1}
    if duplicates:
        raise ConfigError(f"{spec.source}: table.label gives several rows the label {sorted(duplicates)[0]!r}; "
                          "include every grid axis in the label template")
    if f.table.reference is not None and f.table.reference not in labels:
        raise ConfigError(f"{spec.source}: table.reference = {f.table.reference!r} is not a row; rows are: "
                          f"{', '.join(labels[:6])}{', ...' if len(labels) > 6 else ''}")
    return rows


def grid_label(spec: StudySpec, variant_label: str | None, changes: dict) -> str:
    template = spec.fields.table.label
    if template:
        values = {**flatten(config_from_dict(spec.base_tree(), source=spec.source).to_dict()), **changes}

        def fill(match: re.Match) -> str:
            key = match.group(1)
            if key not in values:
                raise ConfigError(f"{spec.source}: table.label: {{{key}}} is not a config key; "
                                  "use dotted keys such as {model.cell}")
            return display_value(key, values[key])

        text = re.sub(r"\{([\w.]+)\}", fill, template)
        return f"{variant_label} {text}".strip() if variant_label else text
    parts = [f"{key.split('.')[-1]}={value}" for key, value in changes.items()
             if not variant_label or key not in _variant_keys(spec, variant_label)]
    body = ", ".join(parts)
    if variant_label:
        return f"{variant_label} ({body})" if body else variant_label
    return body or "base"


def _variant_keys(spec: StudySpec, label: str) -> set[str]:
    for variant in spec.fields.variants or []:
        if variant["label"] == label:
            return set(variant.get("set", {}))
    return set()


