"""The health of where a study's records go: the results directory full or no longer writable, or
the study's lease in the ``--storage`` store lost.

A study that loses its results directory mid-way (a full disk, a file system remounted
read-only, permissions taken away) must stop at once with one line naming the cause, keep every
finished trial, and continue with ``--resume`` once the cause is fixed. ``StorageStopper`` stops
all trials as soon as the directory is in trouble (so failing trials are not retried against a
full disk), and ``check_storage`` turns the trouble into that one line after the trials stopped. A
driver whose lease in the object store was taken over stops the same way: no trial starts after it,
and the line names the lease and the resume command.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ray import tune

from nmt.errors import UserError
from nmt.fileio import STORAGE_ERRNOS, refused_write_cause

MIN_FREE_BYTES = 1 << 20  # below this a checkpoint or a trial record cannot be written safely


def storage_trouble(directory: Path) -> str | None:
    """'full' or 'not writable' (with the reason), or None when ``directory`` takes writes."""
    try:
        if not os.access(directory, os.W_OK | os.X_OK):  # also False on a read-only file system
            return "not writable"
        stats = os.statvfs(directory)
    except OSError as err:
        return f"not writable ({err.strerror or err})"
    if stats.f_bavail * stats.f_frsize < MIN_FREE_BYTES:
        return "full"
    return None


class StorageStopper(tune.Stopper):
    """Stops every trial once the results directory is full or not writable (checked at most
    once a second), once a write of the driver failed for such a reason, or once ``lease`` (a
    ``study.store.remote_study.LeaseKeeper``: anything with ``lost``, the line saying why the study's
    lease is gone, or None) is lost."""

    def __init__(self, directory: Path, every: float = 1.0, lease=None):
        self.directory = Path(directory)
        self.lease = lease
        self.every = every
        self.error: OSError | None = None
        self._checked = 0.0
        self._trouble: str | None = None

    def record(self, error: OSError) -> None:
        """A write of the driver failed: keep the first error; storage errors stop the study."""
        self.error = self.error or error

    def trouble(self, now: bool = False) -> str | None:
        """'full', 'not writable' or None; ``now`` looks at the directory again at once."""
        if self._trouble is None and (now or time.monotonic() - self._checked >= self.every):
            self._checked = time.monotonic()
            self._trouble = storage_trouble(self.directory)
        if self._trouble is None and self.error is not None and self.error.errno in STORAGE_ERRNOS:
            self._trouble = refused_write_cause(self.error)
        return self._trouble

    def __call__(self, trial_id, result) -> bool:
        return False

    def lease_lost(self) -> str | None:
        return None if self.lease is None else self.lease.lost

    def stop_all(self) -> bool:
        return self.lease_lost() is not None or self.trouble() is not None


def check_storage(directory: Path, stopper: StorageStopper, study: str, again: str) -> None:
    """After the trials stopped: one line naming the cause if the results directory was full or
    not writable (finished trials are kept; ``again``, the command that continues the study,
    runs once it is fixed)."""
    resume = f"then resume with: {again} (finished trials are kept)"
    lost = stopper.lease_lost()
    if lost is not None:
        raise UserError(f"study {study} stopped: {lost}; make sure no other driver runs it, {resume}")
    trouble = stopper.trouble(now=True)
    if trouble is None and stopper.error is None:
        return
    if trouble == "full":
        raise UserError(f"study {study} stopped: no space left on the device of {directory}; free some space, {resume}")
    if trouble is not None:
        raise UserError(f"study {study} stopped: its results directory {directory} is {trouble}; make it writable, "
                        f"{resume}")
    error = stopper.error
    raise UserError(f"study {study} stopped: cannot write to {directory} ({error.strerror or error}); fix it, {resume}")
