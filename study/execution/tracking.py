"""MLflow tracking of a study, done by the driver (trials never talk to MLflow).

- One experiment per study (its description shown in the UI), one parent run
  per study run, one child run per trial (``mlflow.parentRunId``).
- A child run: the flattened config as params (keys the trial leaves unset are
  left out); the keys the study varies in one ``varied`` tag and in the run's
  description; tags for label, seed, status, smoke, git commit and package
  versions; learning curves as per-epoch metrics (step = epoch); one-off
  results (test BLEU, chrF, epochs, best epoch, parameters, speed) as metrics
  logged once, which the UI draws as bar charts across runs; one-off facts
  (stop reason, beam, threads, node) as tags; artifacts (config, translations).
- The parent run: the study's table as a logged table and as per-row metrics
  (``bleu/<row label>`` = mean test BLEU over seeds), plus the exported files.
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

import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

from nmt.errors import UserError
from nmt.typed_config import flatten
from study.analysis.tables import still_improving
from study.execution.mlflow_entities import corpus_input, metric_label, mlflow_params, mlflow_tags, tag_value, varied_values
from study.execution.sqlite_store import ensure_store, sqlite_file, store_lock
from study.spec.metrics import logged_at_end, logged_each_epoch, row_logged
from study.spec.options import print_line
from study.store.trial_store import reported_at

log = logging.getLogger(__name__)

OFFLINE_AFTER = 3  # consecutive failed MLflow calls before the driver stops trying
LOCKED_RETRIES = 5  # "database is locked" from a concurrent writer is retried, not lost

TERMINAL = {"ok": "FINISHED", "truncated": "FINISHED", "diverged": "FINISHED", "failed": "FAILED",
            "stopped": "FINISHED"}


# what MLflow logs is declared in the metric registry (study.spec.metrics):
# per-epoch metrics a trial's child run records (step = epoch): its learning curves
EPOCH_LOGGED = logged_each_epoch()
# a trial's results, logged once when it ends
FINAL_LOGGED = logged_at_end()
# the rest of a trial's record that says how it ran, as tags (the record's identity is tagged already)
NOT_TAGGED = {"final", "seed", "label", "status", "trial_key", "cell"}
# the parent run's per-row metrics: table column -> metric name
ROW_LOGGED = row_logged()


RESULTS_TAG = "results_dir"  # every run's tag: the results directory whose driver logged it


def default_tracking_uri(results_dir: Path) -> str:
    return f"sqlite:///{(results_dir / 'mlflow.db').resolve()}"


class StudyTracker:
    def __init__(self, uri: str, study: str, artifact_root: Path | None = None, description: str = "",
                 varied: list[str] = (), run_tags: dict[str, str] | None = None,
                 say: Callable[[str], None] = print_line, log_models: bool = False):
        """``varied``: the config keys the study varies (shown on every child run); ``run_tags``:
        tags of every run of this driver (smoke, git commit, package versions); ``say``: where its
        notes go (a store being built or rebuilt); ``log_models``: a finished trial's run also gets
        its best model (--log-models)."""
        self.say = say
        self.log_models = log_models
        self.uri = uri
        self.study = study
        self.artifact_root = artifact_root
        self.description = description
        self.varied = list(varied)
        self.run_tags = dict(run_tags or {})
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
            # MLflow loads when tracking starts (seconds of start-up), not with the checks before it
            from mlflow.tracking import MlflowClient

            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    # --- setup -------------------------------------------------------------------

    def connect(self) -> None:
        """Reach the store and find or create the study's experiment; one clear error if unreachable."""
        _quiet_mlflow()
        try:
            with store_lock(self.uri):
                if sqlite_file(self.uri) is not None:
                    ensure_store(sqlite_file(self.uri), log=self.say)
                self._find_or_create_experiment()
        except UserError:
            raise
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
        if self.description:  # the experiment's description in the UI
            self.client.set_experiment_tag(self.experiment_id, "mlflow.note.content", self.description)

    def start_parent(self, fingerprint: str, params: dict, parent_id: str | None = None) -> str:
        """Reuse the parent run of a resumed study, or open a new one."""
        if parent_id is not None:
            try:
                if self.client.get_run(parent_id).info.lifecycle_stage == "deleted":
                    raise LookupError("deleted")
                self.client.update_run(parent_id, status="RUNNING")
                self.parent_id = parent_id
                self._safe(self.client.log_batch, parent_id, tags=mlflow_tags({**self.run_tags, "driver": _driver()}))
                return parent_id
            except Exception:
                log.warning("the parent run %s of this study is gone; opening a new one", parent_id)
        note = f"{self.description}\n\nCommand: `{params.get('command', '')}`" if self.description else ""
        run = self.client.create_run(self.experiment_id, run_name=f"{self.study} {time.strftime('%Y-%m-%d %H:%M')}",
                                     tags={"study": self.study, "study_fingerprint": fingerprint, "role": "study",
                                           "driver": _driver(), "mlflow.note.content": note,
                                           "varied": ", ".join(self.varied), **self.run_tags})
        self.parent_id = run.info.run_id
        self._safe(self.client.log_batch, self.parent_id, params=mlflow_params(params))
        if parent_id is not None:
            self._retire_children_of(parent_id)
        return self.parent_id

    def _retire_children_of(self, gone: str) -> None:
        """The child runs of a parent run that was deleted (in the UI) or lost: the new parent's
        children, which ``reconcile`` fills from the trial store, replace them, so they are tagged
        ``superseded_by`` and deleted (MLflow keeps deleted runs restorable)."""
        try:
            orphans = self.client.search_runs([self.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{gone}'",
                                              max_results=50_000)
        except Exception as err:
            self._failed(err)
            return
        for run in orphans:
            self._safe(self.client.set_tag, run.info.run_id, "superseded_by", self.parent_id)
            self._safe(self.client.delete_run, run.info.run_id)

    def close_stale_runs(self, parent_id: str | None = None) -> int:
        """Runs of this study and results directory still RUNNING belong to a driver that is gone:
        close them as KILLED. A run is this results directory's when its ``results_dir`` tag says
        so, when it is (a child of) this study's parent run ``parent_id`` (a results directory that
        moved), or when it has no such tag (a run of an older version). Another results directory's
        driver of a study of the same name, on a shared tracking server, is left alone."""
        parent_id = parent_id or self.parent_id
        mine = self.run_tags.get(RESULTS_TAG)
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
            tags = run.data.tags
            ours = (tags.get(RESULTS_TAG) in (None, mine) or parent_id is not None
                    and parent_id in (run.info.run_id, tags.get("mlflow.parentRunId")))
            if tags.get("study") == self.study and ours:
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
                flat = flatten(config)
                varied = varied_values(flat, self.varied)
                run = self.client.create_run(self.experiment_id, run_name=f"{label} seed {seed}", tags={
                    "mlflow.parentRunId": self.parent_id, "study": self.study, "trial_key": key,
                    "config_hash": key, "label": label, "seed": str(seed), "status": "running", "varied": varied,
                    "mlflow.note.content": f"Row **{label}** of study {self.study}, seed {seed}"
                                           + (f": {varied}" if varied else ""), **self.run_tags})
                run_id = run.info.run_id
                self._created.add(run_id)
                self.client.log_batch(run_id, params=mlflow_params({k: v for k, v in flat.items() if v is not None}))
                if isinstance(config.get("data"), dict):
                    self._safe(self.client.log_inputs, run_id, datasets=[corpus_input(config["data"])])
        except Exception as err:
            self._failed(err)
            return None
        self._children[key] = run_id
        return run_id

    def log_epoch(self, run_id: str | None, metrics: dict, step: int, at: float | None = None) -> None:
        """Log an epoch's metrics once: steps already in the store are skipped (a retried
        trial reports an epoch again; reconcile backfills epochs a killed driver missed). ``at``: when
        the trial reported the epoch (its record's ``REPORTED_AT``, seconds since the epoch), so an epoch
        backfilled later keeps its own time in MLflow's charts; now when the record has none."""
        if run_id is None:
            return
        # MLflow loads when tracking starts (seconds of start-up), not with the checks before it
        from mlflow.entities import Metric

        now = int((at if at is not None else time.time()) * 1000)
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

    def finish_trial(self, run_id: str | None, record: dict, artifacts: list[Path], model: list[Path] = ()) -> None:
        """A trial's results (metrics once, facts as tags), its artifacts, and with ``model`` its best model's
        files under ``model/``; the run ends with the trial's status."""
        if run_id is None:
            return
        # MLflow loads when tracking starts (seconds of start-up), not with the checks before it
        from mlflow.entities import Metric


        metrics = record["metrics"]
        now = int(time.time() * 1000)
        batch = [Metric(k, float(metrics[k]), now, 0) for k in FINAL_LOGGED
                 if isinstance(metrics.get(k), (int, float)) and not isinstance(metrics[k], bool)]
        facts = {k: tag_value(v) for k, v in metrics.items() if k not in FINAL_LOGGED and k not in EPOCH_LOGGED
                 and k not in NOT_TAGGED and v is not None}
        facts.update(status=record["status"], still_improving=str(still_improving(record)).lower())
        if record.get("error"):
            facts["error"] = record["error"][:5000]
        self._safe(self.client.log_batch, run_id, metrics=batch, tags=mlflow_tags(facts))
        for path in artifacts:
            if path.is_file():
                self._safe(self.client.log_artifact, run_id, str(path))
        for path in model:
            if path.is_file():
                self._safe(self.client.log_artifact, run_id, str(path), "model")
        self._safe(self.client.set_terminated, run_id, TERMINAL.get(record["status"], "FINISHED"))

    def supersede_children(self, current: dict[tuple[str, str], str], stored: set[str]) -> int:
        """Child runs of a trial that moved to a new key (a larger budget, a new key scheme) are
        tagged ``superseded_by`` and deleted (MLflow keeps deleted runs restorable): the trial's
        run under its new key, which ``reconcile`` fills with its whole history, replaces them,
        since a run's logged params (its old budget) cannot change. ``current``: {(label, seed):
        key} of the study's trials; ``stored``: the keys in the trial store. A run is retired when
        its row and seed are a trial's with another key and nothing is stored under its own key
        any more - found so rather than from this driver's moves, so that a driver killed between
        the move and this step leaves nothing for the next one to miss."""
        if not current or self.parent_id is None or self.offline:
            return 0
        try:
            children = self.client.search_runs([self.experiment_id],
                                               filter_string=f"tags.mlflow.parentRunId = '{self.parent_id}'",
                                               max_results=50_000)
        except Exception as err:
            self._failed(err)
            return 0
        keys, retired = set(current.values()), 0
        for run in children:
            tags = run.data.tags
            old, new = tags.get("trial_key"), current.get((tags.get("label"), tags.get("seed")))
            if new is None or old in keys or old in stored:
                continue
            try:
                self.client.set_tag(run.info.run_id, "superseded_by", new)
                self.client.delete_run(run.info.run_id)
                retired += 1
            except Exception as err:
                self._failed(err)
        return retired

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
                self.log_epoch(run_id, {k: v for k, v in epoch.items() if k in EPOCH_LOGGED}, int(epoch["epoch"]),
                               reported_at(epoch))
            try:
                run = self.client.get_run(run_id)
                if run.info.status == "FINISHED" and run.data.tags.get("status") == record["status"]:
                    continue
            except Exception as err:
                self._failed(err)
                continue
            self.finish_trial(run_id, record, [Path(p) for p in record.get("artifacts", [])],
                              [Path(p) for p in record.get("model", [])] if self.log_models else [])

    def log_study_table(self, rows) -> None:
        """The study's table on its parent run: the whole table (a logged table the UI shows
        under Artifacts) and each row's mean test BLEU and the like as ``bleu/<row label>``."""
        if self.parent_id is None or rows is None or not len(rows):
            return
        # MLflow loads when tracking starts (seconds of start-up), not with the checks before it
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch, names = [], set()
        for index, row in rows.iterrows():
            name = metric_label(str(row["label"]))
            if name in names:  # two labels that differ only in characters MLflow drops
                name = f"{name} #{index + 1}"
            names.add(name)
            for column, metric in ROW_LOGGED.items():
                value = row.get(column)
                if isinstance(value, (int, float)) and value == value:  # NaN: no seed of the row finished
                    batch.append(Metric(f"{metric}/{name}", float(value), now, 0))
        self._safe(self.client.log_batch, self.parent_id, metrics=batch)
        # log_dict replaces the file (log_table would append the rows again when --extend reuses the run)
        table = rows.astype(object).where(rows.notna(), None)
        self._safe(self.client.log_dict, self.parent_id, {"columns": list(table.columns), "data": table.values.tolist()},
                   "table.json")

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


def _driver() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _one_line(err: Exception) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text[:300]


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
