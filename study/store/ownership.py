"""What the study driver may touch: paths proven to lie inside the results directory, and one
driver per study and results directory.

``owned_path`` is checked before anything is written or deleted, never after. ``StudyLock`` is
an advisory ``flock`` on ``<results>/.<study>.lock``: the kernel releases it when the driver
exits, however it exits, so a killed driver never leaves a stale lock behind (only an unlocked
file, which the next driver takes over). The file says who holds it (PID, host, start time,
command) for the message a second driver prints.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import stat
import time
from pathlib import Path

from nmt.errors import UserError


def owned_path(root: Path, path: Path, what: str) -> Path:
    """``path`` resolved, after checking that it lies strictly inside ``root`` and that no symbolic
    link leads it elsewhere (deleting through a link would delete what it points to). One link is
    followed: a folder directly in ``root`` that the user linked onto another disk on purpose
    (``results/ray`` -> a data disk); ``path`` itself is never a link, and neither is anything
    between that folder and ``path``."""
    root = Path(os.path.abspath(root))
    absolute = Path(os.path.abspath(path if path.is_absolute() else Path.cwd() / path))
    if absolute == root or not absolute.is_relative_to(root):
        raise UserError(f"{what} {absolute} is not inside the results directory {root.resolve()}; refusing to write "
                        f"or delete it")
    parts = absolute.relative_to(root).parts
    for depth in range(1, len(parts) + 1):
        step = root.joinpath(*parts[:depth])
        if not step.is_symlink():
            continue
        if depth == len(parts) or depth > 1:
            raise UserError(f"{what} {absolute}: {step} is a symbolic link; the study driver writes and deletes only "
                            f"real folders inside {root.resolve()} (a link is followed only as a folder directly in "
                            f"it, like results/ray); remove the link (its target is untouched) or choose another "
                            f"--results")
        target = step.resolve()
        if not target.is_dir() or root.resolve().is_relative_to(target):
            raise UserError(f"{what} {absolute}: {step} links to {target}, which is not a folder of its own outside "
                            f"the results directory; link it to a folder on another disk, or remove the link")
    return absolute.resolve()


def key_path(root: Path, relative: str, what: str) -> Path:
    """Where the object-store key (or listed name) ``relative``, a '/'-separated path below a folder
    of the store, lands under ``root``, after checking that every part is a plain name: never empty
    (``a//b`` would make the rest an absolute path), never ``.`` or ``..``, no NUL or backslash. The
    store is input like any file: a key that could climb out is one UserError line, before anything
    is written, and the path is then checked as every written path is (``owned_path``)."""
    parts = relative.split("/")
    bad = next((part for part in parts if part in ("", ".", "..") or "\0" in part or "\\" in part), None)
    if bad is not None:
        raise UserError(f"{what} {relative!r}: {bad!r} is not a plain name of a file or folder; the tool writes what "
                        f"a store holds only below the folder it reads it into ({root}); delete or rename that "
                        f"object in the store")
    return owned_path(root, root.joinpath(*parts), what)


def top_level_link(root: Path, path: Path) -> tuple[Path, Path] | None:
    """(the link, its target) when ``path`` lies under a folder directly in ``root`` that is a
    symbolic link (the one link ``owned_path`` follows), else None: the driver says so."""
    root = Path(os.path.abspath(root))
    absolute = Path(os.path.abspath(path))
    if not absolute.is_relative_to(root) or absolute == root:
        return None
    top = root / absolute.relative_to(root).parts[0]
    return (top, top.resolve()) if top.is_symlink() else None


def check_real_tree(directory: Path, what: str) -> None:
    """One line, before anything is written or deleted, when anything under ``directory`` is a
    symbolic link or a special file (a FIFO, a socket, a device): the tool would write through
    the link, or delete what it points to, or hang reading a FIFO. Links are never followed."""
    if not directory.is_dir():
        return
    for parent, dirs, files in os.walk(directory, followlinks=False):
        for name in sorted(dirs + files):
            entry = Path(parent) / name
            mode = entry.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise UserError(f"{what} {directory}: {entry} is a symbolic link (to {os.readlink(entry)}); the tool "
                                f"neither follows nor deletes links in its own records: remove the link (its target "
                                f"is untouched) and run again")
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise UserError(f"{what} {directory}: {entry} is not a regular file or folder; remove it and run again")


class StudyRunning(UserError):
    """Another live driver holds the study's lock."""


class StudyLock:
    """Held for the whole run of one driver (``with StudyLock(results, name, command):``)."""

    def __init__(self, results_root: Path, study: str, command: str = ""):
        self.path = owned_path(results_root, results_root / f".{study}.lock", "lock file")
        self.study = study
        self.command = command
        self._handle = None

    def __enter__(self) -> StudyLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 (held until __exit__)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = _parse(handle.read())
                handle.close()
                raise StudyRunning(f"study {self.study} is already running in {self.path.parent} "
                                   f"({_describe(holder)}); wait for it to finish, or stop it (Ctrl-C, or kill "
                                   f"{holder.get('pid', 'PID')}) and continue it with --resume") from None
            if _same_file(handle, self.path):
                break
            handle.close()  # the previous holder removed the file between our open and our lock: retry
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "started": time.strftime("%Y-%m-%d %H:%M:%S"), "command": self.command}))
        handle.flush()
        self._handle = handle
        return self

    def __exit__(self, *_) -> None:
        if self._handle is not None:
            # removed while still locked, so a waiting driver sees a different file and retries
            self.path.unlink(missing_ok=True)
            self._handle.close()
            self._handle = None


def _same_file(handle, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
    except FileNotFoundError:
        return False


def _parse(text: str) -> dict:
    try:
        holder = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _describe(holder: dict) -> str:
    if not holder.get("pid"):
        return "by another driver"
    where = f" on {holder['host']}" if holder.get("host") and holder["host"] != socket.gethostname() else ""
    since = f" since {holder['started']}" if holder.get("started") else ""
    return f"driver PID {holder['pid']}{where}{since}"
