"""A study given a larger budget (``--extend`` after raising ``budget.epochs``, ``steps`` or
``tokens``): its trials continue instead of training again.

A trial's key hashes its config, budget included, so a raised budget gives every trial a new
key. A stored trial whose config differs from one of the study's trials only in a raised
budget (same row, seed and everything else) is moved to that trial's key, and then:

- finished within its old budget (early stopping, divergence): kept as it is. Training is
  deterministic and the larger budget changes nothing before the old one ran out, so the
  trial would stop at the same epoch with the same result.
- finished because the old budget ran out: opened again. Its final checkpoint (the state
  after its last epoch) goes back into its run directory and the trial continues from there
  to the new budget, as nmt continues a resumed run with a larger budget: the same epochs,
  the same result as a trial that had the larger budget from the start. Without that
  checkpoint (a clone of committed results, which leave checkpoints out) it trains again
  from the start.
- unfinished: continues from its own checkpoint, as on any ``--resume``.

Only budgets that grow qualify; a smaller budget would change finished results, and the
wall-time cap is not a counted budget.
"""

from __future__ import annotations

import shutil

from nmt.fileio import write_json
from study.spec import Trial
from study.trial_store import TrialStore

# the counted budgets (train config keys) a study may raise with --extend
RAISABLE = ("max_epochs", "max_steps", "max_tokens")
# what a finished trial keeps besides its checkpoint
RESULT_FILES = ("metrics.json", "test.hyp")


def without_budget(config: dict) -> dict:
    """The config with the raisable budgets left out (what must be equal for a trial to continue)."""
    return {**config, "train": {key: value for key, value in config["train"].items() if key not in RAISABLE}}


def budget_raised(old: dict, new: dict) -> bool:
    """Whether every raisable budget of ``new`` is at least ``old``'s (None: no limit) and one is larger."""
    larger = False
    for key in RAISABLE:
        before, after = old["train"].get(key), new["train"].get(key)
        if before == after:
            continue
        if after is not None and (before is None or after < before):
            return False
        larger = True
    return larger


def continue_under_new_budget(store: TrialStore, old_key: str, trial: Trial, log=print) -> str:
    """Move a stored trial to ``trial``'s key (its config with a raised budget); reopen it when
    its old budget is what stopped it. Returns "kept", "reopened", "restarted" or "continued"."""
    store.rekey(old_key, trial.key)
    identity = store.identity(trial.key) or {}
    write_json(store.trial_dir(trial.key) / "trial.json", {**identity, "key": trial.key, "config": trial.config})
    from nmt.trainer import BUDGET_REASONS  # torch's import, only when a budget grew

    metrics = store.finished_metrics(trial.key)
    if metrics is None:
        return "continued"
    if metrics.get("status") != "ok" or metrics.get("stop_reason") not in BUDGET_REASONS:
        return "kept"
    finished = store.finished_dir(trial.key)
    checkpoint = store.run_dir(trial.key) / "checkpoint"
    has_state = (finished / "state.pt").is_file()
    if has_state:
        staged = checkpoint.with_name("checkpoint.partial")
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(finished, staged, ignore=shutil.ignore_patterns(*RESULT_FILES))
        shutil.rmtree(checkpoint, ignore_errors=True)
        staged.replace(checkpoint)
    # the trial counts as finished while finished/<key>/metrics.json exists: dropping the
    # directory (after its checkpoint is back in the run) is what opens it again
    retired = finished.with_name(f"{trial.key}.reopened")
    shutil.rmtree(retired, ignore_errors=True)
    finished.replace(retired)
    shutil.rmtree(retired)
    return "reopened" if has_state else "restarted"
