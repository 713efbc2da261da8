"""The object-store layer against a real S3 API on loopback (moto's server on 127.0.0.1, tests/conftest.py)
and against a local directory: whole-object writes, write-once markers, conditional replacement, the
probe of those conditions (and a store that ignores them, a header-dropping proxy in front of the S3
server: tests/s3_proxy.py), a lease that refuses a second holder and expires by the store's clock, and
one line for every way the storage can be wrong; the driver's ``LeaseKeeper``, which says when the lease
is lost.

Modules covered here: ``study.store.directory_backend``, ``study.store.object_backend`` and
``study.store.s3_backend``."""

from __future__ import annotations

import contextlib
import json
import os
import time

import pytest
from s3_proxy import proxied_store

from study.store.directory_backend import DirectoryStore
from study.store.object_backend import ObjectStore, StorageError
from study.store.object_store import BACKENDS, check_conditional_writes, checked_uri, open_store, take_lease, worker_env
from study.store.remote_study import LeaseKeeper
from study.store.s3_backend import S3Store


@pytest.fixture(params=["s3", "directory"])
def store(request, tmp_path):
    if request.param == "directory":
        return DirectoryStore(tmp_path / "store")
    return S3Store(request.getfixturevalue("bucket"), "team/run1")


def test_objects_are_written_whole_read_listed_and_deleted(store):
    assert store.read("ray/s/finished/k/metrics.json") is None and store.keys() == []
    store.write("ray/s/trials/k/progress.json", b'{"epoch": 1}')
    store.write("ray/s/trials/k/progress.json", b'{"epoch": 2}')
    store.write("ray/s/trials/j/progress.json", b"{}")
    store.write("s/table.md", b"| a |")
    assert store.read("ray/s/trials/k/progress.json") == b'{"epoch": 2}'
    assert store.keys("ray/s/trials") == ["ray/s/trials/j/progress.json", "ray/s/trials/k/progress.json"]
    assert store.keys() == ["ray/s/trials/j/progress.json", "ray/s/trials/k/progress.json", "s/table.md"]
    store.delete("s/table.md")
    store.delete("s/table.md")  # deleting what is gone is no error
    assert store.read("s/table.md") is None and "s/table.md" not in store.keys()


def test_a_marker_is_written_once_and_a_replacement_needs_the_version_read(store):
    assert store.create("finished/k/metrics.json", b'{"bleu": 1}') is True
    assert store.create("finished/k/metrics.json", b'{"bleu": 2}') is False  # the first writer won
    assert store.read("finished/k/metrics.json") == b'{"bleu": 1}'
    version = store.version("finished/k/metrics.json")
    assert store.replace_if("finished/k/metrics.json", b"new", version) is True
    assert store.replace_if("finished/k/metrics.json", b"stale", version) is False  # changed since it was read
    assert store.read("finished/k/metrics.json") == b"new"
    assert store.version("nothing/here") is None and store.replace_if("nothing/here", b"x", "v") is False


def test_the_lease_refuses_a_second_driver_until_the_first_lets_go_or_expires(store):
    first = take_lease(store, "ray/s/driver.lease", seconds=60, owner="node-a:1")
    with pytest.raises(StorageError, match=r"driver.lease: held by node-a:1 for \d+ s more; another driver runs"):
        take_lease(store, "ray/s/driver.lease", owner="node-b:2")
    assert first.renew() is True
    first.release()
    second = take_lease(store, "ray/s/driver.lease", seconds=0.2, owner="node-b:2")
    # node-b died without letting go: its lease expires by the store's clock (S3 counts whole seconds, so up to
    # two of them pass before the store's stamps prove it), and is taken over
    deadline = time.monotonic() + 5
    while True:
        try:
            third = take_lease(store, "ray/s/driver.lease", seconds=60, owner="node-c:3")
            break
        except StorageError:
            assert time.monotonic() < deadline, "an expired lease was never taken over"
            time.sleep(0.2)
    assert json.loads(store.read("ray/s/driver.lease"))["owner"] == "node-c:3"
    assert second.renew() is False  # taken over: node-b learns it at its next renewal
    third.release()
    assert store.read("ray/s/driver.lease") is None


