"""What a storage backend is: the small interface every object store behind ``--storage`` implements
(``study.store.object_store`` picks the backend a URI names), and the one error they all raise.

Object stores have no rename, so what the trial store does with write-then-rename is done here with
what they do have:

- ``write``: a whole object in one request; a reader sees the old object or the new one, never a
  part (a cut-short upload leaves no object at all);
- ``create``: write-once (``If-None-Match: *``): the first writer wins, a second is told so. A
  marker written last with it (a finished trial's ``metrics.json``) means everything before it is
  there;
- ``replace_if``: a write that succeeds only while the object is still the version read
  (``If-Match``), which is what a lease needs;
- ``stamp``: the object's version and how long ago it was written by the store's own clock, so a
  lease expires by one clock, never by comparing two machines' clocks.

Several S3-compatible stores accept ``If-None-Match`` and ``If-Match`` and ignore them; a lease or a
marker would then fail silently, so a driver that writes runs ``study.store.object_store``'s probe
of them first.
"""

from __future__ import annotations

from typing import NamedTuple

from nmt.errors import UserError


class StorageError(UserError):
    """The storage cannot be used as given: one line naming the URI and the fix."""


class Stamp(NamedTuple):
    """An object's version and its age: seconds since it was last written, by the store's clock (a lower
    bound where the store counts in whole seconds)."""

    version: str
    age: float


class ObjectStore:
    """Whole objects under string keys ("ray/study/finished/KEY/metrics.json")."""

    uri: str
    # how --storage names such a store, for the line that refuses a scheme no backend serves
    uri_help: str = ""
    # environment variables that say where the store is (never who may use it): the trial workers get them
    worker_env: tuple[str, ...] = ()

    @classmethod
    def check_uri(cls, uri: str) -> None:
        """Raise ``StorageError`` (one line) when ``uri`` cannot name such a store; no request is made."""

    @classmethod
    def from_uri(cls, uri: str) -> ObjectStore:
        """The store ``uri`` names (``check_uri`` has passed it)."""
        raise NotImplementedError

    def read(self, key: str) -> bytes | None:
        """The object, or None when there is none."""
        raise NotImplementedError

    def version(self, key: str) -> str | None:
        """A token that changes whenever the object does; None when there is none."""
        raise NotImplementedError

    def stamp(self, key: str) -> Stamp | None:
        """The object's version and age, from one request; None when there is none."""
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
