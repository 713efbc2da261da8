"""The platform's own record of every trial: plain JSON files and nmt run directories under
the study's storage, written atomically (write, then rename). It is the source of truth for
tables, MLflow reconciliation and ``--resume``; Ray's experiment state (pickles) is never read.

Layout under ``results/ray/<study>/``::

    trials/<key>/trial.json     who the trial is: label, row, seed, config, sampled parameters, node
    trials/<key>/progress.json  its metrics after the last finished epoch
    trials/<key>/history.json   the metrics of every epoch (MLflow is reconciled against it)
    trials/<key>/status.json    written by the driver when Ray gave up on it: failed, or stopped early
    trials/<key>/error.txt      the full error of its failed attempts (the tables show the last line)
    trials/<key>/run/           the nmt run while it trains (checkpoint/ is where a retry resumes)
    finished/<key>/             a finished trial: final checkpoint, metrics.json, test.hyp

A trial counts as finished exactly when ``finished/<key>/metrics.json`` exists; everything else
runs again on ``--resume``, from its own checkpoint when it has one.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
from pathlib import Path

from nmt.fileio import write_json, write_lines
from study.store.record_validation import (
    UnreadableRecord,
    check_history,
    check_identity,
    check_mapping,
    check_metrics,
    check_verdict,
    read_json,
)

TRIALS = "trials"
PROGRESS_FILES = ("progress.json", "history.json")  # what a trial records epoch by epoch
FINISHED = "finished"


def _history_record(data: dict, where: str, fix: str) -> dict:
    check_history(data.get("epochs", []), where, fix)
    return data


# each JSON record of the store, by file name, and its check (a finished trial's metrics.json is its marker)
RECORD_CHECKS = {"trial.json": check_identity, "progress.json": check_metrics, "history.json": _history_record,
                 "status.json": check_verdict, "metrics.json": check_metrics}


def check_record(name: str, data: object, where: str, fix: str) -> None:
    """A record named ``name`` read from anywhere (a local file, an object store) checked as this store checks
    its own files: ``BadRecord`` naming ``where`` when its fields are not what the platform writes."""
    if name in RECORD_CHECKS:
        RECORD_CHECKS[name](check_mapping(data, where, fix), where, fix)


# when a trial reported an epoch (seconds since the epoch), kept in each epoch's record: the time MLflow
# logs the epoch at, also when a later driver backfills it
REPORTED_AT = "reported_at"


def reported_at(epoch: dict) -> float | None:
    """An epoch record's report time; None in a record from before it was kept (or a bad value)."""
    value = epoch.get(REPORTED_AT)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


