"""What a trial of a study costs, in seconds of training, from what its trials have reported so far in this
run (and the trials that had finished before it): the training time of its row's finished trials; for a row
with none, its time per epoch (a trial of the row under way, or the row's model size against the rows timed:
``study.execution.row_cost.epoch_seconds_for``) times the epochs the finished trials took; for a row with
neither, the study's finished trials. The progress line's ETA takes the mean of what it knows
(``statistics.fmean``); ``--time-limit`` the longest (``max``): a trial it lets start must end before the
limit, not on average."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from study.execution.row_cost import epoch_seconds_for

Pick = Callable[[Sequence[float]], float]

ROW = "its row's finished trials"
UNDER_WAY = "its row's time per epoch"
SIZED = "its model's size"
ANY_ROW = "the study's finished trials"


class TrialPrices:
    """The trials' reported training times, and a trial's price from them (``price``)."""

    def __init__(self, row_work: dict[str, float] | None = None):
        # each row's forward products per token (study.execution.row_cost): prices the rows not timed yet from those timed
        self.row_work = dict(row_work or {})
        self.trial_costs: list[float] = []  # training seconds of each finished trial
        self.row_costs: dict[str, list[float]] = {}  # the same by row label: rows can differ 3x in speed
        self.trial_epochs: list[float] = []  # epochs each finished trial trained (early stopping varies them)
        self.row_epoch_seconds: dict[str, list[float]] = {}  # seconds an epoch of each finished trial, by row
        self.trained: dict[str, tuple[str, float, float]] = {}  # key: (label, training seconds, epochs), under way
        # --time-limit's trials left to the next run (study.execution.time_limit), {key: "ROW seed S"}: not done,
        # no verdict, out of this run's ETA
        self.held_back: dict[str, str] = {}

    def note_finished(self, seconds, label: str, epochs=None) -> None:
        """A finished trial's training seconds and epochs (a record without them prices nothing)."""
        if isinstance(seconds, (int, float)) and seconds > 0:
            self.trial_costs.append(seconds)
            self.row_costs.setdefault(label, []).append(seconds)
            if isinstance(epochs, (int, float)) and epochs > 0:
                self.trial_epochs.append(epochs)
                self.row_epoch_seconds.setdefault(label, []).append(seconds / epochs)

    def note_progress(self, key: str, label: str, seconds: float, epochs) -> None:
        """Where a trial under way stands: its training seconds and epochs so far."""
        self.trained[key] = (label, seconds, epochs if isinstance(epochs, (int, float)) else 0.0)

    def forget(self, key: str) -> None:
        """The trial ended (finished, failed, stopped): no longer under way."""
        self.trained.pop(key, None)

    def known(self) -> bool:
        """Whether any trial has finished: before that, nothing is priced."""
        return bool(self.trial_costs)

    def price(self, label: str, pick: Pick = statistics.fmean) -> tuple[float | None, str]:
        """(seconds a trial of row ``label`` trains in all, what priced it: ``ROW``, ``UNDER_WAY``, ``SIZED`` or
        ``ANY_ROW``), with ``pick`` taken over the finished trials' costs or epochs; (None, "") before any trial
        finished."""
        if not self.trial_costs:
            return None, ""
        costs = self.row_costs.get(label)
        if costs:
            return pick(costs), ROW
        epochs = pick(self.trial_epochs) if self.trial_epochs else None
        rates = self._epoch_rates_under_way()
        if epochs is not None and label in rates:
            return epochs * statistics.fmean(rates[label]), UNDER_WAY
        if epochs is not None and label in self.row_work:
            seconds = epoch_seconds_for(self.row_work[label], self._timed_rows(rates))
            if seconds is not None:
                return epochs * seconds, SIZED
        return pick(self.trial_costs), ANY_ROW

    def _epoch_rates_under_way(self) -> dict[str, list[float]]:
        rates: dict[str, list[float]] = {}
        for label, seconds, epochs in self.trained.values():
            if epochs > 0:
                rates.setdefault(label, []).append(seconds / epochs)
        return rates

    def _timed_rows(self, rates: dict[str, list[float]]) -> list[tuple[float, float]]:
        """(work, seconds an epoch) of every row timed so far, by trials under way or finished."""
        per_epoch = {label: statistics.fmean(times) for label, times in {**rates, **self.row_epoch_seconds}.items()}
        return [(self.row_work[label], seconds) for label, seconds in per_epoch.items() if label in self.row_work]
