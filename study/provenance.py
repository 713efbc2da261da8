"""What produced a result: the code's git commit and the versions of the packages that
decide the numbers. Recorded in study.json and on every MLflow run, so a table can be
traced to the code and libraries that made it."""

from __future__ import annotations

import platform
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path

PACKAGES = ("rnmt-study", "torch", "ray", "optuna", "mlflow", "sacrebleu", "sentencepiece", "pandas", "numpy")
SOURCE_ROOT = Path(__file__).resolve().parent.parent
RECORDS_FOLDER = "results"  # the records the tool itself writes; a run resuming over them leaves the code clean


@cache
def code_commit(root: Path = SOURCE_ROOT) -> str:
    """The commit of the source tree this code runs from, with "+dirty" when tracked files
    outside the records folder differ from it; "unknown" for an installed copy without its
    git history."""
    if not (root / ".git").exists():
        return "unknown"
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        changed = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--",
                                  ".", f":(exclude){RECORDS_FOLDER}"],
                                 capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if changed else "")


@cache
def package_versions() -> dict[str, str]:
    """Python and the packages whose versions can change a result."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def environment() -> dict[str, str]:
    """Commit, versions and platform, flat, for study.json and MLflow tags."""
    return {"git_commit": code_commit(), **{f"version.{k}": v for k, v in package_versions().items()},
            "platform": f"{platform.system()} {platform.machine()}"}
