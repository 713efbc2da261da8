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
import time
from pathlib import Path

from nmt.errors import UserError


def owned_path(root: Path, path: Path, what: str) -> Path:
    """``path`` resolved, after checking that it lies strictly inside ``root`` and is not a
    symbolic link (deleting through a link would delete what it points to)."""
    root = root.resolve()
    absolute = path if path.is_absolute() else Path.cwd() / path
    if absolute.is_symlink():
        raise UserError(f"{what} {absolute} is a symbolic link; the study driver writes and deletes only real "
                        f"directories inside {root} (remove the link or choose another --results)")
    resolved = absolute.resolve()
    if resolved == root or not resolved.is_relative_to(root):
        raise UserError(f"{what} {resolved} is not inside the results directory {root}; refusing to write or "
                        f"delete it")
    return resolved


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
