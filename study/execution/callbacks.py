"""Ray Tune callbacks of the driver: live progress, MLflow logging, and the driver's part of
the trial store (which trials Ray gave up on)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Container

from ray import tune

from nmt.durations import clock
from study.execution.disk_watch import StorageStopper
from study.execution.row_cost import finishing_time
from study.execution.tracking import EPOCH_LOGGED, StudyTracker
from study.execution.trainable import SAMPLE, sampled_params, trial_config, trial_key
from study.execution.trial_prices import ANY_ROW, SIZED, TrialPrices
from study.spec.model import MetricSpec
from study.spec.options import print_line
from study.store.records import error_summary, search_label, trial_record
from study.store.trial_store import TrialStore, reported_at


def _trial_key(trial) -> tuple[str, str, int, dict]:
    info, tree = trial_config(trial.config)
    sampled = sampled_params(trial.config)
    label = info["label"]
    if SAMPLE in trial.config:

        label = search_label(trial.config[SAMPLE], sampled)
    return trial_key(trial.config), label, info["seed"], tree


class VerdictCallback(tune.Callback):
    """Records in the trial store when Ray gives up on a trial: ``failed`` once every retry
    failed, ``stopped`` when a scheduler (asha) ended it early. Trials stopped because the
    results directory is in trouble get no verdict (they run again on --resume), nor do those ``--time-limit``
    held back (``held_back``, their keys), and a failed write here goes to the storage stopper, which ends
    the study with one line."""

    def __init__(self, store: TrialStore, storage: StorageStopper, held_back: Container[str] = frozenset()):
        self.store = store
        self.storage = storage
        self.held_back = held_back

    def _write(self, trial, write, *args) -> None:
        if self.storage.trouble() is not None:
            return
        try:
            write(trial_key(trial.config), *args)
        except OSError as err:
            self.storage.record(err)

    def _give_up(self, trial, status: str, error: str = "") -> None:
        self._write(trial, self.store.give_up, status, error)

    def _keep_error(self, trial) -> None:
        self._write(trial, self.store.keep_error, trial.get_error() or "")

    def on_trial_recover(self, iteration, trials, trial, **info):
        self._keep_error(trial)

    def on_trial_error(self, iteration, trials, trial, **info):
        # a trial that failed before it recorded who it is (its store unreachable on its first step, its node's
        # records elsewhere) is recorded here, so that it lists as failed, not as never started
        self._write(trial, self._identify, trial)
        self._keep_error(trial)
        self._give_up(trial, "failed", error_summary(trial))

    def _identify(self, key: str, trial) -> None:
        if not (self.store.trial_dir(key) / "trial.json").is_file():
            info, tree = trial_config(trial.config)
            self.store.start(key, {"key": key, "label": info["label"], "row": info["row"], "seed": info["seed"],
                                   "config": tree, "params": sampled_params(trial.config),
                                   "sample": trial.config.get(SAMPLE)})

    def on_trial_complete(self, iteration, trials, trial, **info):
        if not (trial.last_result or {}).get("final") and trial_key(trial.config) not in self.held_back:
            self._give_up(trial, "stopped")


class MlflowCallback(tune.Callback):
    """Per-epoch metrics of every trial into its MLflow child run, as results arrive; the run
    ends (final metrics, artifacts, status) when its trial ends, not when the study does."""

    def __init__(self, tracker: StudyTracker, store: TrialStore, storage: StorageStopper,
                 pull: Callable[[str], None] | None = None):
        self.tracker = tracker
        self.store = store
        self.storage = storage
        self.pull = pull  # with --storage: brings a trial's records down (it may have run on another node)

    def _finish(self, trial) -> None:

        if self.storage.trouble() is not None:
            return  # the results directory is in trouble: the study stops, --resume reconciles
        if self.pull is not None:
            self.pull(trial_key(trial.config))
        record = trial_record(self.store, trial_key(trial.config))
        if record is not None and record["status"] != "running":
            self.tracker.reconcile([record])

    def on_trial_complete(self, iteration, trials, trial, **info):
        self._finish(trial)

    def on_trial_error(self, iteration, trials, trial, **info):
        self._finish(trial)

    def _run_id(self, trial):
        key, label, seed, tree = _trial_key(trial)
        return self.tracker.child(key, label, seed, tree)

    def on_trial_start(self, iteration, trials, trial, **info):
        self._run_id(trial)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if result.get("final") or "epoch" not in result:
            return  # final metrics are logged by the driver's reconcile step, with the artifacts; a start has none
        step = int(result.get("epoch", result.get("training_iteration", 0)))
        metrics = {k: v for k, v in result.items() if k in EPOCH_LOGGED}
        self.tracker.log_epoch(self._run_id(trial), metrics, step, reported_at(result))


class TrialEndCallback(tune.Callback):
    """Calls ``action`` whenever a trial ends (finished, failed or stopped)."""

    def __init__(self, action: Callable[[], None]):
        self.action = action

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.action()

    def on_trial_error(self, iteration, trials, trial, **info):
        self.action()


class OptunaLinkCallback(tune.Callback):
    """Each Optuna trial (optuna-dashboard) names its table row, trial key and MLflow run as
    user attributes, set when its Ray trial starts (its child run exists by then)."""

    def __init__(self, storage_url: str, study_name: str, tracker: StudyTracker):
        self.storage_url = storage_url
        self.study_name = study_name
        self.tracker = tracker
        self.failed = False
        self._storage = None

    def __getstate__(self):  # Ray pickles callbacks; the database connection is reopened
        return {**self.__dict__, "_storage": None}

    def on_trial_start(self, iteration, trials, trial, **info):
        if SAMPLE not in trial.config:
            return
        # optuna loads for search studies only
        import optuna

        key, label, seed, tree = _trial_key(trial)
        links = {"table_row": label, "trial_key": key, "seed": seed, "mlflow_run_id": self.tracker.child(key, label, seed, tree),
                 "mlflow_experiment_id": self.tracker.experiment_id, "mlflow_tracking_uri": self.tracker.uri}
        try:
            if self._storage is None:
                self._storage = optuna.storages.RDBStorage(self.storage_url)
            study_id = self._storage.get_study_id_from_name(self.study_name)
            trial_id = self._storage.get_trial_id_from_study_id_trial_number(study_id, trial.config[SAMPLE])
            for name, value in links.items():
                if value is not None:
                    self._storage.set_trial_user_attr(trial_id, name, value)
        except Exception as err:  # a dashboard link is not worth a study: say so once and go on
            if not self.failed:
                print(f"warning: cannot link Optuna trials to their rows ({' '.join(str(err).split())[:200]})",
                      flush=True)
            self.failed = True


class ProgressCallback(tune.Callback):
    """One status line on every trial event (and at most every ``every`` seconds otherwise):
    running / done / diverged / failed, the best result so far and an ETA."""

    def __init__(self, total: int, metric: MetricSpec, concurrency: int, every: float = 30.0,
                 finished_before: dict[str, dict] | None = None, planned: dict[str, str] | None = None,
                 say: Callable[[str], None] = print_line, prices: TrialPrices | None = None):
        self.say = say  # progress lines: stdout, or the caller of study.api.run_study
        self.total = total
        self.metric = metric.name  # the best so far, by the study's first metric
        self.mode = metric.mode
        self.concurrency = max(1, concurrency)
        self.every = every
        self.started = time.time()
        self.last_line = 0.0
        self.best: tuple[float, str] | None = None
        self.finished: dict[str, str] = {}
        # the ETA counts trial time the trials report, not the driver's clock: a resumed study
        # replays its finished trials in seconds and continues the others from their checkpoints
        self.prices = prices if prices is not None else TrialPrices()  # with rows' sizes: study.execution.trial_prices
        # a grid's trials, {key: label}, so the ETA can price the ones not started by their rows
        self.planned = dict(planned or {})
        # a resumed study's trials that had finished ({key: stored metrics with their "label"}): done from
        # the start, though Tune replays each only when the grid reaches it, and their training time counts
        self.finished_before = dict(finished_before or {})
        self.ended_keys: set[str] = set()  # keys of the trials this run has seen end
        for metrics in self.finished_before.values():
            self._note_best(metrics.get(self.metric), metrics.get("label", ""))
            self.prices.note_finished(metrics.get("elapsed_seconds"), metrics.get("label", ""), metrics.get("epochs"),
                                      metrics.get("cpu"))

    def on_trial_start(self, iteration, trials, trial, **info):
        self._print(trials, force=not self.last_line)  # the first start, then completions and every 30 s

    def on_trial_result(self, iteration, trials, trial, result, **info):
        key, label = _trial_key(trial)[:2]
        self._note_best(result.get(self.metric), label)
        if result.get("final"):
            self.finished[trial.trial_id] = result.get("status", "ok")
            self.prices.forget(key)
            before = key in self.finished_before
            self.ended_keys.add(key)
            if not before:
                self.prices.note_finished(result.get("elapsed_seconds"), label, result.get("epochs"), result.get("cpu"))
            self._print_finished(trial, result, before)
        elif isinstance(result.get("elapsed_s"), (int, float)):
            self.prices.note_progress(key, label, result["elapsed_s"], result.get("epochs_trained"))
        self._print(trials)

    def on_trial_complete(self, iteration, trials, trial, **info):
        key = _trial_key(trial)[0]
        if key not in self.prices.held_back:  # a trial held back is not done: the next run starts or continues it
            self.finished.setdefault(trial.trial_id, "stopped")
        self.ended_keys.add(key)  # counted once, by its trial, from now on
        self.prices.forget(key)
        self._print(trials, force=True)

    def on_trial_recover(self, iteration, trials, trial, **info):

        key, label, seed, _ = _trial_key(trial)
        self.say(f"[{clock(time.time() - self.started)}] trial {label} seed {seed} failed ({error_summary(trial)}); "
                 f"retrying it from its last checkpoint")

    def on_trial_error(self, iteration, trials, trial, **info):
        self.finished[trial.trial_id] = "failed"
        key = _trial_key(trial)[0]
        self.ended_keys.add(key)
        self.prices.forget(key)
        self._print(trials, force=True)

    def _note_best(self, value, label: str) -> None:
        if isinstance(value, (int, float)) and math.isfinite(value):
            if self.best is None or (value > self.best[0] if self.mode == "max" else value < self.best[0]):
                self.best = (value, label)

    def _print_finished(self, trial, result: dict, before: bool = False) -> None:
        """One line per finished trial: its row, seed, training progress and scores."""
        _, label, seed, _ = _trial_key(trial)
        epochs, best = result.get("epochs"), result.get("best_epoch")
        scores = ", ".join(f"{name} {result[key]:.2f}" for name, key in (("valid BLEU", "valid_bleu"),
                                                                         ("test BLEU", "test_bleu"))
                           if isinstance(result.get(key), (int, float)))
        progress = f"{epochs:g} epoch{'' if epochs == 1 else 's'} (best {best:g})" \
            if isinstance(epochs, (int, float)) and isinstance(best, (int, float)) else ""
        self.say(f"[{clock(time.time() - self.started)}] done: {label} seed {seed}: {result.get('status', 'ok')}, "
                 f"{', '.join(part for part in (progress, scores) if part)}"
                 f"{' (finished before this run)' if before else ''}")

    def _print(self, trials, force: bool = False) -> None:
        now = time.time()
        if not force and now - self.last_line < self.every:
            return
        self.last_line = now
        # a trial finished before this run is RUNNING only while Tune replays its stored result: not training
        running = sum(t.status == "RUNNING" and t.trial_id not in self.finished
                      and _trial_key(t)[0] not in self.finished_before for t in trials)
        ended = list(self.finished.values()) + [metrics.get("status", "ok") for key, metrics in
                                                self.finished_before.items() if key not in self.ended_keys]
        done = len(ended)
        counts = {s: sum(v == s for v in ended) for s in ("truncated", "diverged", "failed", "stopped")}
        extra = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        held = sum(key in self.prices.held_back for key in self.ended_keys)
        best = f" | best {self.metric} {self.best[0]:.2f} ({self.best[1]})" if self.best else ""
        self.say(f"[{clock(now - self.started)}] trials: {running} running, {done}/{self.total} done"
                 f"{' (' + extra + ')' if extra else ''}{f', {held} held back by --time-limit' if held else ''}"
                 f"{best}{self._eta(done + held)}")

    def _eta(self, ended: int) -> str:
        """A trial not started costs the mean training time of its row's finished trials, a trial under
        way the rest of that mean; ``concurrency`` of them run at once. A row with no finished trial but
        one under way is priced at that trial's time per epoch times the mean epochs of the finished
        trials (a deeper row's epochs cost more); a row with neither at the time per epoch its model's
        size predicts from the rows timed so far (``study.execution.row_cost.epoch_seconds_for``), times those
        mean epochs; a row without a size, or a search's samples, at the mean finished trial
        (``study.execution.trial_prices``). The line says how many rows are priced by size or at the mean
        trial. The trials share the ``concurrency`` workers as Tune hands them out (``finishing_time``), so the
        last trials of a study, fewer than the workers, cost their own length, not a share of it. Trials
        held back by ``--time-limit`` are left to the next run and out of the ETA; where the ETA ends after
        the limit (``prices.deadline``), the line says so, since the trials past it will be held back then."""
        prices = self.prices
        if not prices.known() or ended >= self.total:
            return ""
        how_priced: dict[str, set[str]] = {SIZED: set(), ANY_ROW: set()}

        def expected(label: str) -> float:
            seconds, how = prices.price(label)
            how_priced.get(how, set()).add(label)
            return seconds

        under_way = [max(expected(label) - seconds, 0.0) for label, seconds, _ in prices.trained.values()]
        if self.planned:
            queued = [expected(label) for key, label in self.planned.items()
                      if key not in prices.trained and key not in self.ended_keys and key not in self.finished_before]
        else:
            queued = [statistics.fmean(prices.trial_costs)] * max(self.total - ended - len(prices.trained), 0)
        sized, untimed = how_priced[SIZED], how_priced[ANY_ROW]
        notes = [f"{len(rows)} row{'' if len(rows) == 1 else 's'} not timed yet, priced {how}"
                 for rows, how in ((sized, "by its model's size" if len(sized) == 1 else "by their models' size"),
                                   (untimed, "at the mean trial")) if rows]
        remaining = finishing_time(under_way, queued, self.concurrency)
        if prices.deadline is not None and time.time() + remaining > prices.deadline:
            left = prices.deadline - time.time()
            notes.append("--time-limit has passed: no trial starts, those under way finish" if left <= 0 else
                         f"--time-limit ends in {clock(left)}: trials that would end after it wait for --resume")
        return f" | ETA {clock(remaining)}{' (' + '; '.join(notes) + ')' if notes else ''}"
