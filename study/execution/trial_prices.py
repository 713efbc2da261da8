"""What a trial of a study costs, in seconds of training, from what its trials have reported so far in this
run (and the trials that had finished before it): the training time of its row's finished trials; for a row
with none, its time per epoch (a trial of the row under way, or the row's model size against the rows timed:
``study.execution.row_cost.epoch_seconds_for``) times the epochs the finished trials took; for a row with
neither, the study's finished trials; with a machine given, only the trials timed on its CPU type once one
has finished. The progress line's ETA takes the mean of what it knows
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
    """The trials' reported training times, and a trial's price from them (``price``). ``machine``: the CPU
    type this run trains on (``study.store.provenance.cpu_description``); once a trial timed on it has
    finished, only such trials price (a study continued on another machine would otherwise be priced by the
    speed of the machines before: 2-4x apart among the reference studies' records)."""

    def __init__(self, row_work: dict[str, float] | None = None, machine: str = ""):
        # each row's forward products per token (study.execution.row_cost): prices the rows not timed yet from those timed
        self.row_work = dict(row_work or {})
        self.machine = machine
        self.finished: list[tuple[float, str, float | None, str]] = []  # (seconds, row label, epochs, CPU type)
        self.trained: dict[str, tuple[str, float, float]] = {}  # key: (label, training seconds, epochs), under way
        # --time-limit's trials left to the next run (study.execution.time_limit), {key: "ROW seed S"}: not done,
        # no verdict, out of this run's ETA
        self.held_back: dict[str, str] = {}
        self.deadline: float | None = None  # when --time-limit ends (time.time()'s seconds): the ETA line names it

    def note_finished(self, seconds, label: str, epochs=None, cpu=None) -> None:
        """A finished trial's training seconds, epochs and CPU type (a record without its time prices nothing)."""
        if isinstance(seconds, (int, float)) and seconds > 0:
            self.finished.append((float(seconds), label, epochs if isinstance(epochs, (int, float)) and epochs > 0
                                  else None, str(cpu or "")))

    def _pricing(self) -> list[tuple[float, str, float | None, str]]:
        """The finished trials that price: those of this run's CPU type when there are any, else all."""
        here = [trial for trial in self.finished if self.machine and trial[3] == self.machine]
        return here or self.finished

    @property
    def trial_costs(self) -> list[float]:
        """Training seconds of each finished trial that prices."""
        return [seconds for seconds, _, _, _ in self._pricing()]

    def note_progress(self, key: str, label: str, seconds: float, epochs) -> None:
        """Where a trial under way stands: its training seconds and epochs so far."""
        self.trained[key] = (label, seconds, epochs if isinstance(epochs, (int, float)) else 0.0)

    def forget(self, key: str) -> None:
        """The trial ended (finished, failed, stopped): no longer under way."""
        self.trained.pop(key, None)

    def known(self) -> bool:
        """Whether any trial has finished: before that, nothing is priced."""
        return bool(self.finished)

    def price(self, label: str, pick: Pick = statistics.fmean) -> tuple[float | None, str]:
        """(seconds a trial of row ``label`` trains in all, what priced it: ``ROW``, ``UNDER_WAY``, ``SIZED`` or
        ``ANY_ROW``), with ``pick`` taken over the finished trials' costs or epochs; (None, "") before any trial
        finished."""
        pricing = self._pricing()
        if not pricing:
            return None, ""
        costs = [seconds for seconds, row, _, _ in pricing if row == label]
        if costs:
            return pick(costs), ROW
        trial_epochs = [epochs for _, _, epochs, _ in pricing if epochs is not None]
        epochs = pick(trial_epochs) if trial_epochs else None
        rates = self._epoch_rates_under_way()
        if epochs is not None and label in rates:
            return epochs * statistics.fmean(rates[label]), UNDER_WAY
        if epochs is not None and label in self.row_work:
            seconds = epoch_seconds_for(self.row_work[label], self._timed_rows(rates, pricing))
            if seconds is not None:
                return epochs * seconds, SIZED
        return pick([seconds for seconds, _, _, _ in pricing]), ANY_ROW

    def _epoch_rates_under_way(self) -> dict[str, list[float]]:
        rates: dict[str, list[float]] = {}
        for label, seconds, epochs in self.trained.values():
            if epochs > 0:
                rates.setdefault(label, []).append(seconds / epochs)
        return rates

    def _timed_rows(self, rates: dict[str, list[float]], pricing: list) -> list[tuple[float, float]]:
        """(work, seconds an epoch) of every row timed so far, by trials under way or finished (those that price)."""
        finished: dict[str, list[float]] = {}
        for seconds, label, epochs, _ in pricing:
            if epochs is not None:
                finished.setdefault(label, []).append(seconds / epochs)
        per_epoch = {label: statistics.fmean(times) for label, times in {**rates, **finished}.items()}
        return [(self.row_work[label], seconds) for label, seconds in per_epoch.items() if label in self.row_work]
