"""A study given more epochs (``--extend`` after raising ``budget.epochs``): its trials continue
instead of training again.

A trial's key hashes its config, budget included, so a raised budget gives every trial a new
key. A stored trial whose config differs from one of the study's trials only in a larger
``train.max_epochs`` (same label, seed and everything else) moves to that trial's key, and:

- finished within its old budget (early stopping, divergence): kept as it is. Training is
  deterministic and more epochs change nothing before the old budget ran out, so the trial
  would stop at the same epoch with the same result.
- finished because its epochs ran out: opened again. Its final checkpoint (the state after
  its last epoch) goes back into its run directory and the trial continues from there, as
  nmt continues a resumed run with a larger budget: the same epochs, the same result as a
  trial that had the larger budget from the start. Without that checkpoint (a clone of
  committed results, which leave checkpoints out) it trains again from the start.
- unfinished: continues from its own checkpoint, as on any ``--resume``.

A raised ``budget.min_epochs`` (early stopping held back until that epoch) qualifies too: a trial
that early stopping ended at or after the new minimum would have trained and stopped exactly
so (the minimum only keeps a run from stopping, and this one never stopped sooner), so it is
kept; one it ended before is opened again like a capped one, from its final checkpoint where
there is one (nmt takes the schedule's step for that epoch, which the stop skipped, and trains
on as a run held back from the start did) and from the start where there is none; an
unfinished one continues from its checkpoint, as nmt continues it under the new minimum too.

Only these budgets qualify. A step or token budget can end a trial inside an epoch, where
it still validates (and may save a best model or count towards early stopping) at a point a
longer run never stops at; a smaller budget would change finished results; the wall-time cap
is not a counted budget; and ASHA's rungs depend on the budget.

Every step can be interrupted: the files of the old key change first (the checkpoint copied
back, then the finished result retired), the move to the new key comes last, and a run that
finds the work half done takes it up again.
"""

from __future__ import annotations

import shutil

from nmt.config import EARLY_STOP_REASONS
from nmt.fileio import write_json
from study.spec.model import Trial
from study.store.trial_store import TrialStore

RAISABLE = ("max_epochs", "min_epochs")  # the train config keys a study may raise with --extend
RAISABLE_BUDGETS = ("epochs", "min_epochs")  # the same, as study budget keys
FLOORS = ("min_epochs",)  # raisable keys that are lower bounds: left out means 0, not "no limit"
RESULT_FILES = ("metrics.json", "test.hyp")  # what a finished trial holds besides its checkpoint
OUTCOMES = {"kept": "kept as they are (the new budget would end them where they ended)",
            "reopened": "reopened from their final checkpoints (their epochs ran out, or early stopping came "
                        "before the new min_epochs)",
            "restarted": "trained again from the start (stopped by the old budget or before the new min_epochs, "
                         "no checkpoint here)",
            "continued": "continuing from their own checkpoints (unfinished)"}


def raised(old, new, name: str) -> bool:
    """Whether the value of budget ``name`` went up from ``old`` to ``new``: a floor (``FLOORS``)
    left out is 0, a cap left out is no limit."""
    if name in FLOORS:
        return (new or 0) > (old or 0)
    return old is not None and (new is None or new > old)


def budget_grew(before: dict, after: dict, name: str) -> bool:
    """Whether the study budget ``name`` grew from ``before`` to ``after`` (budget dicts; for a
    cap, None is no limit, which a dropped limit is)."""
    return raised(before.get(name), after.get(name), name)


def without_budget(config: dict) -> dict:
    """The config with the raisable budgets left out (what must be equal for a trial to continue)."""
    return {**config, "train": {key: value for key, value in config["train"].items() if key not in RAISABLE}}


def budget_raised(old: dict, new: dict) -> bool:
    """Whether every raisable budget of ``new`` is at least ``old``'s and one is larger."""
    larger = False
    for key in RAISABLE:
        before, after = old["train"].get(key), new["train"].get(key)
        if raised(before, after, key):
            larger = True
        elif raised(after, before, key):
            return False
    return larger


def continue_under_new_budget(store: TrialStore, old_key: str, trial: Trial) -> str:
    """Make the stored trial ``old_key`` the study's ``trial`` (its config with a raised budget),
    reopening it when its epochs, or early stopping before the new minimum, stopped it. Returns
    one of ``OUTCOMES``."""
    with store.hold(old_key):  # a worker of a killed driver may still be writing this trial
        outcome = _reopen(store, old_key, trial.config["train"])
        store.rekey(old_key, trial.key)
    identity = store.identity(trial.key) or {}
    write_json(store.trial_dir(trial.key) / "trial.json", {**identity, "key": trial.key, "config": trial.config})
    return outcome


def extension_outcome(store: TrialStore, key: str, train: dict) -> str:
    """Which of ``OUTCOMES`` ``continue_under_new_budget`` gives the stored trial ``key`` under the
    study's new train config ``train``; changes nothing."""
    metrics = store.finished_metrics(key)
    if metrics is None:
        return "continued"
    stopped_by = metrics.get("stop_reason") if metrics.get("status") == "ok" else None
    held_back = stopped_by in EARLY_STOP_REASONS and metrics.get("epochs", 0) < (train.get("min_epochs") or 0)
    before = ((store.identity(key) or {}).get("config") or {}).get("train") or {}
    capped = stopped_by == "max epochs" and raised(before.get("max_epochs"), train.get("max_epochs"), "max_epochs")
    if not (held_back or capped):
        return "kept"
    return "reopened" if (store.finished_dir(key) / "state.pt").is_file() else "restarted"


def _reopen(store: TrialStore, key: str, train: dict) -> str:
    outcome = extension_outcome(store, key, train)
    if outcome in ("continued", "kept"):
        return outcome
    finished = store.finished_dir(key)
    if outcome == "reopened":
        checkpoint = store.run_dir(key) / "checkpoint"
        staged = checkpoint.with_name("checkpoint.partial")
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(finished, staged, ignore=shutil.ignore_patterns(*RESULT_FILES))
        shutil.rmtree(checkpoint, ignore_errors=True)
        staged.replace(checkpoint)
    else:  # it trains from the start
        store.forget_progress(key)
    # the trial counts as finished while finished/<key>/metrics.json exists: retiring that
    # directory, once the checkpoint is back in the run, is what opens it again
    retired = finished.with_name(f"{key}.reopened")
    shutil.rmtree(retired, ignore_errors=True)
    finished.replace(retired)
    shutil.rmtree(retired)
    return outcome
