"""A study expanded into its rows and trials: ablation subsets and grid points, labels, the
seeds of each row, and the shrunken study of ``--smoke``."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import re
import typing

from nmt.config import ModelConfig, config_from_dict, model_option, smoke
from nmt.errors import ConfigError
from nmt.typed_config import apply_overrides, flatten, suggest
from study.spec.labels import component_names, display_value
from study.spec.model import BudgetSpec, StudySpec, Trial
from study.spec.portable import config_key


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


def shrink_for_smoke(spec: StudySpec) -> StudySpec:
    """--smoke: tiny data, model and budget, one seed, a few samples; every axis kept."""
    spec = copy.deepcopy(spec)
    f = spec.fields
    f.seeds = 1
    f.budget = BudgetSpec(epochs=1, patience=f.budget.patience, stop=f.budget.stop)  # the rule kept: its code path runs
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
