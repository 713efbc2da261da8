"""A trial's writes through its one store interface (study.store.trial_writes): without an object store they
reach the local trial store only; with one (a ``file://`` directory here) every write also reaches it, in the
order the guarantees need: an epoch's records and checkpoint (``state.pt`` last) are up before ``record_epoch``
returns, a finished trial's marker goes up last and once, and a node may drop its copy of a trial only once
the object store holds its result."""

from __future__ import annotations

import json

import pytest

from study.store.directory_backend import DirectoryStore
from study.store.object_backend import StorageError
from study.store.store_mirror import StoreMirror
from study.store.trial_store import TrialStore
from study.store.trial_writes import TrialWrites, open_trial_writes

KEY = "0123456789ab"
IDENTITY = {"key": KEY, "label": "GRU", "row": 0, "seed": 1, "config": {}, "params": {}, "sample": None}
RECORDS_UP = [f"ray/s/trials/{KEY}/{name}" for name in ("trial.json", "progress.json", "history.json")]
CHECKPOINT_UP = f"ray/s/trials/{KEY}/run/checkpoint"


class RecordingStore(DirectoryStore):
    """A directory store that notes every object put into it, in order; ``refuse``: keys whose write fails (an
    upload cut short by a lost network)."""

    def __init__(self, root, refuse: tuple[str, ...] = ()):
        super().__init__(root)
        self.puts: list[str] = []
        self.refuse = refuse

    def write(self, key, data):
        self._refused(key)
        super().write(key, data)
        self.puts.append(key)

    def create(self, key, data):
        self._refused(key)
        made = super().create(key, data)
        self.puts.append(f"{'created' if made else 'refused'} {key}")
        return made

    def _refused(self, key):
        if any(key.endswith(name) for name in self.refuse):
            raise StorageError(f"{self.where(key)}: cannot write (ConnectionError)")


def node(tmp_path, name: str, remote: RecordingStore | None) -> TrialWrites:
    """The writes of one node's copy of study s (its trial store ``NAME/ray/s``), mirrored to ``remote``."""
    local = TrialStore(tmp_path / name / "ray" / "s")
    return TrialWrites(local, None if remote is None else StoreMirror(remote, "ray/s", local.experiment))


def train_epoch(writes: TrialWrites, epoch: int) -> None:
    """What nmt's trainer leaves after an epoch (its checkpoint), then the trainable's report of it."""
    checkpoint = writes.local.run_dir(KEY) / "checkpoint"
    checkpoint.mkdir(parents=True, exist_ok=True)
    for name, data in {"config.yaml": b"model: {}\n", "src.model": b"spm", "tgt.model": b"spm",
                       "best.pt": b"best%d" % epoch, "state.pt": b"state%d" % epoch}.items():
        (checkpoint / name).write_bytes(data)
    writes.record_epoch(KEY, {"epoch": epoch, "valid_bleu": 10.0 * epoch})


def train(writes: TrialWrites, epochs: int, test_bleu: float) -> None:
    """What the trainable writes of a trial it holds, from its start to its end."""
    writes.start(KEY, IDENTITY)
    for epoch in range(1, epochs + 1):
        train_epoch(writes, epoch)
    (writes.local.run_dir(KEY) / "test.hyp").write_text("ein Hund\n")
    writes.finish(KEY, {"status": "ok", "epochs": epochs, "test_bleu": test_bleu},
                  [{"epoch": epoch, "valid_bleu": 10.0 * epoch} for epoch in range(1, epochs + 1)])


def train_and_finish(writes: TrialWrites, epochs: int, test_bleu: float) -> None:
    with writes.hold(KEY) as finished:
        assert finished is None
        train(writes, epochs, test_bleu)


def test_without_an_object_store_every_write_stays_in_the_local_store(tmp_path):
    writes = open_trial_writes(tmp_path / "results" / "ray" / "s", None)
    assert writes.mirror is None
    train_and_finish(writes, 2, 31.5)
    assert writes.local.finished_metrics(KEY)["test_bleu"] == 31.5
    assert [entry["epoch"] for entry in writes.local.history(KEY)] == [1, 2]
    assert writes.result_in_object_store(KEY) is False  # a node's copy is all there is: it must stay
    assert [path.name for path in tmp_path.iterdir()] == ["results"]


