"""The storage backend of a local (or shared) directory: ``--storage file:///data/studies`` or a plain
path. Whole-object writes are atomic by rename, write-once markers by hard link."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from nmt.fileio import write_bytes
from study.store.object_backend import ObjectStore, Stamp, StorageError

SCHEME = "file://"


class DirectoryStore(ObjectStore):
    """A local (or shared) directory: atomic writes by rename, write-once by hard link."""

    uri_help = "a local directory"

    def __init__(self, root: Path):
        self.root = Path(root)
        self.uri = str(self.root)

    @classmethod
    def check_uri(cls, uri):
        if not uri.removeprefix(SCHEME).strip():  # Path("") is the current directory: ray/ and NAME/ would land there
            raise StorageError(f"--storage {uri!r}: name a directory, e.g. file:///data/studies or /data/studies")

    @classmethod
    def from_uri(cls, uri):
        return cls(Path(uri.removeprefix(SCHEME)))

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
            return _version(self._path(key).stat())
        except FileNotFoundError:
            return None

    def stamp(self, key):
        path = self._path(key)
        try:
            with open(path, "rb") as handle:  # opened, not only stat'ed: an NFS client then asks the server afresh
                stat = os.fstat(handle.fileno())
        except FileNotFoundError:
            return None
        # "now" by the file system's clock, as its write time of a scratch file beside the object: on a shared
        # mount that is the file server's clock, the one that stamped the object too
        scratch = self._staged(path, b"")
        try:
            now = scratch.stat().st_mtime
        finally:
            scratch.unlink(missing_ok=True)
        return Stamp(_version(stat), max(now - stat.st_mtime, 0.0))

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
        path = self._path(key)
        path.unlink(missing_ok=True)
        path.with_name(f".{path.name}.lock").unlink(missing_ok=True)  # replace_if's, if it ever ran on the object

    def check(self):
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self._staged(self.root / ".probe", b"")
            probe.unlink()
        except OSError as err:
            raise StorageError(f"{self.uri}: cannot write there ({err.strerror}); choose a writable directory") from None


def _version(stat: os.stat_result) -> str:
    return f"{stat.st_mtime_ns}-{stat.st_size}-{stat.st_ino}"
