"""Every check of a study file that needs more than its types: names, sizes, metrics, search
spaces and each axis value. A problem is one ``ConfigError`` line naming the file, key and fix."""

from __future__ import annotations

from nmt.config import TrainConfig, config_from_dict
from nmt.errors import ConfigError
from nmt.typed_config import apply_overrides, check_text, suggest
from study.spec.claims import validate_claims
from study.spec.expansion import count_trials, expand, varied_keys
from study.spec.metrics import epoch_metrics, final_metrics
from study.spec.model import NMT_SECTIONS, RESERVED_NAMES, STUDY_NAME, StudySpec


def validate_spec(spec: StudySpec, expected_name: str | None) -> None:
    """Every check of the study file, in the order a reader meets its keys; the first problem
    raises one ConfigError line naming the file, the key and the fix."""
    source = spec.source

    def fail(key: str, why: str) -> None:
        raise ConfigError(f"{source}: {key}: {why}")

    _validate_identity(spec, expected_name, fail)
    _validate_variation(spec, fail)
    _validate_metrics(spec, fail)
    _validate_budget(spec, fail)
    if spec.fields.search is not None:
        _validate_search(spec, fail)
    _validate_table(spec, fail)
    _check_size(spec, fail)
    if spec.fields.claims:
        # the rows a claim may name are the expanded study's labels
        row_cells = {trial.label: trial.config["model"]["cell"] for trial in expand(spec)}
        validate_claims(spec.fields.claims, list(row_cells), spec.fields.table.reference, spec.kind, source, row_cells)


def _validate_identity(spec: StudySpec, expected_name: str | None, fail) -> None:
    """The name (matching the file), the description and the base config's sections."""
    f = spec.fields
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
    # every trial computes as the study's numerics key says (the driver sets it): a trial config's own would be
    # overridden without a word
    where = ["base.train.numerics"] if "numerics" in (f.base.get("train") or {}) else []
    where += [f"variants[{i}].set.train.numerics" for i, variant in enumerate(f.variants or [])
              if isinstance(variant, dict) and "train.numerics" in (variant.get("set") or {})]
    where += [f"{name}.train.numerics" for name, axes in (("grid", f.grid), ("search.space", f.search and f.search.space))
              if isinstance(axes, dict) and "train.numerics" in axes]
    if where:
        fail(where[0], "how the trials compute is the study's own key: write `numerics: portable` or `numerics: native` "
                       "at the top of the study file (or --set numerics=...), one setting for all its trials")


def _validate_variation(spec: StudySpec, fail) -> None:
    """Exactly one way of varying the study (ablate, grid/variants or search), well formed, and the seeds."""
    f = spec.fields
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
            check_text(variant["label"], spec.source, f"variants[{i}].label")
    ways = [name for name, value in (("ablate", f.ablate), ("grid", f.grid or f.variants), ("search", f.search))
            if value]
    if not ways:
        fail("ablate/grid/search", "the study varies nothing; add ablate (components to switch off), "
                                   "grid (axes), variants or search (Optuna)")
    if len(ways) > 1:
        fail(ways[1], f"cannot be combined with {ways[0]}; use one of ablate, grid/variants, search per study")
    if f.seeds < 1:
        fail("seeds", f"= {f.seeds}: must be >= 1")


def _check_plateau_metric(spec: StudySpec, fail) -> None:
    """budget.stop: plateau stops a trial by the curve of train.valid_metric, and the table marks its row by
    the study's metric: they must be the same curve, or a row could be stopped on a plateau and marked †."""
    metric = spec.metrics[0]
    valid_metric = config_from_dict(spec.base_tree(), source=spec.source).train.valid_metric
    wanted = {"bleu": ("valid_bleu", "max"), "ppl": ("valid_ppl", "min")}[valid_metric]
    if (metric.name, metric.mode) != wanted:
        fail("budget.stop", f"plateau stops each trial when its valid {valid_metric.upper()} (train.valid_metric) is "
                            f"on a plateau, but the study's metric is {metric.name} ({metric.mode}); set metric: "
                            f"{{name: {wanted[0]}, mode: {wanted[1]}}}, or base.train.valid_metric to match")


def _validate_budget(spec: StudySpec, fail) -> None:
    """Resources, the trial budget and the early-stopping scheduler."""
    f, source = spec.fields, spec.source
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
    if (b.stop or (f.base.get("train") or {}).get("early_stop")) == "plateau":  # budget.stop wins, as in the trials
        _check_plateau_metric(spec, fail)
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


def _validate_table(spec: StudySpec, fail) -> None:
    """The table's plot and its x axis (a key the study varies)."""
    f = spec.fields
    if f.table.plot == "line" and not f.table.x:
        fail("table.x", "a line plot needs the config key on its x axis, e.g. table.x: model.enc_layers")
    if f.table.x:
        axes = varied_keys(spec)
        if f.table.x not in axes:
            fail("table.x", f"= {f.table.x!r} is not a key the study varies{suggest(f.table.x, axes, '', quote=True)}"
                            f"; it varies {', '.join(axes) or 'nothing along an axis (ablate, search)'}")


def _check_size(spec: StudySpec, fail) -> None:
    trials = count_trials(spec)
    if spec.max_trials is not None and trials > spec.max_trials:
        what = "search.num_samples" if spec.fields.search else "seeds" if spec.fields.seeds > spec.max_trials else \
            "ablate" if spec.fields.ablate else "grid"
        fail(what, f"the study would run {trials:,} trials, more than the cap of {spec.max_trials:,}; make it "
                   f"smaller, or raise the cap with --max-trials {trials}")


def _validate_metrics(spec: StudySpec, fail) -> None:
    each_epoch = epoch_metrics()
    known = each_epoch + final_metrics()
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
    if spec.fields.scheduler.type == "asha" and spec.metrics[0].name not in each_epoch:
        fail("metric.name", f"= {spec.metrics[0].name!r} is known only when a trial ends; asha compares "
                            f"trials every epoch: use one of {', '.join(each_epoch)}")


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
