"""A study run with ``--storage URI``: the driver's side of keeping the trial store and the exports in
an object store (``study.store.object_store``), for clusters whose nodes share no file system.

Before anything else reads the local results directory, the driver takes the study's lease in the
store (a second driver on the same study is refused in one line, wherever it runs) and brings the
stored records down into it (``study.store.store_mirror``), with ``study.json`` and ``command.txt``
where the local directory has none: so ``--resume`` with the same URI continues the study from any
machine, an empty directory included. The trials mirror their own records and checkpoints
(``study.execution.trainable``). When the run ends, however it ends, the driver puts the study's
exports and the records it wrote itself (verdicts, errors) up, and lets the lease go.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

from nmt.fileio import write_bytes
from study.store.object_store import Lease, StorageError, open_store, take_lease
from study.store.store_mirror import StoreMirror
from study.store.study_state import STATE_FILE
from study.store.trial_store import TrialStore

LEASE_SECONDS = 120.0  # renewed every third of it; a driver that died frees the study after this long
STUDY_FILES = (STATE_FILE, "command.txt")  # what --resume needs of the study folder


def trial_store_prefix(study: str) -> str:
    return f"ray/{study}"


@contextlib.contextmanager
def mirrored_study(uri: str | None, study: str, study_dir: Path, exp_dir: Path, say):
    """Hold the study's lease in ``uri`` and keep ``study_dir`` and ``exp_dir`` mirrored there for the
    run inside; nothing at all without a URI."""
    if not uri:
        yield
        return
    store = open_store(uri)
    store.check()
    lease = take_lease(store, f"{trial_store_prefix(study)}/driver.lease", LEASE_SECONDS)
    renewal = _Renewal(lease, say)
    try:
        _pull_study_files(store, study, study_dir)
        finished = pull_trial_records(uri, study, exp_dir)
        say(f"storage: {uri}: {len(finished)} finished trial(s) of {study} there")
        renewal.start()
        yield
    finally:
        renewal.stop()
        try:
            _push_study(store, study, study_dir, exp_dir)
        finally:
            lease.release()


def pull_trial_records(uri: str | None, study: str, exp_dir: Path) -> list[str]:
    """The records the trials put into ``uri`` (those of other nodes among them) into the local trial
    store, markers last; the finished trials' keys ([] without a URI)."""
    if not uri:
        return []
    return StoreMirror(open_store(uri), trial_store_prefix(study), exp_dir).pull_records()


def _pull_study_files(store, study: str, study_dir: Path) -> None:
    for name in STUDY_FILES:
        data = store.read(f"{study}/{name}")
        if data is not None and not (study_dir / name).exists():
            write_bytes(study_dir / name, data)


def _push_study(store, study: str, study_dir: Path, exp_dir: Path) -> None:
    """The exports (every file of the study folder) and each trial's records as the driver left them."""
    if study_dir.is_dir():
        for path in sorted(study_dir.rglob("*")):
            if path.is_file() and not path.is_symlink():
                store.write(f"{study}/{path.relative_to(study_dir).as_posix()}", path.read_bytes())
    mirror = StoreMirror(store, trial_store_prefix(study), exp_dir)
    for key in TrialStore(exp_dir).keys():
        mirror.push_records(key)


class _Renewal:
    """Renews the lease every third of its time in a background thread; a lease lost (taken over after
    this driver stalled past it) is said once: the other driver now owns the study."""

    def __init__(self, lease: Lease, say):
        self.lease, self.say = lease, say
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="storage-lease", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.lease.seconds / 3):
            try:
                self.lease.renew()
            except StorageError as err:
                self.say(f"warning: {err}")
                return
