"""Crash-safe file writing: write a temporary file next to the target, then rename it into place.

A crash, a full disk or a concurrent reader never sees a half-written file:
``os.replace`` is atomic within one filesystem.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from nmt.errors import UserError

# a file system that refuses writes: full, over quota, read-only, permissions
STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


def refused_write_cause(err: OSError) -> str:
    """Why a file system refused a write, in the words of the error messages: 'full' or 'not writable'."""
    return "full" if err.errno in (errno.ENOSPC, errno.EDQUOT) else "not writable"


def file_mode() -> int:
    """The mode a new file gets from the process's umask (0o644 under the usual 022, 0o664 under a
    group's 002): a temporary file is created private (0600), and would keep that after the rename."""
    try:  # read, not set: os.umask() sets as it reads, which a thread writing meanwhile would see
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary path in ``path``'s directory, fsync it, rename it to
    ``path``; the file gets the mode the umask gives a new file. A folder where the file goes is one
    UserError line (a rename onto it would fail with a traceback, after the work)."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        raise UserError(f"{path} is a folder, where this tool writes a file of that name; move the folder away and "
                        f"run the command again")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, file_mode())
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    atomic_write(path, lambda tmp: tmp.write_bytes(data))


def write_lines(path: str | os.PathLike, lines: Iterable[str]) -> None:
    """UTF-8 text, one line per item, '\\n' line ends."""
    text = "".join(line + "\n" for line in lines)
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8", newline="\n"))


def write_json(path: str | os.PathLike, data: dict) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(json.dumps(data, indent=2), encoding="utf-8"))


def check_writable_dir(path: Path, what: str) -> None:
    """Fail early (one line naming ``what``) if ``path`` cannot be created or written, and leave
    no trace of the check: directories it had to create are removed again."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"{what} {path} is a file, not a directory; choose a directory")
    missing = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise UserError(f"{what} {path} is not writable ({err.strerror or err}); choose another {what}") from None
    finally:
        for created in missing:  # deepest first
            try:
                created.rmdir()
            except OSError:
                break