@pytest.mark.parametrize("kind", ["s3", "directory"])
def test_expiry_is_judged_by_the_store_s_clock_alone(kind, tmp_path, request, monkeypatch):
    """The taker's clock an hour ahead of the holder's (directory), or the store's an hour behind this machine's
    (S3, whose server runs in this process): the lease is held as long as the store's own stamps say."""
    if kind == "directory":
        store, clock = DirectoryStore(tmp_path / "store"), contextlib.nullcontext()
    else:
        request.getfixturevalue("s3_env")
        clock = proxied_store(request.getfixturevalue("s3_endpoint"), clock_ahead=-3600)
    with clock as endpoint:
        if endpoint:
            monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
            store = S3Store(request.getfixturevalue("bucket"), "lab")
        take_lease(store, "ray/s/driver.lease", seconds=60, owner="node-a:1")
        if kind == "directory":  # the file system's stamps come from the kernel, not from time.time
            real = time.time
            monkeypatch.setattr(time, "time", lambda: real() + 3600)
        with pytest.raises(StorageError, match=r"held by node-a:1 for (59|60) s more"):
            take_lease(store, "ray/s/driver.lease", owner="node-b:2")
        stamp = store.stamp("ray/s/driver.lease")
        assert stamp.version == store.version("ray/s/driver.lease") and 0 <= stamp.age < 2


def test_a_lease_of_a_dead_process_on_this_machine_is_taken_over_at_once(store):
    import socket
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    take_lease(store, "ray/s/driver.lease", seconds=600, owner=f"{socket.gethostname()}:{gone}")
    assert take_lease(store, "ray/s/driver.lease", owner="node-a:1").owner == "node-a:1"
    # a holder elsewhere, or alive here, is waited for
    with pytest.raises(StorageError, match="held by node-a:1"):
        take_lease(store, "ray/s/driver.lease", owner=f"{socket.gethostname()}:{os.getpid()}")


def test_a_store_that_honours_conditional_writes_passes_the_probe_and_keeps_nothing_of_it(store):
    check_conditional_writes(store)
    assert store.keys() == []
    if isinstance(store, DirectoryStore):  # nor a lock file or a staged copy
        assert list(store.root.iterdir()) == []


def test_a_renewal_whose_answer_was_lost_keeps_the_lease_and_a_taken_one_is_lost(store):
    lease = take_lease(store, "ray/s/driver.lease", seconds=60, owner="node-a:1")
    lease.version = "an answer that never came"  # the last renewal landed, but its new version was never read
    assert lease.renew() is True and json.loads(store.read("ray/s/driver.lease"))["owner"] == "node-a:1"
    store.write("ray/s/driver.lease", json.dumps({"owner": "node-b:2", "seconds": 60}).encode())
    assert lease.renew() is False and lease.version is None


def test_a_lease_written_before_the_store_s_clock_was_used_holds_for_the_default_time(store):
    store.write("ray/s/driver.lease", json.dumps({"owner": "node-old:1", "expires": 0}).encode())
    with pytest.raises(StorageError, match="held by node-old:1 for 1(19|20) s more"):
        take_lease(store, "ray/s/driver.lease", owner="node-a:1")


class FailingStore(DirectoryStore):
    """A directory whose writes fail the way a file system can (not as a StorageError)."""

    def replace_if(self, key, data, version):
        raise OSError(116, "Stale file handle")


def test_a_lease_not_renewed_for_its_length_is_lost_whatever_the_store_raised(tmp_path):
    said = []
    keeper = LeaseKeeper(take_lease(FailingStore(tmp_path / "store"), "ray/s/driver.lease", seconds=0.3), said.append)
    keeper.start()
    deadline = time.monotonic() + 5
    while keeper.lost is None and time.monotonic() < deadline:
        time.sleep(0.05)
    keeper.stop()
    assert keeper.lost.endswith("the lease was not renewed for 0.3 s ([Errno 116] Stale file handle), so another "
                                "driver may have taken the study over")
    assert len(said) == 1 and said[0].startswith("warning: [Errno 116] Stale file handle (renewing the study's lease")
    # a request that never answers counts the same: the lease is lost when its time is up, by this driver's clock
    hanging = LeaseKeeper(take_lease(DirectoryStore(tmp_path / "other"), "k", seconds=60), said.append,
                          renewed=time.monotonic() - 61)
    assert "not renewed for 60 s (a renewal still unanswered)" in hanging.lost


@pytest.mark.parametrize("dropped, ignored", [(("If-None-Match",), "If-None-Match"), (("If-Match",), "If-Match"),
                                              (("If-None-Match", "If-Match"), "If-None-Match")])
def test_a_store_that_ignores_a_condition_is_refused_in_one_line(s3_env, s3_endpoint, bucket, monkeypatch, dropped,
                                                                  ignored):
    with proxied_store(s3_endpoint, dropped) as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        store = open_store(f"s3://{bucket}/lab")
        store.check()  # reachable, readable and writable: only the conditions are wrong
        with pytest.raises(StorageError) as refused:
            check_conditional_writes(store)
        assert store.keys() == []  # the probe's scratch object is gone
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"--storage s3://{bucket}/lab: the store ignores {ignored} (")
    assert line.endswith("need conditional writes: use a store that honours them, or run without --storage on a "
                         "shared file system")


