"""ASHA that makes the same stop decisions whether a study runs straight through or is stopped and
resumed.

Ray's ASHA keeps, per rung, the metric each trial had when it reached the rung's epoch, and stops a
trial that reaches a rung below the rung's cutoff. Two things of it do not survive a resume, since
every run of a study builds a new Tuner: Tune's ``training_iteration`` starts again from 1 while
the trial continues from its last epoch, and the rungs are empty. Here the time is the trial's own
``epoch``; a trial is known to the rungs by its study key (a resumed trial is a new Tune trial
with a new id); and before any trial runs, every epoch the trial store holds is shown to the rungs
again, in the order the trials first reported them (``replay``), deciding as the first run did. A
trial the replay stops - the first run stopped it there, or its driver went away between the
epoch and the decision - is stopped when it reports that epoch again on resuming (a resumed trial
first reports the epoch it continues from, before it trains another: study.execution.trainable; one
without a checkpoint trains again from the start and stops there). A trial
that continues meets the rungs it would have met, and skips those it passed. With one trial at a
time this is the same sequence of decisions as the uninterrupted run (with several, the order in
which trials reach a rung depends on their speed, in either run).
"""

from __future__ import annotations

from dataclasses import dataclass

from ray.tune.schedulers import ASHAScheduler, TrialScheduler

from study.execution.trainable import trial_key
from study.store.trial_store import reported_at

TIME_ATTR = "epoch"  # the trial's own epoch count, which a resumed trial continues


@dataclass(frozen=True)
class _Keyed:
    """A trial as the rungs see it: by its study key."""

    trial_id: str


class ResumableASHA(ASHAScheduler):
    """``ASHAScheduler`` on the trials' epochs and study keys, its rungs refilled from stored epochs."""

    def __init__(self, metric: str, mode: str, max_t: int, grace_period: int, reduction_factor: float,
                 stored: list[tuple[str, int, float]] | None = None):
        super().__init__(time_attr=TIME_ATTR, metric=metric, mode=mode, max_t=max_t, grace_period=grace_period,
                         reduction_factor=reduction_factor)
        self._stopped_before: dict[str, int] = {}  # key -> the epoch the replay stopped it at
        for key, epoch, value in stored or []:
            self.replay(key, epoch, value)

    def replay(self, key: str, epoch: int, value: float) -> None:
        """Show a stored epoch's result to the rungs as its run did when it reported it; a STOP is kept for
        when the resumed trial reports that epoch again."""
        trial = _Keyed(key)
        if key not in self._trial_info:
            super().on_trial_add(None, trial)
        if key in self._stopped_before:
            return  # the first run stopped it before this epoch: only a driver gone before the stop came saw it
        if super().on_trial_result(None, trial, {TIME_ATTR: epoch, self._metric: value}) == TrialScheduler.STOP:
            self._stopped_before[key] = epoch

    def on_trial_add(self, tune_controller, trial):
        key = trial_key(trial.config)
        if key not in self._trial_info:
            super().on_trial_add(tune_controller, _Keyed(key))

    def on_trial_result(self, tune_controller, trial, result):
        key = trial_key(trial.config)
        # stopped where the replay stopped it (its first report, or, a trial trained again from the start, when
        # it reaches that epoch again)
        if key in self._stopped_before and result.get(TIME_ATTR, 0) >= self._stopped_before[key]:
            del self._stopped_before[key]
            return TrialScheduler.STOP
        return super().on_trial_result(tune_controller, _Keyed(key), result)

    def on_trial_complete(self, tune_controller, trial, result):
        keyed = _Keyed(trial_key(trial.config))
        if keyed.trial_id in self._trial_info:
            super().on_trial_complete(tune_controller, keyed, result)

    def on_trial_remove(self, tune_controller, trial):
        self._trial_info.pop(trial_key(trial.config), None)


def stored_epochs(histories: dict[str, list[dict]], metric: str) -> list[tuple[str, int, float]]:
    """Every stored epoch as (trial key, epoch, metric), in the order the trials reported them (by the time kept
    in each epoch's record; records from before it was kept come first, by key and epoch): what
    ``ResumableASHA`` replays."""
    found = [(reported_at(epoch) or 0.0, key, int(epoch["epoch"]), float(epoch[metric]))
             for key, epochs in histories.items() for epoch in epochs
             if epoch.get("epoch") is not None and isinstance(epoch.get(metric), (int, float))]
    return [(key, epoch, value) for _, key, epoch, value in sorted(found)]
