"""ASHA that makes the same stop decisions whether a study runs straight through or is stopped and
resumed.

Ray's ASHA keeps, per rung, the metric each trial had when it reached the rung's epoch, and stops a
trial that reaches a rung below the rung's cutoff. Two things of it do not survive a resume, since
every run of a study builds a new Tuner: Tune's ``training_iteration`` starts again from 1 while
the trial continues from its last epoch, and the rungs are empty. Here the time is the trial's own
``epoch``; a trial is known to the rungs by its study key (a resumed trial is a new Tune trial
with a new id); and the rungs are filled again, before any trial runs, from the epochs the trial
store holds (``replay``): what each trial reported at each rung's epoch, in the order of the
epochs. A trial that continues then meets the rungs it would have met, and skips those it passed.
With one trial at a time this is the same sequence of decisions as the uninterrupted run (with
several, the order in which trials reach a rung depends on their speed, in either run).
"""

from __future__ import annotations

from dataclasses import dataclass

from ray.tune.schedulers import ASHAScheduler

from study.execution.trainable import trial_key

TIME_ATTR = "epoch"  # the trial's own epoch count, which a resumed trial continues


@dataclass(frozen=True)
class _Keyed:
    """A trial as the rungs see it: by its study key."""

    trial_id: str


class ResumableASHA(ASHAScheduler):
    """``ASHAScheduler`` on the trials' epochs and study keys, its rungs refilled from stored epochs."""

    def __init__(self, metric: str, mode: str, max_t: int, grace_period: int, reduction_factor: float,
                 stored: dict[str, list[tuple[int, float]]] | None = None):
        super().__init__(time_attr=TIME_ATTR, metric=metric, mode=mode, max_t=max_t, grace_period=grace_period,
                         reduction_factor=reduction_factor)
        for key, epochs in (stored or {}).items():
            self.replay(key, epochs)

    def replay(self, key: str, epochs: list[tuple[int, float]]) -> None:
        """Record a stored trial's (epoch, metric) results in the rungs, as its run did when it reported them."""
        trial = _Keyed(key)
        super().on_trial_add(None, trial)
        bracket = self._trial_info[key]
        for epoch, value in sorted(epochs):
            bracket.on_result(trial, epoch, self._metric_op * value)

    def on_trial_add(self, tune_controller, trial):
        super().on_trial_add(tune_controller, _Keyed(trial_key(trial.config)))

    def on_trial_result(self, tune_controller, trial, result):
        return super().on_trial_result(tune_controller, _Keyed(trial_key(trial.config)), result)

    def on_trial_complete(self, tune_controller, trial, result):
        keyed = _Keyed(trial_key(trial.config))
        if keyed.trial_id in self._trial_info:
            super().on_trial_complete(tune_controller, keyed, result)

    def on_trial_remove(self, tune_controller, trial):
        self._trial_info.pop(trial_key(trial.config), None)


def stored_epochs(histories: dict[str, list[dict]], metric: str) -> dict[str, list[tuple[int, float]]]:
    """Trial key -> its stored epochs' (epoch, metric) pairs: what ``ResumableASHA`` replays."""
    return {key: [(int(epoch["epoch"]), float(epoch[metric])) for epoch in epochs
                  if epoch.get("epoch") is not None and isinstance(epoch.get(metric), (int, float))]
            for key, epochs in histories.items()}
