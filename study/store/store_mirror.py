"""A study's trial store mirrored between a local directory and an object store
(``study.store.object_store``), for clusters whose nodes share no file system.

The local directory keeps the layout of ``study.store.trial_store`` and stays what the trainer and
the tables read; the object store is where the nodes meet. What goes up, and in which order:

- after every epoch, the trial's records (``trial.json``, ``progress.json``, ``history.json``)
  and its checkpoint: the subword models and ``config.yaml`` once, ``best.pt``, then ``state.pt``
  last, so a retry that finds ``state.pt`` finds the rest of that epoch's checkpoint beside it
  (``best.pt`` one epoch ahead of it is the same file the retry writes again: training is
  deterministic);
- when the trial finishes, every file of ``finished/KEY/`` and then ``metrics.json`` written once:
  that marker, as in the local store, is what makes a trial finished, so an upload cut short
  never counts and a second attempt of the same trial cannot overwrite the first one's result.

Coming down (a retry on another node, the driver of ``--resume`` in an empty directory, a table
rebuilt from the URI), the marker is copied last for the same reason.
"""

from __future__ import annotations

import json
from pathlib import Path

from nmt.fileio import write_bytes
from nmt.run_dir import BEST, CONFIG, SRC_SPM, STATE, TGT_SPM
from study.store.object_backend import ObjectStore, StorageError
from study.store.ownership import key_path
from study.store.record_validation import UnreadableRecord, parse_json
from study.store.trial_store import FINISHED, TRIALS, check_record

RECORDS = ("trial.json", "progress.json", "history.json", "status.json", "error.txt")  # a trial's own records
CHECKPOINT = Path("run") / "checkpoint"
CHECKPOINT_ORDER = (CONFIG, SRC_SPM, TGT_SPM, BEST, STATE)  # STATE last: its presence means the set is whole
MARKER = "metrics.json"
RESULTS = ("test.hyp", "config.yaml")  # what the tables and MLflow read of a finished trial (test.hyp first)


