"""Trials stored by an older version of the tool, adopted under the keys this version gives them.

A trial's key hashes its resolved config, so a new version that reshapes the config (unit
options moved under ``model.<unit>``) or adds an option gives every trial a new key, and a
resumed or extended study would train its finished trials again. A stored trial whose key the
study no longer has is adopted when this version reads its config as exactly the config of one
of the study's trials (same row and seed, and equal once both are resolved by this version);
its directories move to the new key. Anything else stays where it is, untouched.
"""

from __future__ import annotations

import copy

from nmt.config import config_from_dict
from nmt.errors import ConfigError
from nmt.fileio import write_json
from study.spec import Trial, portable_config
from study.trial_store import TrialStore

# set per machine by the runner after the key was computed (study.runner.finalize_trials)
MACHINE_KEYS = ("threads", "device")


def comparable(config: dict) -> dict:
    """A trial config as this version resolves it, without the per-machine train keys."""
    resolved = config_from_dict(copy.deepcopy(config), source="stored trial").to_dict()
    for key in MACHINE_KEYS:
        resolved["train"].pop(key, None)
    return portable_config(resolved)


def adopt_stored_trials(store: TrialStore, trials: list[Trial], log=print) -> int:
    """Move stored trials of an older key scheme to their new keys; returns how many moved."""
    wanted = {trial.key: trial for trial in trials}
    stored = set(store.keys())
    orphans = [key for key in stored if key not in wanted]
    if not orphans:
        return 0
    open_slots = {(trial.row, trial.seed, trial.label): trial for trial in trials if trial.key not in stored}
    moved = 0
    for old in orphans:
        identity = store.identity(old) or {}
        trial = open_slots.get((identity.get("row"), identity.get("seed"), identity.get("label")))
        if trial is None or identity.get("params"):
            continue  # search samples keep their own keys (they hash the sampled parameters)
        try:
            same = comparable(identity["config"]) == comparable(trial.config)
        except (ConfigError, KeyError, TypeError):
            same = False
        if not same:
            continue
        store.rekey(old, trial.key)
        write_json(store.trial_dir(trial.key) / "trial.json", {**identity, "key": trial.key})
        del open_slots[(trial.row, trial.seed, trial.label)]
        moved += 1
    if moved:
        log(f"adopted {moved} trial(s) stored by an older version of the tool under their new keys")
    return moved
