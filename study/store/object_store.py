"""Where a study's records can live when the nodes of a cluster share no file system: an object
store (``s3://bucket/prefix`` on AWS or any S3-compatible service) or a local directory, behind one
small interface.

Object stores have no rename, so what the trial store does with write-then-rename is done here with
what they do have:

- ``write``: a whole object in one request; a reader sees the old object or the new one, never a
  part (a cut-short upload leaves no object at all);
- ``create``: write-once (``If-None-Match: *``): the first writer wins, a second is told so. A
  marker written last with it (a finished trial's ``metrics.json``) means everything before it is
  there;
- ``replace_if``: a write that succeeds only while the object is still the version read
  (``If-Match``), which is what a lease needs;
- ``Lease``: one holder at a time (a study's driver), taken with ``create``, renewed with
  ``replace_if``, and taken over only after its holder let it expire.

Credentials come from the standard AWS chain (environment, ``~/.aws``, an instance or pod role);
``AWS_ENDPOINT_URL`` points at an S3-compatible store (MinIO, Ceph, a test server). No error line
repeats a credential: S3's refusals are named by their code only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from nmt.errors import UserError
from nmt.fileio import write_bytes


class StorageError(UserError):
    """The storage cannot be used as given: one line naming the URI and the fix."""


def checked_uri(uri: str) -> str:
    """``uri`` when it names a store ``open_store`` can open (``s3://bucket[/prefix]``, a directory path or
    ``file://`` URI), else one StorageError line; no request is made. Called before a command writes anything."""
    if uri.startswith("s3://"):
        if not uri[len("s3://"):].partition("/")[0]:
            raise StorageError(f"--storage {uri}: name a bucket, e.g. s3://my-bucket/studies")
        return uri
    if "://" in uri and not uri.startswith("file://"):
        scheme = uri.split("://", 1)[0]
        raise StorageError(f"--storage {uri}: {scheme}:// is not supported; use s3:// (any S3-compatible store, "
                           "with AWS_ENDPOINT_URL for one that is not AWS) or a local directory")
    if not uri.removeprefix("file://").strip():  # Path("") is the current directory: ray/ and NAME/ would land there
        raise StorageError(f"--storage {uri!r}: name a directory, e.g. file:///data/studies or /data/studies")
    return uri


def open_store(uri: str) -> ObjectStore:
    """The store a ``--storage`` value names (``checked_uri``)."""
    checked_uri(uri)
    if uri.startswith("s3://"):
        bucket, _, prefix = uri[len("s3://"):].partition("/")
        return S3Store(bucket, prefix.strip("/"))
    return DirectoryStore(Path(uri.removeprefix("file://")))


class ObjectStore:
    """Whole objects under string keys ("ray/study/finished/KEY/metrics.json")."""

    uri: str

    def read(self, key: str) -> bytes | None:
        """The object, or None when there is none."""
        raise NotImplementedError

    def version(self, key: str) -> str | None:
        """A token that changes whenever the object does; None when there is none."""
        raise NotImplementedError

    def write(self, key: str, data: bytes) -> None:
        """Put the whole object, replacing any before it."""
        raise NotImplementedError

    def create(self, key: str, data: bytes) -> bool:
        """Put the object only if there is none: True when this call made it."""
        raise NotImplementedError

    def replace_if(self, key: str, data: bytes, version: str) -> bool:
        """Put the object only while it is still at ``version``: True when this call replaced it."""
        raise NotImplementedError

    def keys(self, prefix: str = "") -> list[str]:
        """Every key under the folder ``prefix`` ("ray/a" holds "ray/a/x", not "ray/ab/x"), sorted."""
        raise NotImplementedError

    def delete(self, key: str) -> None:
        raise NotImplementedError

    def check(self) -> None:
        """Raise ``StorageError`` (one line) when the store cannot be read and written."""
        raise NotImplementedError

    def where(self, key: str) -> str:
        """The object's URI, for messages."""
        return f"{self.uri.rstrip('/')}/{key}"


class DirectoryStore(ObjectStore):
    """A local (or shared) directory: atomic writes by rename, write-once by hard link."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.uri = str(self.root)

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if not key or any(part in ("", ".", "..") for part in parts):
            raise StorageError(f"{self.uri}: {key!r} is not a key of this store")
        return self.root.joinpath(*parts)

    def _staged(self, path: Path, data: bytes) -> Path:
        """A complete copy beside ``path`` under a name of its own, for ``create`` to link into place."""
        staged = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
        write_bytes(staged, data)
        return staged

    def read(self, key):
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def version(self, key):
        try:
            stat = self._path(key).stat()
        except FileNotFoundError:
            return None
        return f"{stat.st_mtime_ns}-{stat.st_size}-{stat.st_ino}"

    def write(self, key, data):
        write_bytes(self._path(key), data)

    def create(self, key, data):
        path = self._path(key)
        staged = self._staged(path, data)
        try:
            os.link(staged, path)  # fails when the object exists; the content is whole when it appears
            return True
        except FileExistsError:
            return False
        finally:
            staged.unlink(missing_ok=True)

    def replace_if(self, key, data, version):
        path = self._path(key)
        with self._locked(path):
            if self.version(key) != version:
                return False
            write_bytes(path, data)
            return True

    @contextlib.contextmanager
    def _locked(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(f".{path.name}.lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def keys(self, prefix=""):
        base = self._path(prefix) if prefix else self.root
        if not base.is_dir():
            return []
        found = []
        for folder, _, names in os.walk(base):
            for name in names:
                if not name.startswith("."):  # staged copies and lock files are the store's own
                    found.append((Path(folder) / name).relative_to(self.root).as_posix())
        return sorted(found)

    def delete(self, key):
        self._path(key).unlink(missing_ok=True)

    def check(self):
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self._staged(self.root / ".probe", b"")
            probe.unlink()
        except OSError as err:
            raise StorageError(f"{self.uri}: cannot write there ({err.strerror}); choose a writable directory") from None


class S3Store(ObjectStore):
    """A bucket and key prefix of S3 or an S3-compatible store, through boto3."""

    def __init__(self, bucket: str, prefix: str = ""):
        self.bucket, self.prefix = bucket, prefix
        self.uri = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        self._client = None

    @property
    def client(self):
        if self._client is None:
            try:
                # boto3 loads only for s3:// storage: a local study never needs it
                import boto3
            except ImportError:
                raise StorageError(f"--storage {self.uri}: s3:// storage needs boto3; "
                                   "pip install 'rnmt-study[s3]'") from None
            # a session of its own: the credentials and endpoint are read from the environment now, not cached
            self._client = boto3.session.Session().client("s3")
        return self._client

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _call(self, what: str, key: str, action):
        """Run one request; S3's refusals become one line each (never the credentials)."""
        # botocore loads with boto3 (the client above), only for s3:// storage
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        try:
            return action()
        except NoCredentialsError:
            raise StorageError(f"{self.uri}: no AWS credentials found (environment, ~/.aws or an instance role); "
                               "set AWS_PROFILE or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") from None
        except ClientError as err:
            raise _client_error(self, what, key, err) from None
        except BotoCoreError as err:
            where = self.where(key) if key else self.uri
            raise StorageError(f"{where}: cannot {what} ({type(err).__name__}); check AWS_ENDPOINT_URL "
                               "and the network") from None

    def read(self, key):
        try:
            response = self._call("read", key, lambda: self.client.get_object(Bucket=self.bucket, Key=self._key(key)))
        except _Missing:
            return None
        return response["Body"].read()

    def version(self, key):
        try:
            head = self._call("read", key, lambda: self.client.head_object(Bucket=self.bucket, Key=self._key(key)))
        except _Missing:
            return None
        return head["ETag"]

    def write(self, key, data):
        self._call("write", key, lambda: self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data))

    def create(self, key, data):
        try:
            self._call("write", key, lambda: self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data,
                                                                   IfNoneMatch="*"))
        except _Conflict:
            return False
        return True

    def replace_if(self, key, data, version):
        try:
            self._call("write", key, lambda: self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data,
                                                                   IfMatch=version))
        except (_Conflict, _Missing):
            return False
        return True

    def keys(self, prefix=""):
        # a folder, as in a directory: "ray/a" must not list "ray/ab/..."
        start = f"{self._key(prefix.strip('/'))}/" if prefix else (f"{self.prefix}/" if self.prefix else "")
        found, token = [], None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = self._call("list", prefix, lambda extra=extra: self.client.list_objects_v2(
                Bucket=self.bucket, Prefix=start, **extra))
            strip = len(self.prefix) + 1 if self.prefix else 0
            found += [item["Key"][strip:] for item in page.get("Contents", []) if not item["Key"].endswith("/")]
            token = page.get("NextContinuationToken")
            if not token:
                return sorted(found)

    def delete(self, key):
        self._call("delete", key, lambda: self.client.delete_object(Bucket=self.bucket, Key=self._key(key)))

    def check(self):
        self._call("reach", "", lambda: self.client.head_bucket(Bucket=self.bucket))


class _Missing(StorageError):
    """No such object (a read or a conditional write that found none)."""


class _Conflict(StorageError):
    """A conditional write whose condition did not hold."""


def _code(err) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def _client_error(store: S3Store, what: str, key: str, err) -> StorageError:
    code = _code(err)
    where = store.where(key) if key else store.uri
    if code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
        return _Conflict(f"{where}: changed by another writer")
    if code in ("NoSuchKey", "404", "NotFound") and code != "NoSuchBucket" and key:
        return _Missing(f"{where}: no such object")
    if code in ("NoSuchBucket", "404", "NotFound"):
        return StorageError(f"s3://{store.bucket}: the bucket does not exist; create it or correct --storage")
    if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403", "ExpiredToken",
                "InvalidToken"):
        return StorageError(f"{store.uri}: the storage refused these credentials ({code}) to {what}; check "
                            "AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and the bucket's policy")
    return StorageError(f"{where}: cannot {what} ({code or type(err).__name__})")


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
