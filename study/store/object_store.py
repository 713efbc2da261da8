"""Where a study's records can live when the nodes of a cluster share no file system: the object store
a ``--storage`` URI names, and the lease a study's driver holds in it.

Each kind of store is a backend (``study.store.object_backend`` says what one implements), chosen here by
the URI's scheme in ``BACKENDS`` and nowhere else: ``s3://bucket/prefix`` (AWS or any S3-compatible
service, ``study.store.s3_backend``) or a local directory (``file://`` or a plain path,
``study.store.directory_backend``). Everything above this module (the trials, the driver, the reading
commands) reaches every backend through ``open_store``.

``check_conditional_writes``: the probe a driver runs before it writes, since what follows rests on
``create`` and ``replace_if`` meaning what they say. ``Lease``: one holder at a time (a study's driver),
taken with ``create``, renewed with ``replace_if``, and taken over only after its holder let it expire
by the store's clock.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
from dataclasses import dataclass

from study.store.directory_backend import DirectoryStore
from study.store.object_backend import ObjectStore, StorageError
from study.store.s3_backend import S3Store

# a URI's scheme -> the backend that serves it; a URI without a scheme is a directory path ("file")
BACKENDS: dict[str, type[ObjectStore]] = {"s3": S3Store, "file": DirectoryStore}


def backend(uri: str) -> type[ObjectStore]:
    """The backend whose scheme ``uri`` names, or one StorageError line listing those there are."""
    scheme = uri.split("://", 1)[0] if "://" in uri else "file"
    if scheme not in BACKENDS:
        helps = [kind.uri_help for kind in BACKENDS.values()]
        choices = f"{', '.join(helps[:-1])} or {helps[-1]}" if len(helps) > 1 else helps[0]
        raise StorageError(f"--storage {uri}: {scheme}:// is not supported; use {choices}")
    return BACKENDS[scheme]


def checked_uri(uri: str) -> str:
    """``uri`` when it names a store ``open_store`` can open (``s3://bucket[/prefix]``, a directory path or
    ``file://`` URI), else one StorageError line; no request is made. Called before a command writes anything."""
    backend(uri).check_uri(uri)
    return uri


def open_store(uri: str) -> ObjectStore:
    """The store a ``--storage`` value names (``checked_uri``)."""
    kind = backend(uri)
    kind.check_uri(uri)
    return kind.from_uri(uri)


def worker_env(uri: str | None) -> dict[str, str]:
    """The driver's environment variables that say where the store at ``uri`` is (an endpoint, a region), for
    trial workers on other nodes; {} without a URI."""
    names = backend(uri).worker_env if uri else ()
    return {name: os.environ[name] for name in names if os.environ.get(name)}


# ---------------------------------------------------------------------------
# conditional writes, probed before a driver trusts them

PROBE_PREFIX = ".rnmt-probe-"  # the probe's scratch key, one per probe, deleted when it ends
STALE_VERSION = '"00000000000000000000000000000000"'  # no object's version: a write conditional on it must fail
NEEDS = ("the study's lease and its finished-trial markers need conditional writes: use a store that honours them, "
         "or run without --storage on a shared file system")


def check_conditional_writes(store: ObjectStore) -> None:
    """One StorageError line unless ``store`` honours both conditions on a scratch key of its own: a second
    write-once ``create`` is refused (``If-None-Match: *``), a ``replace_if`` at a version the object does not
    have is refused and one at its current version succeeds (``If-Match``); and its answers carry its clock
    (``stamp``), which the lease's expiry reads. The study's lease and the finished trials' markers rest on
    these; a store that ignores them would let two drivers run one study, or a retried trial overwrite a
    finished one, without a word."""
    key = f"{PROBE_PREFIX}{secrets.token_hex(8)}"
    try:
        _probe(store, key, store.where(key))
    finally:
        with contextlib.suppress(StorageError, OSError):  # a scratch key left behind must not hide the verdict
            store.delete(key)


def _probe(store: ObjectStore, key: str, where: str) -> None:
    steps = (("If-None-Match", lambda: store.create(key, b"first"), True,
              "mishandles If-None-Match (a write-once create of a new key was refused)"),
             ("If-None-Match", lambda: store.create(key, b"second"), False,
              f"ignores If-None-Match (a second write-once create of {where} replaced it)"),
             ("If-Match", lambda: store.replace_if(key, b"stale", STALE_VERSION), False,
              f"ignores If-Match (a write conditional on a version {where} does not have replaced it)"))
    for header, step, expected, wrong in steps:
        try:
            done = step()
        except StorageError as err:
            raise StorageError(f"--storage {store.uri}: the store failed a conditional write ({header}) of a scratch "
                               f"key: {err}; {NEEDS}") from None
        if done != expected or (not expected and store.read(key) != b"first"):
            raise StorageError(f"--storage {store.uri}: the store {wrong}; {NEEDS}")
    stamp = store.stamp(key)  # its clock, read as the lease reads it
    if stamp is None or not store.replace_if(key, b"current", stamp.version):
        raise StorageError(f"--storage {store.uri}: the store refused a write conditional on the current version of "
                           f"{where} (If-Match); {NEEDS}")


# ---------------------------------------------------------------------------
# a lease: one holder at a time


DEFAULT_LEASE_SECONDS = 120.0  # how long a study's lease holds unrenewed unless --lease-seconds says otherwise


@dataclass
class Lease:
    """A held lease object: who holds it, and for how long it holds unrenewed, by the store's clock (the
    object's age since its last write; no holder's clock is compared with another's). ``renew`` before
    ``seconds`` run out; ``release`` when done (a holder that dies lets it expire, and the next one takes
    it over)."""

    store: ObjectStore
    key: str
    owner: str
    seconds: float
    version: str | None = None
    renewals: int = 0

    def record(self) -> bytes:
        # the count makes every renewal's object (and so its version) differ from the one before
        return json.dumps({"owner": self.owner, "seconds": self.seconds, "renewals": self.renewals}).encode()

    def renew(self) -> bool:
        """Write the lease again, only while it is still this holder's: False when another driver took it over
        (a StorageError when the store cannot be reached)."""
        if self.version is None:
            return False
        self.renewals += 1
        if not self.store.replace_if(self.key, self.record(), self.version):
            # an earlier renewal may have landed though its answer, or the version read after it, was lost: the
            # lease is still this holder's while its object names this holder
            version = self.store.version(self.key)
            if version is None or _holder(self.store.read(self.key))[0] != self.owner or \
                    not self.store.replace_if(self.key, self.record(), version):
                self.version = None
                return False
        self.version = self.store.version(self.key)
        return True

    def release(self) -> None:
        if self.version is not None and self.store.version(self.key) == self.version:
            self.store.delete(self.key)
        self.version = None


def holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _dead_here(holder: str) -> bool:
    """Whether the holder ran on this machine and its process is gone (a driver killed with -9 here): its
    lease need not be waited out."""
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, under another user
        return False
    return False


def _holder(held: bytes | None) -> tuple[str, float]:
    """(holder, seconds it holds unrenewed) of a lease object; a damaged one holds nothing. A lease written
    before the store's clock was used (its own "expires") holds for the default length."""
    try:
        record = json.loads(held or b"{}")
        seconds = record["seconds"] if "seconds" in record or "expires" not in record else DEFAULT_LEASE_SECONDS
        return str(record["owner"]), float(seconds)
    except (ValueError, KeyError, TypeError):
        return "?", 0.0


def take_lease(store: ObjectStore, key: str, seconds: float = DEFAULT_LEASE_SECONDS, owner: str | None = None) -> Lease:
    """The lease at ``key``, or ``StorageError`` naming its holder while another one holds it."""
    lease = Lease(store, key, owner or holder_name(), seconds)
    if store.create(key, lease.record()):
        lease.version = store.version(key)
        return lease
    stamp = store.stamp(key)  # before the read: a lease renewed in between changes the version, and the take fails
    holder, holds = _holder(store.read(key))
    left = holds - stamp.age if stamp is not None else 0.0
    if left > 0 and not _dead_here(holder):
        raise StorageError(f"{store.where(key)}: held by {holder} for {left:.0f} s more; another driver runs this "
                           "study (stop it first, or wait for its lease to expire)")
    if stamp is None or not store.replace_if(key, lease.record(), stamp.version):
        raise StorageError(f"{store.where(key)}: another driver took the lease just now; it runs this study")
    lease.version = store.version(key)
    return lease
