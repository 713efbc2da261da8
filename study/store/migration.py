"""Trials stored by an older version of the tool, adopted under the keys this version gives them.

A trial's key hashes its resolved config, so a new version that reshapes the config (unit
options moved under ``model.<unit>``) or adds an option gives every trial a new key, and a
resumed or extended study would train its finished trials again. A stored trial whose key the
study no longer has is adopted when this version reads its config as exactly the config of one
of the study's trials (same label and seed, and equal once both are resolved by this version);
its directories move to the new key. A stored trial whose config differs only in a budget the
study raised continues under the new key (study.store.longer_budget). Anything else stays where it
is, untouched.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from nmt.config import config_from_dict
from nmt.errors import ConfigError
from nmt.fileio import write_json
from study.spec.model import Trial
from study.spec.portable import portable_config
from study.store.longer_budget import OUTCOMES, budget_raised, continue_under_new_budget, without_budget
from study.store.trial_store import TrialStore

# set per machine by the runner after the key was computed (study.execution.driver.with_run_resources)
MACHINE_KEYS = ("threads", "device")


def comparable(config: dict) -> dict:
    """A trial config as this version resolves it, without the per-machine train keys."""
    resolved = config_from_dict(copy.deepcopy(config), source="stored trial").to_dict()
    for key in MACHINE_KEYS:
        resolved["train"].pop(key, None)
    return portable_config(resolved)


@dataclass
class Move:
    """A stored trial that becomes one of the study's trials under that trial's key."""

    old: str
    trial: Trial
    budget_raised: bool  # the same trial with a larger budget (study.store.longer_budget)


def plan_adoption(store: TrialStore, trials: list[Trial]) -> list[Move]:
    """Which stored trials move to which of the study's keys; reads the store, changes nothing
    (the runner checks an --extend against the plan before anything moves)."""
    wanted = {trial.key for trial in trials}
    stored = set(store.keys())
    orphans = sorted(key for key in stored if key not in wanted)
    # matched by label and seed, which --extend keeps, not by row index, which a new row shifts
    open_slots = {(trial.label, trial.seed): trial for trial in trials if trial.key not in stored}
    plan = []
    for old in orphans:
        identity = store.identity(old) or {}
        trial = open_slots.get((identity.get("label"), identity.get("seed")))
        if trial is None or identity.get("params"):
            continue  # search samples keep their own keys (they hash the sampled parameters)
        try:
            stored_view, new_view = comparable(identity["config"]), comparable(trial.config)
        except (ConfigError, KeyError, TypeError):
            continue
        if stored_view == new_view:
            plan.append(Move(old, trial, budget_raised=False))
        elif without_budget(stored_view) == without_budget(new_view) and budget_raised(stored_view, new_view):
            plan.append(Move(old, trial, budget_raised=True))
        else:
            continue
        del open_slots[(trial.label, trial.seed)]
    return plan


def apply_adoption(store: TrialStore, plan: list[Move], log=print) -> dict[str, str]:
    """Carry out ``plan``; returns {old key: new key}."""
    outcomes: dict[str, int] = {}
    for move in plan:
        if move.budget_raised:
            outcome = continue_under_new_budget(store, move.old, move.trial)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        else:
            identity = store.identity(move.old) or {}
            store.rekey(move.old, move.trial.key)
            write_json(store.trial_dir(move.trial.key) / "trial.json", {**identity, "key": move.trial.key})
    adopted = len(plan) - sum(outcomes.values())
    if adopted:
        log(f"adopted {adopted} trial(s) stored by an older version of the tool under their new keys")
    if outcomes:
        log(f"larger budget: {sum(outcomes.values())} stored trial(s) continue - " + ", ".join(
            f"{outcomes[name]} {OUTCOMES[name]}" for name in OUTCOMES if outcomes.get(name)))
    return {move.old: move.trial.key for move in plan}


def adopt_stored_trials(store: TrialStore, trials: list[Trial], log=print) -> dict[str, str]:
    """Move stored trials of an older key scheme, or of the same study with a smaller budget
    (study.store.longer_budget), to their new keys; returns {old key: new key} of those moved."""
    return apply_adoption(store, plan_adoption(store, trials), log)
