"""``--time-limit HOURS``: a run that must end within a time it was given (a machine lent for three hours, a batch
job's allocation) starts, or continues from its checkpoint, only a trial that its price says ends within that
time; the trials under way then finish, and the run ends with the rest left for ``--resume``. A checkpoint does
not outlive a machine that goes away, so a trial that could not finish there is better not started.

Ray Tune starts every trial it has a free worker for, so a trial is held back at its first report of the run,
which comes before it trains or writes anything: a trial that continues from a checkpoint says where it stands,
a new one that it starts (``announce_start``, set for a run with a limit). Its price is what is left of its
row's longest trial so far (``study.execution.trial_prices``, with ``max``); before any trial of the study
finished nothing prices it and a trial starts while time is left, and its first epoch then prices it: its own
time an epoch times the epochs left to its cap (train.max_epochs: the study's budget.epochs; a trial stopped
sooner by its plateau or patience costs less, but nothing says how much less), or the finished trials' price by
then where that is higher, and a trial that would end after the limit is held back there. Once the limit has
passed, no trial starts or continues. The price counts a trial's training and validation, not its start-up or
the final decoding of the test set (seconds to minutes), and comes from the trials timed on this CPU type once
one has finished, from other machines until then: a limit with a margin below the machine's own end is the safe
way to give it."""

from __future__ import annotations

import time
from collections.abc import Callable

from nmt.config import TrainConfig
from nmt.durations import clock
from nmt.errors import UserError
from study.execution.trial_prices import TrialPrices
from study.spec.model import StudySpec
from study.spec.options import RunOptions


def check_time_limit(spec: StudySpec, options: RunOptions) -> None:
    """--time-limit is for grids and ablations trained to their budgets: a search's sample held back would count
    as a finished sample for Optuna, and ASHA's rungs would take a held-back trial's report for its result."""
    if options.how.time_limit is None:
        return
    if spec.fields.search is not None:
        raise UserError(f"study {spec.name}: --time-limit holds back grid trials only; a search's sample held back "
                        f"would count as finished for Optuna: leave out --time-limit, or set search.num_samples to "
                        f"what fits")
    if spec.fields.scheduler.type == "asha":
        raise UserError(f"study {spec.name}: --time-limit with scheduler asha: ASHA's rungs would judge a held-back "
                        f"trial by a report without a score; leave out --time-limit, or the scheduler")


class TimeLimit:
    """A Ray Tune stopper (``__call__`` and ``stop_all``; Ray is not imported here, so ``--dry-run`` checks
    the option without it). It stops a trial at its first report of this run when the limit has passed or the
    trial's price says it ends after it; such a trial goes into ``prices.held_back`` ({trial key: "ROW seed S"}):
    it is not done and gets no verdict. A trial let through unpriced (no trial of the study has finished) is
    asked once more, at its first report with an epoch trained, and then not again: its own time an epoch, times
    the epochs left to its cap (``caps``: trial key -> its train.max_epochs), or the price the finished trials
    give by then where that is higher, prices it, and it is held back there, its checkpoint kept, if that ends
    after the limit. ``now`` is the clock (``time.time``)."""

    def __init__(self, hours: float, started: float, prices: TrialPrices, say: Callable[[str], None],
                 caps: dict[str, float] | None = None, now: Callable[[], float] = time.time):
        self.deadline = started + hours * 3600.0
        self.prices = prices
        prices.deadline = self.deadline  # the progress line, which shares the prices, says when its ETA passes it
        self.say = say
        self.caps = dict(caps or {})
        self.now = now
        self.checked: set[str] = set()
        self.unpriced: set[str] = set()  # let through before anything priced them: asked once more, after an epoch

    def __call__(self, trial_id, result) -> bool:
        key = result.get("trial_key")
        if not isinstance(key, str) or result.get("final") or (key in self.checked and key not in self.unpriced):
            return False  # a finished trial's replay, or a trial already let through (also when Ray retries it)
        epoch = result.get("epochs_trained")
        epoch = float(epoch) if isinstance(epoch, (int, float)) else 0.0
        first = key not in self.checked
        if not first and epoch < 1:
            return False  # an unpriced trial's reports before its first epoch
        self.checked.add(key)
        self.unpriced.discard(key)  # asked now, by the best price there is: not again
        label = str(result.get("label", ""))
        trained = result.get("elapsed_s")
        trained = float(trained) if isinstance(trained, (int, float)) else 0.0
        self.prices.note_progress(key, label, trained, epoch)
        left = self.deadline - self.now()
        needs, how = self._needs(key, label, trained, epoch, first)
        if needs is None and first and left > 0:
            self.unpriced.add(key)  # nothing prices it yet: it starts, and its first epoch will
        if left > 0 and (needs is None or needs <= left):
            return False
        self._hold(key, label, result.get("seed"), epoch, "the limit has passed" if left <= 0 else
                   f"it needs {clock(needs)} more, priced by {how}; {clock(left)} left")
        return True

    def _needs(self, key: str, label: str, trained: float, epoch: float, first: bool) -> tuple[float | None, str]:
        """What is left of the trial: at its first report, by the finished trials' longest, else by its own pace
        up to its cap; asked again after its first epoch (it started unpriced), by the higher of the two."""
        price, how = self.prices.price(label, max)
        by_price = None if price is None else (max(price - trained, 0.0), f"{how} at the longest")
        by_pace = self._own_pace(key, trained, epoch)
        if first and by_price is not None:
            return by_price
        candidates = [found for found in (by_price, by_pace) if found is not None]
        return max(candidates, key=lambda found: found[0]) if candidates else (None, "")

    def _own_pace(self, key: str, trained: float, epoch: float) -> tuple[float, str] | None:
        """What is left of a trial by its own time an epoch up to its cap (None before an epoch, or uncapped)."""
        cap = self.caps.get(key)
        if cap is None or epoch < 1 or trained <= 0:
            return None
        pace = trained / epoch
        return pace * max(cap - epoch, 0.0), f"its own {clock(pace)} an epoch up to its cap of {cap:g} epochs"

    def _hold(self, key: str, label: str, seed, epoch: float, why: str) -> None:
        who = f"{label} seed {seed:g}" if isinstance(seed, (int, float)) else label  # reported as a float
        self.prices.held_back[key] = who
        if epoch > 0:
            self.say(f"held back by --time-limit: {who} at epoch {epoch:g} ({why}); its checkpoint is kept, --resume "
                     f"continues it")
        else:
            self.say(f"held back by --time-limit: {who}, not started ({why}); --resume starts it")

    def stop_all(self) -> bool:
        return False


def epoch_caps(trials) -> dict[str, float]:
    """Each trial's epoch cap (its train.max_epochs, the trainer's default where its config leaves it out), which
    prices a trial that started before anything else could."""
    return {trial.key: float(trial.config.get("train", {}).get("max_epochs", TrainConfig.max_epochs)) for trial in trials}
