"""A trial's writes to its study's trial store (``study.store.trial_store``), one call each, which reach
the object store too when the study has one (``--storage``, through ``study.store.store_mirror``): the
trainable writes through this and never mentions the object store.

With an object store, the order is what lets whoever reads the store next (a retry on another node,
the driver of ``--resume`` in an empty directory) trust what it finds:

- when a process takes a trial (``hold``), the store's copy comes down first: its finished result, or
  its records and last checkpoint, so a retry elsewhere continues after the last epoch that went up;
  a trial finished here whose result the store lacks (an upload cut short) goes up instead;
- after every epoch (``record_epoch``), its records and then its checkpoint are up before the call
  returns, so before the caller tells Ray of the epoch;
- when it finishes (``finish``), its records and then ``finished/KEY/``, that folder's marker last
  and written once;
- ``result_in_object_store``: only then may a node drop its own copy of the trial.

Without an object store every write reaches the local trial store only, and nothing makes a request.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from study.store.object_store import open_store
from study.store.store_mirror import StoreMirror
from study.store.study_transfer import trial_store_prefix
from study.store.trial_store import TrialStore


class TrialWrites:
    """The writes of the trials in ``local``, mirrored through ``mirror`` when there is one. Reads go to
    ``local`` itself (after ``hold`` it holds what the object store held)."""

    def __init__(self, local: TrialStore, mirror: StoreMirror | None = None):
        self.local, self.mirror = local, mirror
        self._static_up: set[str] = set()  # trials whose checkpoint config and subword models went up (once a run)
        self._in_object_store: set[str] = set()  # trials whose finished result the object store holds

    @contextlib.contextmanager
    def hold(self, key: str):
        """The trial to this process alone (``TrialStore.hold``), as the object store holds it when there is one;
        yields its finished metrics, or None when it is to train."""
        with self.local.hold(key):
            if self.mirror is not None:
                self._meet_object_store(key)
            yield self.local.finished_metrics(key)

    def _meet_object_store(self, key: str) -> None:
        if self.local.finished_metrics(key) is None:
            # another node may have finished it, or trained some of its epochs
            if self.mirror.pull_trial(key):
                self._in_object_store.add(key)
            return
        if not self.mirror.finished_up(key):  # finished here, its upload cut short: a copy here must not be all
            self.mirror.push_result(key)
        self._in_object_store.add(key)

    def start(self, key: str, identity: dict) -> None:
        """A (re)started trial: who it is (``TrialStore.start``). Here only: the record goes up with the trial's
        first epoch, so a start costs the object store no request."""
        self.local.start(key, identity)

    def forget_progress(self, key: str) -> None:
        """A trial about to train from its start (``TrialStore.forget_progress``). Here only: the first epoch's
        records replace the object store's copy."""
        self.local.forget_progress(key)

    def record_epoch(self, key: str, metrics: dict) -> None:
        """After an epoch: its metrics (``TrialStore.progress``), then the trial's records and its epoch checkpoint
        (``state.pt`` last) up in the object store before this returns: the caller tells Ray of the epoch only
        after, so a retry Ray starts elsewhere continues after it."""
        self.local.progress(key, metrics)
        if self.mirror is not None:
            self.mirror.push_records(key)
            self.mirror.push_checkpoint(key, static_done=key in self._static_up)
            self._static_up.add(key)

    def finish(self, key: str, metrics: dict, epochs: list[dict]) -> None:
        """The trial finished: the epochs its record lacks from the run's own history (``epochs``,
        ``TrialStore.complete_history``), its result kept as ``finished/KEY/`` (``TrialStore.finish``), then its
        records and that result up in the object store, the marker last and once."""
        self.local.complete_history(key, epochs)
        self.local.finish(key, metrics)
        if self.mirror is not None:
            self.mirror.push_result(key)
            self._in_object_store.add(key)

    def result_in_object_store(self, key: str) -> bool:
        """Whether the object store holds the trial's finished result (found there, or put up by this process):
        a node's working copy of the trial may go. False without an object store."""
        return key in self._in_object_store


def open_trial_writes(experiment: Path, storage: str | None) -> TrialWrites:
    """The writes of the trials stored in ``experiment`` (a study's trial store, ``ray/NAME``, or a node's
    scratch copy of it), mirrored to the store at the ``--storage`` URI ``storage`` when there is one."""
    local = TrialStore(experiment)
    if not storage:
        return TrialWrites(local)
    return TrialWrites(local, StoreMirror(open_store(storage), trial_store_prefix(local.experiment.name), local.experiment))
