"""MLflow tracking of a study, done by the driver (trials never talk to MLflow).

- One experiment per study, one parent run per study run, one child run per
  trial (``mlflow.parentRunId``) with the flattened config as params,
  per-epoch metrics (step = epoch), final metrics, tags (study, trial_key =
  config hash, label, seed, status) and artifacts (config, test translations).
- Deterministic keys: a resumed study finds its parent run (its id is stored
  in the study's state file) and each trial's child run (by trial_key), so
  nothing is logged twice. An epoch that a trial trains again (restarted
  from a checkpoint older than its last logged epoch, e.g. after a kill) keeps
  the values logged first: MLflow cannot replace a step, only add to it.
- Crash safety: runs of this study left RUNNING by a driver that died are
  closed as KILLED when the study starts again; ``reconcile`` makes the
  MLflow runs match the trials' stored results at the end of every run.
- A tracking server that cannot be reached at the start is one clear error;
  one that disappears mid-study only costs logging: trials keep training,
  results stay in the trial store, and the lost calls are counted and reported.

Default store: SQLite under ``results/`` (never the ``./mlruns`` file store).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import time
from pathlib import Path

from nmt.typed_config import flatten
from nmt.errors import UserError

log = logging.getLogger(__name__)

OFFLINE_AFTER = 3  # consecutive failed MLflow calls before the driver stops trying
LOCKED_RETRIES = 5  # "database is locked" from a concurrent writer is retried, not lost

TERMINAL = {"ok": "FINISHED", "truncated": "FINISHED", "diverged": "FINISHED", "failed": "FAILED",
            "stopped": "FINISHED"}


# per-epoch metrics a trial's child run records (step = epoch)
EPOCH_LOGGED = ("train_loss", "train_ppl", "valid_ppl", "valid_bleu", "best_valid_bleu", "best_epoch", "epochs_trained",
                "steps", "train_tokens", "lr", "train_tokens_per_s", "elapsed_s")


def default_tracking_uri(results_dir: Path) -> str:
    return f"sqlite:///{(results_dir / 'mlflow.db').resolve()}"




class StudyTracker:
    def __init__(self, uri: str, study: str, artifact_root: Path | None = None):
        self.uri = uri
        self.study = study
        self.artifact_root = artifact_root
        self.parent_id: str | None = None
        self.experiment_id: str | None = None
        self.failures = 0
        self.consecutive_failures = 0
        self.first_failure = ""
        self._children: dict[str, str] = {}  # trial_key -> run id
        self._created: set[str] = set()  # child runs this driver created: nothing logged before it
        self._logged: dict[str, dict[str, set[int]]] = {}  # run id -> metric -> steps in the store
        self._client = None

    # Ray pickles the run config, callbacks included, into its experiment state (which the
    # platform never reads back): only plain state is pickled, the client reconnects.
    def __getstate__(self):
        state = dict(self.__dict__)
        state.update(_client=None, failures=0, consecutive_failures=0, first_failure="", _created=set(),
                     _logged={})  # a resumed driver cannot know what was logged after this pickle
        return state

    @property
    def client(self):
        if self._client is None:
            _quiet_mlflow()
            from mlflow.tracking import MlflowClient

            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    # --- setup -------------------------------------------------------------------

    def connect(self) -> None:
        """Reach the store and find or create the study's experiment; one clear error if unreachable."""
        _quiet_mlflow()
        try:
            with _store_lock(self.uri):
                self._find_or_create_experiment()
        except Exception as err:  # mlflow raises many types for an unreachable store
            raise UserError(f"MLflow tracking store {self.uri} cannot be reached ({_one_line(err)}); start the "
                            "server or pass --tracking-uri (e.g. sqlite:///$PWD/results/mlflow.db)") from None

    def _find_or_create_experiment(self) -> None:
        experiment = self.client.get_experiment_by_name(self.study)
        if experiment is None:
            location = None
            if self.artifact_root is not None and self.uri.startswith("sqlite:"):
                location = (self.artifact_root / self.study).resolve().as_uri()
            self.experiment_id = self.client.create_experiment(self.study, artifact_location=location)
        else:
            self.experiment_id = experiment.experiment_id

    def start_parent(self, fingerprint: str, params: dict, parent_id: str | None = None) -> str:
        """Reuse the parent run of a resumed study, or open a new one."""
        if parent_id is not None:
            try:
                self.client.get_run(parent_id)
                self.client.update_run(parent_id, status="RUNNING")
                self.parent_id = parent_id
                self._set_tag(parent_id, "driver", _driver())
                return parent_id
            except Exception:
                log.warning("the parent run %s of this study is gone; opening a new one", parent_id)
        run = self.client.create_run(self.experiment_id, run_name=f"{self.study} {time.strftime('%Y-%m-%d %H:%M')}",
                                     tags={"study": self.study, "study_fingerprint": fingerprint, "role": "study",
                                           "driver": _driver()})
        self.parent_id = run.info.run_id
        self._safe(self.client.log_batch, self.parent_id, params=_params(params))
        return self.parent_id

    def close_stale_runs(self) -> int:
        """Runs of this study still RUNNING belong to a driver that is gone: close them as KILLED."""
        closed = 0
        if self.offline:
            return 0
        try:
            runs = self.client.search_runs([self.experiment_id], filter_string="attributes.status = 'RUNNING'",
                                           max_results=5000)
        except Exception as err:
            self._failed(err)
            return 0
        for run in runs:
            if run.data.tags.get("study") == self.study:
                self._safe(self.client.set_terminated, run.info.run_id, "KILLED")
                closed += 1
        return closed

    # --- trials --------------------------------------------------------------------

    def child(self, key: str, label: str, seed: int, config: dict) -> str | None:
        """The child run of a trial: found by its key under the parent, or created."""
        if key in self._children:
            return self._children[key]
        if self.offline:
            self.failures += 1
            return None
        try:
            found = self.client.search_runs(
                [self.experiment_id],
                filter_string=f"tags.mlflow.parentRunId = '{self.parent_id}' and tags.trial_key = '{key}'",
                max_results=1)
            if found:
                run_id = found[0].info.run_id
                if found[0].info.status != "RUNNING":
                    self.client.update_run(run_id, status="RUNNING")
            else:
                run = self.client.create_run(self.experiment_id, run_name=f"{label} seed {seed}", tags={
                    "mlflow.parentRunId": self.parent_id, "study": self.study, "trial_key": key,
                    "config_hash": key, "label": label, "seed": str(seed), "status": "running"})
                run_id = run.info.run_id
                self._created.add(run_id)
                self.client.log_batch(run_id, params=_params(flatten(config)))
        except Exception as err:
            self._failed(err)
            return None
        self._children[key] = run_id
        return run_id

    def log_epoch(self, run_id: str | None, metrics: dict, step: int) -> None:
        """Log an epoch's metrics once: steps already in the store are skipped (a retried
        trial reports an epoch again; reconcile backfills epochs a killed driver missed)."""
        if run_id is None:
            return
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(k, float(v), now, step) for k, v in metrics.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool)
                 and step not in self._logged_steps(run_id, k)]
        if batch and self._safe(self.client.log_batch, run_id, metrics=batch):
            for metric in batch:
                self._logged[run_id][metric.key].add(step)

    def _logged_steps(self, run_id: str, key: str) -> set[int]:
        """The steps of ``key`` in the store, read once per run and driver."""
        known = self._logged.setdefault(run_id, {})
        if key not in known:
            known[key] = set()
            if run_id not in self._created and not self.offline:
                try:
                    known[key] = {m.step for m in self.client.get_metric_history(run_id, key)}
                except Exception as err:
                    self._failed(err)
        return known[key]

    def finish_trial(self, run_id: str | None, record: dict, artifacts: list[Path]) -> None:
        if run_id is None:
            return
        from mlflow.entities import Metric

        metrics = record["metrics"]
        now = int(time.time() * 1000)
        step = int(metrics.get("epochs", 0) or 0)
        batch = [Metric(k, float(v), now, step) for k, v in metrics.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("final", "seed")]
        self._safe(self.client.log_batch, run_id, metrics=batch)
        self._set_tag(run_id, "status", record["status"])
        from study.tables import still_improving

        self._set_tag(run_id, "still_improving", str(still_improving(record)).lower())
        if record.get("error"):
            self._set_tag(run_id, "error", record["error"][:5000])
        for path in artifacts:
            if path.is_file():
                self._safe(self.client.log_artifact, run_id, str(path))
        self._safe(self.client.set_terminated, run_id, TERMINAL.get(record["status"], "FINISHED"))

    def reconcile(self, records: list[dict]) -> None:
        """Make MLflow match the trial store: one finished child run per ended trial, with
        every epoch of its history (a killed driver misses the reports in flight)."""
        for record in records:
            if record["status"] == "running":
                continue
            run_id = self.child(record["key"], record["label"], record["seed"], record["config"])
            if run_id is None:
                continue
            for epoch in record.get("history", []):
                self.log_epoch(run_id, {k: v for k, v in epoch.items() if k in EPOCH_LOGGED}, int(epoch["epoch"]))
            try:
                run = self.client.get_run(run_id)
                if run.info.status == "FINISHED" and run.data.tags.get("status") == record["status"]:
                    continue
            except Exception as err:
                self._failed(err)
                continue
            self.finish_trial(run_id, record, [Path(p) for p in record.get("artifacts", [])])

    def finish_parent(self, status: str, artifacts: list[Path] = ()) -> None:
        if self.parent_id is None:
            return
        for path in artifacts:
            if path.is_file():
                self._safe(self.client.log_artifact, self.parent_id, str(path))
        self._safe(self.client.set_terminated, self.parent_id, status)

    # --- failure accounting --------------------------------------------------------

    @property
    def offline(self) -> bool:
        return self.consecutive_failures >= OFFLINE_AFTER

    def _set_tag(self, run_id: str, key: str, value: str) -> None:
        self._safe(self.client.set_tag, run_id, key, value)

    def _safe(self, fn, *args, **kwargs) -> bool:
        """Call MLflow; a failure is counted and reported once, never raised. A store that fails
        OFFLINE_AFTER times in a row is given up for the rest of the run (each call would wait
        for its timeout), and the calls skipped from then on are counted as lost too.
        True if the call went through."""
        if self.offline:
            self.failures += 1
            return False
        for attempt in range(LOCKED_RETRIES + 1):
            try:
                fn(*args, **kwargs)
                self.consecutive_failures = 0
                return True
            except Exception as err:
                if "database is locked" in str(err) and attempt < LOCKED_RETRIES:
                    time.sleep(0.2 * (attempt + 1))  # another study writes to the same SQLite store
                    continue
                self._failed(err)
                return False

    def _failed(self, err: Exception) -> None:
        self.failures += 1
        self.consecutive_failures += 1
        if self.failures == 1:
            self.first_failure = _one_line(err)
            print(f"warning: MLflow logging failed ({self.first_failure}); trials go on and results stay in the "
                  "trial store", flush=True)
        if self.consecutive_failures == OFFLINE_AFTER:
            print(f"warning: MLflow failed {OFFLINE_AFTER} times in a row; no more logging in this run (lost calls "
                  f"are counted; python -m study.table {self.study} rebuilds the tables from the trial store)",
                  flush=True)


def _params(flat: dict) -> list:
    from mlflow.entities import Param

    return [Param(str(k)[:250], str(v)[:6000]) for k, v in flat.items()]


def _driver() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _one_line(err: Exception) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text[:300]


@contextlib.contextmanager
def _store_lock(uri: str):
    """Two studies creating the same new SQLite store at once would race on its schema
    migration; a file lock next to the database serialises that first contact."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    path = Path(uri[len("sqlite:///"):].split("?", 1)[0] + ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _quiet_mlflow() -> None:
    """MLflow logs database migrations and more at INFO; the study's own output says what matters.
    An HTTP tracking server that is down fails a call in seconds, not after minutes of retries."""
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")
    for name in ("mlflow", "alembic", "sqlalchemy"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # it logs every database error with a traceback, then raises it; the tracker counts each
    # failed call and reports the first in one line
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