def test_a_damaged_lease_object_holds_nothing(store):
    store.write("ray/s/driver.lease", b'{"owner": "x", "exp')  # cut short
    assert take_lease(store, "ray/s/driver.lease", owner="node-a:1").owner == "node-a:1"


def test_a_missing_bucket_is_one_line(s3_env):
    store = open_store("s3://no-such-bucket/studies")
    for action in (store.check, lambda: store.write("a.json", b"{}"), lambda: store.keys()):
        with pytest.raises(StorageError) as caught:
            action()
        assert str(caught.value) == "s3://no-such-bucket: the bucket does not exist; create it or correct --storage"


def test_no_credentials_is_one_line_and_names_none(s3_env, monkeypatch, bucket):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    with pytest.raises(StorageError) as caught:
        open_store(f"s3://{bucket}/x").check()
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"s3://{bucket}/x: no AWS credentials found")


def test_errors_never_repeat_a_credential(s3_env):
    store = open_store("s3://no-such-bucket/p")
    lines = []
    for action in (store.check, lambda: store.read("k"), lambda: store.write("k", b"x"), lambda: store.create("k", b"x")):
        with pytest.raises(StorageError) as caught:
            action()
        lines.append(str(caught.value))
    assert len(lines) == 4 and not any(s3_env["AWS_SECRET_ACCESS_KEY"] in line
                                       or s3_env["AWS_ACCESS_KEY_ID"] in line for line in lines)


@pytest.mark.parametrize("uri, line", [
    ("gs://bucket/x", "--storage gs://bucket/x: gs:// is not supported; use s3://"),
    ("s3://", "--storage s3://: name a bucket"),
])
def test_a_storage_uri_it_cannot_use_is_one_line(uri, line):
    with pytest.raises(StorageError, match=line.replace("/", "/").replace(".", r"\.")):
        open_store(uri)


def test_a_directory_store_refuses_keys_that_leave_it(tmp_path):
    store = open_store(f"file://{tmp_path / 'store'}")
    for key in ("../outside", "a//b", "/etc/passwd", ""):
        with pytest.raises(StorageError, match="is not a key of this store"):
            store.write(key, b"x")
    assert not (tmp_path / "outside").exists()


class MemoryStore(ObjectStore):
    """A backend of a test's own, added as a new one is: one class and one entry of ``BACKENDS`` (only its URI
    check and opening are reached here, not the object calls a real one implements)."""

    uri_help = "mem:// (a test's memory)"
    worker_env = ("MEM_PLACE",)

    def __init__(self, name: str):
        self.uri = f"mem://{name}"

    @classmethod
    def check_uri(cls, uri):
        if uri == "mem://":
            raise StorageError(f"--storage {uri}: name a memory")

    @classmethod
    def from_uri(cls, uri):
        return cls(uri.removeprefix("mem://"))


def test_a_backend_is_one_entry_of_the_registry(monkeypatch):
    monkeypatch.setitem(BACKENDS, "mem", MemoryStore)
    monkeypatch.setenv("MEM_PLACE", "rack 4")
    assert open_store("mem://lab").where("k") == "mem://lab/k" and checked_uri("mem://lab") == "mem://lab"
    assert worker_env("mem://lab") == {"MEM_PLACE": "rack 4"}
    with pytest.raises(StorageError, match="^--storage mem://: name a memory$"):
        open_store("mem://")
    with pytest.raises(StorageError) as refused:
        checked_uri("gs://bucket/x")
    assert str(refused.value) == ("--storage gs://bucket/x: gs:// is not supported; use s3:// (any S3-compatible store, "
                                  "with AWS_ENDPOINT_URL for one that is not AWS), a local directory or mem:// (a test's "
                                  "memory)")


def test_the_schemes_open_their_backends_and_tell_the_workers_where_the_store_is(monkeypatch, tmp_path):
    s3, local, path = open_store("s3://lab/team/run1/"), open_store(f"file://{tmp_path}"), open_store(str(tmp_path))
    assert isinstance(s3, S3Store) and (s3.bucket, s3.prefix) == ("lab", "team/run1")
    assert isinstance(local, DirectoryStore) and isinstance(path, DirectoryStore) and local.root == path.root == tmp_path
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "never-sent")
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    assert worker_env("s3://lab/x") == {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"}  # where, never who
    assert worker_env(str(tmp_path)) == {} and worker_env(None) == {}
