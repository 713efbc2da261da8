"""Where a study's records can live when the nodes of a cluster share no file system: the object store
a ``--storage`` URI names, and the lease a study's driver holds in it.

Each kind of store is a backend (``study.store.object_backend`` says what one implements), chosen here by
the URI's scheme in ``BACKENDS`` and nowhere else: ``s3://bucket/prefix`` (AWS or any S3-compatible
service, ``study.store.s3_backend``) or a local directory (``file://`` or a plain path,
``study.store.directory_backend``). Everything above this module (the trials, the driver, the reading
commands) reaches every backend through ``open_store``.

``Lease``: one holder at a time (a study's driver), taken with ``create``, renewed with
``replace_if``, and taken over only after its holder let it expire.
"""

from __future__ import annotations

import json
import os
import socket
import time
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
# a lease: one holder at a time


@dataclass
class Lease:
    """A held lease object: who holds it and until when. ``renew`` before ``seconds`` run out;
    ``release`` when done (a holder that dies lets it expire, and the next one takes it over)."""

    store: ObjectStore
    key: str
    owner: str
    seconds: float
    version: str | None = None

    def record(self) -> bytes:
        return json.dumps({"owner": self.owner, "expires": time.time() + self.seconds}).encode()

    def renew(self) -> None:
        if self.version is None or not self.store.replace_if(self.key, self.record(), self.version):
            raise StorageError(f"{self.store.where(self.key)}: the lease was taken over by another driver; stop "
                               "this one (its trials keep their records)")
        self.version = self.store.version(self.key)

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


def take_lease(store: ObjectStore, key: str, seconds: float = 120.0, owner: str | None = None) -> Lease:
    """The lease at ``key``, or ``StorageError`` naming its holder while another one holds it."""
    lease = Lease(store, key, owner or holder_name(), seconds)
    if store.create(key, lease.record()):
        lease.version = store.version(key)
        return lease
    version, held = store.version(key), store.read(key)
    try:
        record = json.loads(held or b"{}")
        holder, expires = str(record["owner"]), float(record["expires"])
    except (ValueError, KeyError, TypeError):  # a damaged lease object holds nothing
        holder, expires = "?", 0.0
    if expires > time.time() and not _dead_here(holder):
        raise StorageError(f"{store.where(key)}: held by {holder} for {expires - time.time():.0f} s more; another "
                           "driver runs this study (stop it first, or wait for its lease to expire)")
    if version is None or not store.replace_if(key, lease.record(), version):
        raise StorageError(f"{store.where(key)}: another driver took the lease just now; it runs this study")
    lease.version = store.version(key)
    return lease