class StoreMirror:
    """``local`` (a study's trial store directory) and ``prefix`` in ``store`` hold the same study."""

    def __init__(self, store: ObjectStore, prefix: str, local: Path):
        self.store, self.prefix, self.local = store, prefix.strip("/"), Path(local)

    def _remote(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def _put(self, relative: str) -> None:
        self.store.write(self._remote(relative), (self.local / relative).read_bytes())

    def _local(self, relative: str) -> Path:
        """Where the object ``relative`` (below ``prefix``) goes in the local store, checked before it is written."""
        return key_path(self.local, relative, f"{self.store.where(self.prefix)}/ object")

    def _get(self, relative: str) -> bool:
        target = self._local(relative)
        data = self._fetch(relative)  # a damaged record is refused before it reaches the local store
        if data is None:
            return False
        write_bytes(target, data)  # whole or not at all, like every file of the store
        return True

    # --- going up ----------------------------------------------------------------------

    def push_records(self, key: str) -> None:
        """The trial's records as they are now (after an epoch, a start or the driver's verdict)."""
        for name in RECORDS:
            if (self.local / TRIALS / key / name).is_file():
                self._put(f"{TRIALS}/{key}/{name}")

    def push_checkpoint(self, key: str, static_done: bool = False) -> None:
        """The trial's epoch checkpoint, ``state.pt`` last; ``static_done``: the config and subword
        models went up before (they never change within a run)."""
        folder = f"{TRIALS}/{key}/{CHECKPOINT.as_posix()}"
        for name in CHECKPOINT_ORDER:
            if static_done and name not in (BEST, STATE):
                continue
            if (self.local / folder / name).is_file():
                self._put(f"{folder}/{name}")

    def push_result(self, key: str) -> bool:
        """A finished trial's records, then ``finished/KEY/`` (``push_finished``): True when this call finished the
        trial in the store, False when an earlier attempt already had."""
        self.push_records(key)
        return self.push_finished(key)

    def push_finished(self, key: str) -> bool:
        """``finished/KEY/``, its marker last and written once: True when this call finished the trial
        in the store, False when an earlier attempt already had (its result stays)."""
        folder = self.local / FINISHED / key
        names = sorted(path.name for path in folder.iterdir() if path.is_file() and path.name != MARKER)
        for name in names:
            self._put(f"{FINISHED}/{key}/{name}")
        return self.store.create(self._remote(f"{FINISHED}/{key}/{MARKER}"), (folder / MARKER).read_bytes())

    # --- coming down -------------------------------------------------------------------

    def finished_up(self, key: str) -> bool:
        """Whether the store holds the trial as finished (its marker is there)."""
        return self.store.version(self._remote(f"{FINISHED}/{key}/{MARKER}")) is not None

    def pull_checkpoint(self, key: str) -> bool:
        """The trial's last uploaded checkpoint into the local run directory: True when there was one."""
        folder = f"{TRIALS}/{key}/{CHECKPOINT.as_posix()}"
        if self.store.version(self._remote(f"{folder}/{STATE}")) is None:
            return False
        for name in CHECKPOINT_ORDER:  # state.pt last: a copy cut short is not taken for a checkpoint
            self._get(f"{folder}/{name}")
        return True

    def pull_trial(self, key: str) -> bool:
        """One trial as the store holds it, for the node about to train it: finished (its result,
        marker last: True), or its records and last checkpoint (False)."""
        if self.finished_up(key):
            for remote in self.store.keys(self._remote(f"{FINISHED}/{key}")):
                name = remote.rsplit("/", 1)[-1]
                if name != MARKER:
                    self._get(f"{FINISHED}/{key}/{name}")
            self._get(f"{FINISHED}/{key}/{MARKER}")
            return True
        for name in RECORDS:
            self._get(f"{TRIALS}/{key}/{name}")
        self.pull_checkpoint(key)
        return False

    def pull_records(self) -> list[str]:
        """Every trial's records and every finished trial's results (not their model files) into the
        local store, markers last; the keys of the finished trials. Everything is read and checked
        before anything is written: a damaged object leaves the local store as it was."""
        records, finished = [], []
        for remote in self.store.keys(self.prefix):
            relative = remote[len(self.prefix) + 1:] if self.prefix else remote
            self._local(relative)  # a key that would climb out is refused before any object is read
            parts = relative.split("/")
            if len(parts) == 3 and parts[0] == TRIALS and parts[2] in RECORDS:
                records.append(relative)
            elif len(parts) == 3 and parts[0] == FINISHED and parts[2] == MARKER:
                finished.append(parts[1])
        fetched = [(relative, self._fetch(relative)) for relative in records]
        for key in finished:
            fetched += self._fetch_results(key)
        writes = [(self._local(relative), data) for relative, data in fetched if data is not None]
        for target, data in writes:  # each finished trial's marker comes after its results
            write_bytes(target, data)
        return sorted(finished)

    def pull_results(self, key: str) -> bool:
        """A trial's records and, when it finished, what the tables read of its result (its
        translations and config, then its marker; not its model files): True when it finished."""
        fetched = [(f"{TRIALS}/{key}/{name}", self._fetch(f"{TRIALS}/{key}/{name}")) for name in RECORDS]
        results = self._fetch_results(key)
        writes = [(self._local(relative), data) for relative, data in fetched + results if data is not None]
        for target, data in writes:
            write_bytes(target, data)
        return bool(results)

    def _fetch(self, relative: str) -> bytes | None:
        remote = self._remote(relative)
        data = self.store.read(remote)
        if data is not None and relative.endswith(".json"):
            check_json(self.store.where(remote), data)
        return data

    def _fetch_results(self, key: str) -> list[tuple[str, bytes | None]]:
        """[(relative path, contents)] of a finished trial's results, its marker last; [] when unfinished."""
        marker = f"{FINISHED}/{key}/{MARKER}"
        data = self._fetch(marker)
        if data is None:
            return []
        results = [(f"{FINISHED}/{key}/{name}", self._fetch(f"{FINISHED}/{key}/{name}")) for name in RESULTS]
        # a trial that evaluated on the test set wrote its translations: a marker without them was left by
        # someone removing objects, and the tables would lack the trial's significance tests
        if results[0][1] is None and "test_bleu" in json.loads(data):
            raise StorageError(f"{self.store.where(self._remote(results[0][0]))}: missing beside its trial's "
                               f"marker {MARKER}; delete {self.store.where(self._remote(marker))} and run the "
                               "study with --resume: that trial is trained again, nothing else changes")
        return [*results, (marker, data)]


def check_json(where: str, data: bytes) -> None:
    """A record that came down whole but is not what the tool wrote (edited, truncated on its way in
    by another program) is refused in one line naming the object, before anything is written: not JSON,
    JSON the local store would refuse (a non-finite number, an integer out of range: ``parse_json``), or a
    trial record (``trial_store.RECORD_CHECKS``, by its name) whose fields are wrong."""
    fix = ("delete that object and run the study with --resume: its trial continues from its last checkpoint or is "
           "trained again, nothing else changes")
    try:
        record = parse_json(data.decode("utf-8"), where, fix)
    except (UnicodeDecodeError, UnreadableRecord):
        raise StorageError(f"{where}: not valid JSON (damaged or cut short); nothing was copied from it; {fix}") from None
    check_record(where.rsplit("/", 1)[-1], record, where, fix)
