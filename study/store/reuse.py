"""Trials shared between studies (``python -m study.run NAME --reuse-from OTHER``).

Two studies often hold the same trial: the full model of an ablation is one depth of a depth
study, the twin-gate row of a gate study is one unit of a unit comparison. A trial's key hashes
everything that decides its result (the resolved config, its seed, the data files by content),
so a finished trial of OTHER whose key is a key of this study is exactly a trial of this study,
where both studies compute alike: how the CPU computes (``numerics``) is one setting per study, not
hashed, and a source study that computed otherwise is refused before anything is written.
``--reuse-from`` copies such trials into this study's trial store before any trial starts; they
are then finished here too and are reported, tabled and tracked like trials this study trained.
Only finished trials are copied (a copy is staged and renamed into place, like a trial that
finishes); a trial this study already finished keeps its own record. The copy's
``metrics.json`` says where it came from (``reused_from``), which MLflow shows as a tag.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from nmt.errors import UserError
from nmt.fileio import write_json
from nmt.numerics import arithmetic
from study.spec.model import StudySpec, Trial
from study.store.ownership import check_real_tree
from study.store.records import experiment_dir
from study.store.resume_checks import setting_to_match, stored_arithmetic
from study.store.trial_store import TrialStore

COPIED_RECORDS = ("history.json", "progress.json")  # a finished trial's record besides trial.json


def reuse_sources(spec: StudySpec, names: list[str], results_root: Path) -> dict[str, Path]:
    """The trial stores of the studies named by --reuse-from, checked before anything is written."""
    if names and spec.fields.search is not None:
        raise UserError(f"--reuse-from: study {spec.name} is a search, whose trials are its own samples; "
                        f"leave out --reuse-from (it shares the trials of grid and ablation studies)")
    sources = {}
    for name in names:
        if name == spec.name:
            raise UserError(f"--reuse-from {name}: that is this study; --resume continues it")
        if name != Path(name).name or name.endswith((".yaml", ".yml")):
            raise UserError(f"--reuse-from {name}: give the other study's name (its name: key, e.g. "
                            f"{Path(name).stem}), not a path; its trials are looked for in the same --results directory")
        store = experiment_dir(results_root, name)
        if not (store / "finished").is_dir():
            raise UserError(f"--reuse-from {name}: {results_root} holds no trial store of study {name} ({store}); "
                            f"give the name of a study run in the same --results directory")
        check_real_tree(store, "trial store")  # read before anything is written: a bad record is refused now
        source = TrialStore(store)
        source.check_records()
        _check_same_numerics(spec, name, source)
        sources[name] = store
    return sources


def _check_same_numerics(spec: StudySpec, name: str, source: TrialStore) -> None:
    """A trial's key leaves out how its CPU computed (``numerics`` is checked per study, not hashed), so
    a source study that computed otherwise would put trials of another arithmetic into this study."""
    this_run = arithmetic(spec.fields.numerics)
    other = [way for way in stored_arithmetic(source) if way != this_run]
    if other:
        raise UserError(f"--reuse-from {name}: its trials computed with numerics {other[0]}, and study {spec.name} "
                        f"computes {this_run}; a study keeps one setting so that its rows compare: "
                        f"{setting_to_match(other[0], spec, 'leave out --reuse-from')}")


def reusable_keys(trials: list[Trial], sources: dict[str, Path], store: TrialStore) -> frozenset[str]:
    """The keys of ``trials`` that some source has finished and ``store`` has not (what
    --dry-run leaves out as copied)."""
    stores = [TrialStore(directory) for directory in sources.values()]
    return frozenset(t.key for t in trials if store.finished_metrics(t.key) is None
                     and any(source.finished_metrics(t.key) is not None for source in stores))


def reuse_finished_trials(store: TrialStore, trials: list[Trial], sources: dict[str, Path], log=print) -> int:
    """Copy each source's finished trials that are trials of this study and not finished here;
    returns how many were copied."""
    copied = 0
    for name, directory in sources.items():
        source = TrialStore(directory)
        theirs = set(source.keys())
        shared = [trial for trial in trials if trial.key in theirs]
        count = here = 0
        for trial in shared:
            metrics = source.finished_metrics(trial.key)
            if store.finished_metrics(trial.key) is not None:
                here += 1
            elif metrics is not None:
                with store.hold(trial.key):  # a worker of a killed driver may still be writing this trial
                    _copy_trial(source, store, trial, {**metrics, "reused_from": metrics.get("reused_from", name)})
                count += 1
        unfinished = len(shared) - count - here
        log(f"{name} shares {len(shared)} trial(s) with this study: {count} copied now"
            + (f", {here} finished here already" if here else "")
            + (f", {unfinished} not finished there (they train here)" if unfinished else ""))
        copied += count
    return copied


def _copy_trial(source: TrialStore, store: TrialStore, trial: Trial, metrics: dict) -> None:
    key = trial.key
    target = store.trial_dir(key)
    shutil.rmtree(store.run_dir(key), ignore_errors=True)  # an unfinished attempt here is superseded
    target.mkdir(parents=True, exist_ok=True)
    identity = source.identity(key) or {}
    write_json(target / "trial.json", {**identity, "key": key, "label": trial.label, "row": trial.row,
                                       "seed": trial.seed, "config": trial.config, "params": {}, "sample": None})
    for name in COPIED_RECORDS:
        if (source.trial_dir(key) / name).is_file():
            shutil.copy(source.trial_dir(key) / name, target / name)
    (target / "status.json").unlink(missing_ok=True)
    store.install_finished(key, source.finished_dir(key), metrics)
