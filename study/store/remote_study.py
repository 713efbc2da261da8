"""A study run with ``--storage URI``: the driver's side of keeping the trial store and the exports in
an object store (``study.store.object_store``), for clusters whose nodes share no file system.

Before anything else reads the local results directory, the driver checks that the store honours
conditional writes (``check_conditional_writes``), takes the study's lease in the store (a second
driver on the same study is refused in one line, wherever it runs) and brings the stored records
down into it (``study.store.store_mirror``), with ``study.json`` and ``command.txt``
where the local directory has none: so ``--resume`` with the same URI continues the study from any
machine, an empty directory included. The trials mirror their own records and checkpoints
(``study.execution.trainable`` writes through ``study.store.trial_writes``). When the run ends, however
it ends, the driver puts the study's exports and the records it wrote itself (verdicts, errors) up, and
lets the lease go. A driver that lost the lease (another driver took the study over after this one
could not renew it in time) stops its trials (``study.execution.disk_watch``) and puts nothing up: the
store is the other driver's now.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from study.store.object_backend import StorageError
from study.store.object_store import DEFAULT_LEASE_SECONDS, Lease, check_conditional_writes, open_store, take_lease
from study.store.ownership import check_real_tree
from study.store.records import experiment_dir
from study.store.store_mirror import StoreMirror
from study.store.study_transfer import (
    pull_search,
    pull_study_files,
    pull_trials,
    push_finished_trials,
    push_search,
    push_study,
    trial_store_prefix,
)


@contextlib.contextmanager
def mirrored_study(uri: str | None, study: str, study_dir: Path, exp_dir: Path, say, search_db: Path | None = None,
                   lease_seconds: float | None = None, again: str = ""):
    """Hold the study's lease in ``uri`` (``lease_seconds`` unrenewed, default ``DEFAULT_LEASE_SECONDS``, renewed
    every third of it from the moment it is taken) and keep ``study_dir`` and ``exp_dir`` (and a search's Optuna
    study in ``search_db``) mirrored there for the run inside, which gets the ``LeaseKeeper`` (None without a URI:
    then nothing at all happens). A pull refused (a damaged object), or a lease lost, puts nothing up; a lease
    lost while nothing else went wrong is a StorageError line when the run ends, with ``again``, the command
    that resumes the study."""
    if not uri:
        yield None
        return
    store = open_store(uri)
    store.check()
    check_conditional_writes(store)
    asked = time.monotonic()  # before the lease's write: the store's stamp of it is no earlier
    keeper = LeaseKeeper(take_lease(store, f"{trial_store_prefix(study)}/driver.lease",
                                    lease_seconds or DEFAULT_LEASE_SECONDS), say, asked)
    keeper.start()  # renewed while the records come down and go up, which can take longer than the lease
    try:
        finished = pull_trials(store, study, exp_dir)  # checked whole before any of it is written
        if search_db is not None:
            pull_search(store, study, search_db)
        pull_study_files(store, study, study_dir)
        say(f"storage: {uri}: {len(finished)} finished trial(s) of {study} there")
        moved = push_finished_trials(store, study, exp_dir)  # a study run here before, now kept in the store too
        if moved:
            say(f"storage: {uri}: put up {moved} trial(s) of {study} that finished here before")
    except BaseException:
        keeper.stop()
        if not keeper.lost:
            keeper.lease.release()
        raise
    try:
        yield keeper
    finally:
        _end(keeper, store, study, study_dir, exp_dir, search_db)
    if keeper.lost:
        resume = f", then resume with: {again}" if again else ""
        raise StorageError(f"{keeper.lost}; the exports were not put up: make sure no other driver runs the study"
                           f"{resume}")


def _end(keeper: LeaseKeeper, store, study: str, study_dir: Path, exp_dir: Path, search_db: Path | None) -> None:
    """The exports and the Optuna study put up and the lease let go, while the lease is this driver's."""
    keeper.stop()
    if keeper.lost:
        return
    try:
        push_study(store, study, study_dir, exp_dir)
        if search_db is not None:
            push_search(store, study, search_db)
    finally:
        keeper.lease.release()


