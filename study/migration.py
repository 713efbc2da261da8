"""Trials stored by an older version of the tool, adopted under the keys this version gives them.

A trial's key hashes its resolved config, so a new version that reshapes the config (unit
options moved under ``model.<unit>``) or adds an option gives every trial a new key, and a
resumed or extended study would train its finished trials again. A stored trial whose key the
study no longer has is adopted when this version reads its config as exactly the config of one
of the study's trials (same row and seed, and equal once both are resolved by this version);
its directories move to the new key. A stored trial whose config differs only in a budget the
study raised continues under the new key (study.longer_budget). Anything else stays where it
is, untouched.
"""

from __future__ import annotations

import copy

from nmt.config import config_from_dict
from nmt.errors import ConfigError
from nmt.fileio import write_json
from study.longer_budget import budget_raised, continue_under_new_budget, without_budget
from study.spec import Trial, portable_config
from study.trial_store import TrialStore

# set per machine by the runner after the key was computed (study.runner.finalize_trials)
MACHINE_KEYS = ("threads", "device")
# what happened to the stored trials of a study whose budget grew (study.longer_budget)
OUTCOMES = {"kept": "kept as they are (they stopped early, within the old budget)",
            "reopened": "reopened from their final checkpoints (the old budget had stopped them)",
            "restarted": "trained again from the start (stopped by the old budget, no checkpoint here)",
            "continued": "continuing from their own checkpoints (unfinished)"}


def comparable(config: dict) -> dict:
    """A trial config as this version resolves it, without the per-machine train keys."""
    resolved = config_from_dict(copy.deepcopy(config), source="stored trial").to_dict()
    for key in MACHINE_KEYS:
        resolved["train"].pop(key, None)
    return portable_config(resolved)


def adopt_stored_trials(store: TrialStore, trials: list[Trial], log=print) -> dict[str, str]:
    """Move stored trials of an older key scheme, or of the same study with a smaller budget
    (study.longer_budget), to their new keys; returns {old key: new key} of those moved."""
    wanted = {trial.key: trial for trial in trials}
    stored = set(store.keys())
    orphans = [key for key in stored if key not in wanted]
    if not orphans:
        return {}
    open_slots = {(trial.row, trial.seed, trial.label): trial for trial in trials if trial.key not in stored}
    moved: dict[str, str] = {}
    outcomes: dict[str, int] = {}
    for old in orphans:
        identity = store.identity(old) or {}
        trial = open_slots.get((identity.get("row"), identity.get("seed"), identity.get("label")))
        if trial is None or identity.get("params"):
            continue  # search samples keep their own keys (they hash the sampled parameters)
        try:
            stored_view, new_view = comparable(identity["config"]), comparable(trial.config)
        except (ConfigError, KeyError, TypeError):
            continue
        if stored_view == new_view:
            store.rekey(old, trial.key)
            write_json(store.trial_dir(trial.key) / "trial.json", {**identity, "key": trial.key})
        elif without_budget(stored_view) == without_budget(new_view) and budget_raised(stored_view, new_view):
            outcome = continue_under_new_budget(store, old, trial)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        else:
            continue
        moved[old] = trial.key
        del open_slots[(trial.row, trial.seed, trial.label)]
    adopted = len(moved) - sum(outcomes.values())
    if adopted:
        log(f"adopted {adopted} trial(s) stored by an older version of the tool under their new keys")
    if outcomes:
        log(f"larger budget: {sum(outcomes.values())} stored trial(s) continue - " + ", ".join(
            f"{outcomes[name]} {OUTCOMES[name]}" for name in OUTCOMES if outcomes.get(name)))
    return moved