def test_an_epoch_is_in_the_object_store_before_record_epoch_returns_its_state_last(tmp_path):
    remote = RecordingStore(tmp_path / "bucket")
    writes = node(tmp_path, "a", remote)
    with writes.hold(KEY):
        writes.start(KEY, IDENTITY)
        assert remote.puts == []  # a start costs no request: the record goes up with the first epoch
        train_epoch(writes, 1)
        assert remote.puts == [*RECORDS_UP, *(f"{CHECKPOINT_UP}/{name}" for name in
                                            ("config.yaml", "src.model", "tgt.model", "best.pt", "state.pt"))]
        remote.puts.clear()
        train_epoch(writes, 2)  # the config and subword models went up once: only what changes goes up
        assert remote.puts == [*RECORDS_UP, f"{CHECKPOINT_UP}/best.pt", f"{CHECKPOINT_UP}/state.pt"]
    assert remote.read(f"{CHECKPOINT_UP}/state.pt") == b"state2"
    assert [entry["epoch"] for entry in json.loads(remote.read(RECORDS_UP[2]))["epochs"]] == [1, 2]
    assert writes.result_in_object_store(KEY) is False  # not finished: a node's copy stays


def test_a_finished_trial_goes_up_with_its_marker_last_and_once(tmp_path):
    remote = RecordingStore(tmp_path / "bucket")
    first, second = node(tmp_path, "a", remote), node(tmp_path, "b", remote)
    with second.hold(KEY) as finished:  # a second attempt (a worker that outlived its driver), taken meanwhile
        assert finished is None
        train_and_finish(first, 1, 31.5)
        finished_puts = remote.puts[remote.puts.index(f"{CHECKPOINT_UP}/state.pt") + 1:]
        assert finished_puts == [*RECORDS_UP, *(f"ray/s/finished/{KEY}/{name}" for name in (
            "best.pt", "config.yaml", "src.model", "state.pt", "test.hyp", "tgt.model")),
            f"created ray/s/finished/{KEY}/metrics.json"]
        assert first.result_in_object_store(KEY) is True

        train(second, 1, 99.0)  # it finishes too: the first result stays
    assert remote.puts[-1] == f"refused ray/s/finished/{KEY}/metrics.json"
    assert json.loads(remote.read(f"ray/s/finished/{KEY}/metrics.json"))["test_bleu"] == 31.5
    assert second.result_in_object_store(KEY) is True  # the store holds a result: the node's copy may go


def test_taking_a_trial_brings_it_down_as_the_object_store_holds_it(tmp_path):
    uri = f"file://{tmp_path / 'bucket'}"
    first = open_trial_writes(tmp_path / "a" / "ray" / "s", uri)
    with first.hold(KEY):
        first.start(KEY, IDENTITY)
        train_epoch(first, 1)
        train_epoch(first, 2)
    assert (tmp_path / "bucket" / "ray" / "s" / "trials" / KEY / "progress.json").is_file()  # the study's prefix

    retry = open_trial_writes(tmp_path / "b" / "ray" / "s", uri)  # Ray retries the trial on another node
    with retry.hold(KEY) as finished:
        assert finished is None
        assert (retry.local.resume_point(KEY) / "state.pt").read_bytes() == b"state2"
        assert [entry["epoch"] for entry in retry.local.history(KEY)] == [1, 2]
    assert retry.result_in_object_store(KEY) is False

    train_and_finish(open_trial_writes(tmp_path / "c" / "ray" / "s", uri), 2, 31.5)
    again = open_trial_writes(tmp_path / "d" / "ray" / "s", uri)
    with again.hold(KEY) as finished:
        assert finished["test_bleu"] == 31.5 and (again.local.finished_dir(KEY) / "test.hyp").is_file()
    assert again.result_in_object_store(KEY) is True


def test_a_result_whose_upload_was_cut_short_stays_on_the_node_until_it_goes_up(tmp_path):
    cut = RecordingStore(tmp_path / "bucket", refuse=("metrics.json",))
    writes = node(tmp_path, "a", cut)
    with pytest.raises(StorageError, match="cannot write"):
        train_and_finish(writes, 1, 31.5)
    assert writes.local.finished_metrics(KEY)["test_bleu"] == 31.5  # finished here ...
    assert writes.result_in_object_store(KEY) is False  # ... but not in the store: the node keeps its copy
    assert cut.read(f"ray/s/finished/{KEY}/metrics.json") is None

    remote = RecordingStore(tmp_path / "bucket")
    retry = node(tmp_path, "a", remote)  # Ray retries it on the same node: the result goes up, marker last
    with retry.hold(KEY) as finished:
        assert finished["test_bleu"] == 31.5
    assert remote.puts[:3] == RECORDS_UP and remote.puts[-1] == f"created ray/s/finished/{KEY}/metrics.json"
    assert retry.result_in_object_store(KEY) is True

    remote.puts.clear()
    with node(tmp_path, "a", remote).hold(KEY) as finished:  # once up, taking it again puts nothing up
        assert finished["test_bleu"] == 31.5
    assert remote.puts == []
