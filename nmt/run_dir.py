"""What a run directory of ``nmt.train`` holds, and the one way the tool deletes one.

A run directory holds only what the trainer writes::

    metrics.json  test.hyp  checkpoint/{state.pt, best.pt, config.yaml, src.model, tgt.model}

plus the temporary files of a write cut short (``.NAME.*.tmp``, see ``nmt.fileio``). Anything
else in it (a user's file, a folder, a symbolic link, a FIFO) was not written by the tool, so
the tool neither trains into such a directory nor deletes it: ``remove_run`` checks the whole
tree before it removes anything.
"""

from __future__ import annotations

import re
import shutil
import stat
from pathlib import Path

from nmt.errors import UserError

CHECKPOINT = "checkpoint"
# the checkpoint's files (nmt.checkpoint writes and reads them)
STATE = "state.pt"
BEST = "best.pt"
CONFIG = "config.yaml"
SRC_SPM = "src.model"
TGT_SPM = "tgt.model"
RUN_FILES = frozenset({"metrics.json", "test.hyp"})
CHECKPOINT_FILES = frozenset({STATE, BEST, CONFIG, SRC_SPM, TGT_SPM})
_WRITE_LEFTOVER = re.compile(r"^\..+\.tmp$")  # nmt.fileio.atomic_write's temporary name
SHOWN = 3  # foreign entries named in a message


def foreign_entries(run: Path) -> list[str]:
    """The entries under ``run`` (relative paths, sorted) that the trainer does not write: any
    other name, and any symbolic link or special file whatever its name (never followed)."""
    foreign = []
    for entry in sorted(Path(run).iterdir()):
        if entry.name == CHECKPOINT and stat.S_ISDIR(entry.lstat().st_mode):
            foreign += [f"{CHECKPOINT}/{inner.name}" for inner in sorted(entry.iterdir())
                        if not _written_by_trainer(inner, CHECKPOINT_FILES)]
        elif not _written_by_trainer(entry, RUN_FILES):
            foreign.append(entry.name)
    return foreign


def _written_by_trainer(path: Path, names: frozenset[str]) -> bool:
    """A regular file (not a link) of one of ``names``, or a temporary file of a write cut short."""
    return stat.S_ISREG(path.lstat().st_mode) and (path.name in names or bool(_WRITE_LEFTOVER.match(path.name)))


def check_run_dir(path: Path, what: str) -> None:
    """One line, and nothing touched, when ``path`` exists but is not a run directory of this
    tool: a symbolic link, a file, or a directory holding anything the trainer does not write."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return
    if path.is_symlink():
        raise UserError(f"{what} {path} is a symbolic link; nmt.train writes only into a real directory "
                        f"(give the link's target, or a new folder, as {what})")
    if not path.is_dir():
        raise UserError(f"{what} {path} is a file, not a directory; choose a directory")
    foreign = foreign_entries(path)
    if foreign:
        more = f" and {len(foreign) - SHOWN} more" if len(foreign) > SHOWN else ""
        raise UserError(f"{what} {path} holds files nmt.train did not write ({', '.join(foreign[:SHOWN])}{more}); "
                        f"it trains only into a new or empty folder or one of its own runs: choose another {what}")


def remove_run(path: Path, what: str) -> None:
    """Delete a run directory of this tool; refused (one line, nothing deleted) when anything in
    it was not written by the trainer. A missing path is nothing to do."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return
    check_run_dir(path, what)
    shutil.rmtree(path)