class TrialStore:
    def __init__(self, experiment: Path):
        self.experiment = Path(experiment)

    # --- paths ---------------------------------------------------------------------

    def trial_dir(self, key: str) -> Path:
        return self.experiment / TRIALS / key

    def run_dir(self, key: str) -> Path:
        return self.trial_dir(key) / "run"

    def finished_dir(self, key: str) -> Path:
        return self.experiment / FINISHED / key

    def resume_point(self, key: str) -> Path | None:
        """The trial's own last epoch checkpoint, if it has one."""
        checkpoint = self.run_dir(key) / "checkpoint"
        return checkpoint if (checkpoint / "state.pt").is_file() else None

    def training(self, key: str) -> bool:
        """Whether a process is training the trial now (holds its lock). Read-only: no lock file
        is made, and the shared lock taken to ask is let go at once (a worker starting in that
        instant waits for it, nothing more)."""
        try:
            handle = open(self.trial_dir(key) / ".lock", "rb")  # noqa: SIM115 (flock needs the handle)
        except OSError:
            return False
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
            return False

    def foreign_entries(self) -> list[str]:
        """What lies in the store that the platform does not put there: anything at its top but
        trials/ and finished/, anything but folders in those two (a store is deleted only without)."""
        if not self.experiment.is_dir():
            return []
        foreign = []
        for entry in sorted(self.experiment.iterdir()):
            if entry.name not in (TRIALS, FINISHED) or not entry.is_dir():
                foreign.append(entry.name)
            else:
                foreign += [f"{entry.name}/{child.name}" for child in sorted(entry.iterdir()) if not child.is_dir()]
        return foreign

    # --- written by the trial ------------------------------------------------------

    @contextlib.contextmanager
    def hold(self, key: str):
        """One process at a time trains a trial: a worker of a killed driver can outlive it by
        seconds, and must not write into the run a resumed study continues. The kernel frees
        the lock when its holder dies, so a new attempt waits only for that."""
        self.trial_dir(key).mkdir(parents=True, exist_ok=True)
        with open(self.trial_dir(key) / ".lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def start(self, key: str, identity: dict) -> None:
        """A (re)started trial: who it is; a previous attempt's verdict no longer holds."""
        self.trial_dir(key).mkdir(parents=True, exist_ok=True)
        write_json(self.trial_dir(key) / "trial.json", identity)
        (self.trial_dir(key) / "status.json").unlink(missing_ok=True)

    def forget_progress(self, key: str) -> None:
        """A trial about to train from its start: the epochs an earlier attempt recorded must not
        mix with the new ones (one that reached epoch 34 on a machine whose checkpoint this one
        lacks would otherwise keep epochs the new attempt, stopping sooner, never trains)."""
        for name in PROGRESS_FILES:
            (self.trial_dir(key) / name).unlink(missing_ok=True)

    def progress(self, key: str, metrics: dict) -> None:
        """After an epoch: its metrics, and the epoch history (an epoch trained again after a
        retry replaces its earlier entry)."""
        history = [entry for entry in self.history(key) if entry.get("epoch") != metrics.get("epoch")]
        write_json(self.trial_dir(key) / "history.json", {"epochs": [*history, metrics]})
        write_json(self.trial_dir(key) / "progress.json", metrics)

    def complete_history(self, key: str, epochs: list[dict]) -> None:
        """Add the epochs the record lacks from the run's own history (its checkpoint's): a
        worker killed after an epoch's checkpoint was written but before that epoch's report
        reached this record resumes after that epoch and would never report it again."""
        recorded = {entry.get("epoch") for entry in self.history(key)}
        missing = [epoch for epoch in epochs if epoch.get("epoch") not in recorded]
        if missing:
            history = sorted([*self.history(key), *missing], key=lambda entry: entry.get("epoch", 0))
            write_json(self.trial_dir(key) / "history.json", {"epochs": history})

    def finish(self, key: str, metrics: dict) -> Path:
        """Keep the finished run as ``finished/<key>/`` (staged, then renamed into place) and drop
        the working copy; returns the finished directory."""
        run = self.run_dir(key)
        final = self.install_finished(key, run / "checkpoint", metrics, extra=(run / "test.hyp",))
        shutil.rmtree(run, ignore_errors=True)
        return final

    def install_finished(self, key: str, contents: Path, metrics: dict, extra: tuple[Path, ...] = ()) -> Path:
        """``finished/<key>/`` made of the files in ``contents``, those of ``extra`` that exist and
        ``metrics``, staged and renamed into place: a copy cut short is never taken for a
        finished trial (a trial that finishes, one copied from another study)."""
        final = self.finished_dir(key)
        staged = final.with_name(f"{key}.partial")
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(contents, staged)
        for path in extra:
            if path.is_file():
                shutil.copy(path, staged / path.name)
        write_json(staged / "metrics.json", metrics)  # last: its presence marks a complete copy
        shutil.rmtree(final, ignore_errors=True)  # a damaged copy without metrics.json: not finished
        staged.replace(final)
        return final

    # --- written by the driver -----------------------------------------------------

    def give_up(self, key: str, status: str, error: str = "") -> None:
        """Ray stopped the trial for good (it failed every retry, or a scheduler stopped it)."""
        if self.trial_dir(key).is_dir() and not self.finished_metrics(key):
            write_json(self.trial_dir(key) / "status.json", {"status": status, "error": error})

    def keep_error(self, key: str, text: str) -> Path | None:
        """The full error text of a failed attempt (Ray's own copy lives in a temporary directory)."""
        if not text or not self.trial_dir(key).is_dir():
            return None
        path = self.trial_dir(key) / "error.txt"
        write_lines(path, text.rstrip("\n").split("\n"))
        return path

    # --- read (every record checked as input: study.store.record_validation) -------------

    def finished_metrics(self, key: str) -> dict | None:
        path = self.finished_dir(key) / "metrics.json"
        return _read(path, check_metrics, self._fix(key, finished=True))

    def keys(self) -> list[str]:
        return sorted(path.parent.name for path in (self.experiment / TRIALS).glob("*/trial.json"))

    def identity(self, key: str) -> dict | None:
        return _read(self.trial_dir(key) / "trial.json", check_identity, self._fix(key))

    def last_progress(self, key: str) -> dict:
        return _read(self.trial_dir(key) / "progress.json", check_metrics, self._fix(key)) or {}

    def history(self, key: str) -> list[dict]:
        path = self.trial_dir(key) / "history.json"
        record = _read(path, _history_record, self._fix(key)) or {}  # checked there, once
        return record.get("epochs", [])

    def verdict(self, key: str) -> dict | None:
        return _read(self.trial_dir(key) / "status.json", check_verdict, self._fix(key))

    def check_records(self) -> int:
        """Read every record of the store (``BadRecord`` on the first bad one, before anything
        acts on them); the number of trials checked."""
        finished = self.experiment / FINISHED
        keys = set(self.keys())
        if finished.is_dir():
            keys |= {path.name for path in finished.iterdir() if path.is_dir() and not path.name.endswith(".partial")}
        for key in sorted(keys):
            self.identity(key), self.last_progress(key), self.history(key), self.verdict(key)
            self.finished_metrics(key)
        return len(keys)

    def _fix(self, key: str, finished: bool = False) -> str:
        folder = self.finished_dir(key) if finished else self.trial_dir(key)
        return (f"restore the file, or move the folder {folder} out of the results directory (the trial then "
                f"trains again)")

    def rekey(self, old: str, new: str) -> None:
        """Move a trial's directories from key ``old`` to ``new`` (study.store.migration)."""
        # the finished result first: a move cut short between the two then leaves the record
        # under the old key, which the next run adopts again, not a result nobody claims
        for directory in (self.finished_dir, self.trial_dir):
            if directory(old).exists() and not directory(new).exists():
                directory(old).replace(directory(new))

    def forget(self, key: str) -> None:
        """Drop an unfinished trial (a search sample that a resumed search replaces)."""
        if not self.finished_metrics(key):
            shutil.rmtree(self.trial_dir(key), ignore_errors=True)


def _read(path: Path, check, fix: str) -> dict | None:
    """A record checked as input, or None when it is missing or not JSON at all (cut short by a
    crash: the trial writes it again). A record with bad fields raises ``BadRecord``."""
    try:
        data = read_json(path, fix)
    except UnreadableRecord:
        return None
    if data is None:
        return None
    return check(check_mapping(data, str(path), fix), str(path), fix)