@contextlib.contextmanager
def store_view(uri: str | None, study: str, results_root: Path):
    """The results root a dry run reads: ``results_root`` itself without a URI; with one, a temporary copy of the
    study's local folders with the store's records brought down into it as a real run would (its study files
    where the local folder has none), so the dry run sees what the run would, and neither ``--results`` nor the
    store is written (no lease is taken: a dry run changes nothing)."""
    if not uri:
        yield results_root
        return
    store = open_store(uri)
    store.check()
    with tempfile.TemporaryDirectory(prefix="rnmt-dry-run-") as folder:
        root = Path(folder)
        for local in (results_root / study, experiment_dir(results_root, study)):
            if local.is_dir():
                check_real_tree(local, "study folder")
                shutil.copytree(local, root / local.relative_to(results_root))
        pull_trials(store, study, experiment_dir(root, study))
        pull_study_files(store, study, root / study)
        yield root


def pull_trial_records(uri: str | None, study: str, exp_dir: Path) -> list[str]:
    """The records the trials put into ``uri`` (those of other nodes among them) into the local trial
    store, markers last; the finished trials' keys ([] without a URI)."""
    if not uri:
        return []
    return pull_trials(open_store(uri), study, exp_dir)


def search_pusher(uri: str | None, study: str, search_db: Path, say, lease: LeaseKeeper | None = None):
    """A function that puts a search's Optuna study up (after each trial that ends: a driver that dies leaves
    the store a search that knows its samples) while ``lease`` is held; a failure is said once, the study goes
    on. None without a URI."""
    if not uri:
        return None
    failed = []

    def push() -> None:
        if lease is not None and lease.lost:
            return
        try:
            push_search(open_store(uri), study, search_db)
        except StorageError as err:
            if not failed:
                say(f"warning: {err} (the Optuna study goes up again when the run ends)")
            failed.append(err)

    return push


def pull_trial_results(uri: str | None, study: str, exp_dir: Path, key: str) -> None:
    """One trial's records and results from ``uri`` (it may have run on another node) before the driver
    reads them; nothing without a URI."""
    if uri:
        StoreMirror(open_store(uri), trial_store_prefix(study), exp_dir).pull_results(key)


class LeaseKeeper:
    """Renews the lease every third of its time in a background thread. ``lost`` (None while the lease is
    held) is the line that says why it is not: another driver took it over (after this one stalled past
    it), or it was not renewed for as long as it lasts (the store unreachable, or a request hanging: by
    then another driver may take it). A failed renewal is said once and tried again every few seconds."""

    def __init__(self, lease: Lease, say, renewed: float | None = None):
        self.lease, self.say = lease, say
        self._renewed = time.monotonic() if renewed is None else renewed  # sent no earlier than this, by this clock
        self._ended: float | None = None  # when the keeper stopped: the lease is not this driver's concern after
        self._lost: str | None = None
        self._failing: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="storage-lease", daemon=True)

    def __reduce__(self):
        # Tune pickles the callbacks and stoppers that see the keeper with the experiment's state, and never runs
        # the copies: the thread and the store's client stay with this driver, a copy keeps only what it said
        return _Copy, (self.lost,)

    @property
    def lost(self) -> str | None:
        now = self._ended if self._ended is not None else time.monotonic()
        if self._lost is None and now - self._renewed >= self.lease.seconds:
            cause = f" ({self._failing})" if self._failing else " (a renewal still unanswered)"
            self._lost = (f"{self.lease.store.where(self.lease.key)}: the lease was not renewed for "
                          f"{self.lease.seconds:g} s{cause}, so another driver may have taken the study over")
        return self._lost

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._ended = time.monotonic()
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.lease.seconds / 3)  # a request hanging past that is left to its daemon thread

    def _run(self) -> None:
        wait = self.lease.seconds / 3
        while not self._stop.wait(wait) and self.lost is None:
            attempt = time.monotonic()
            try:
                held = self.lease.renew()
            except Exception as err:  # noqa: BLE001 - whatever the store raised, the renewal failed; tried again
                if self._failing is None:
                    self.say(f"warning: {err} (renewing the study's lease; tried again until it expires)")
                self._failing = str(err)
                wait = min(self.lease.seconds / 3, 5.0)
                continue
            if not held:
                self._lost = (f"{self.lease.store.where(self.lease.key)}: the lease was taken over by another "
                              "driver, which runs the study now")
                return
            self._renewed, wait, self._failing = attempt, self.lease.seconds / 3, None


@dataclass(frozen=True)
class _Copy:
    """A pickled ``LeaseKeeper``: what it said, no lease."""

    lost: str | None
