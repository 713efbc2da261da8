"""Loading a study: a built-in name or a file, ``--set`` overrides and ``--data-dir`` applied, read
into a validated ``StudySpec`` (and back from the ``study.json`` a run stored)."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

from nmt.config import config_from_dict
from nmt.errors import ConfigError
from nmt.typed_config import apply_overrides, build_dataclass, parse_override, read_yaml, suggest
from study.spec.claims import parse_claims
from study.spec.expansion import expand, shrink_for_smoke
from study.spec.model import MAX_TRIALS, NMT_SECTIONS, SPACES_DIR, MetricSpec, StudyFields, StudySpec, Trial
from study.spec.validation import validate_spec


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
               max_trials: int = MAX_TRIALS, corpus: dict | None = None, seeds: int | None = None) -> StudySpec:
    """The study file with its --set overrides and --seeds; ``corpus``: data keys that replace the study's
    corpus (--data-dir), set before validation so the corpus that will be used is the one checked."""
    path = study_path(name_or_path)
    tree = read_yaml(path)
    source = str(path)
    if overrides:
        pairs = [parse_override(item) for item in overrides]
        tree = apply_overrides(tree, [(split_override(k), v) for k, v in pairs], source="--set")
    if seeds is not None:  # after --set, as the later option wins
        tree = apply_overrides(tree, [("seeds", seeds)], source="--seeds")
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
    """Every vocabulary size the study's trials ask for fits the corpus (nmt.data.pipeline.check_vocabulary_size)."""
    # nmt.data loads torch and SentencePiece: only when a study's corpus is checked, not when a
    # study file is read back for a table or a listing
    from nmt.data.pipeline import check_vocabulary_size

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
    raw_claims = tree.pop("claims", None)  # a list of sections: checked item by item
    fields = build_dataclass(StudyFields, tree, source, prefix="", explicit=set())
    fields.claims = parse_claims(raw_claims, source)
    if raw_claims is not None:
        tree["claims"] = raw_claims
    if isinstance(raw_metric, list):
        fields.metric = [build_dataclass(MetricSpec, m if isinstance(m, dict) else {"name": m}, source,
                                         prefix=f"metric[{i}].", explicit=set()) for i, m in enumerate(raw_metric)]
        tree["metric"] = raw_metric
    spec = StudySpec(fields, source, tree, max_trials)
    validate_spec(spec, expected_name)
    return spec
