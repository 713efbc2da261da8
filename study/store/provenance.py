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


# the vector instructions whose kernels a CPU's torch build picks, and so the last bits of its sums
VECTOR_FLAGS = ("avx512f", "avx512_bf16", "amx_tile", "avx2", "fma", "neon", "asimd", "sve")


@cache
def cpu_description(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU a result was computed on, e.g. "AMD EPYC (family 25, model 1, stepping 1; avx2, fma)".
    Two machines that both call themselves "AMD EPYC" can train the same seed to different last
    bits (their floating-point kernels differ), and family, model and vector flags tell them apart;
    the platform's processor name where /proc/cpuinfo is missing."""
    try:
        first = cpuinfo.read_text(encoding="utf-8", errors="replace").split("\n\n")[0]
    except OSError:
        first = ""
    fields: dict[str, str] = {}
    for line in first.splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name.strip().lower(), value.strip())
    name = fields.get("model name") or fields.get("hardware") or fields.get("cpu model") \
        or platform.processor() or platform.machine() or "unknown"
    ids = ", ".join(f"{key.replace('cpu ', '')} {fields[key]}" for key in ("cpu family", "model", "stepping")
                    if fields.get(key))
    flags = set((fields.get("flags") or fields.get("features") or "").split())
    vector = ", ".join(flag for flag in VECTOR_FLAGS if flag in flags)
    detail = "; ".join(part for part in (ids, vector) if part)
    return f"{name} ({detail})" if detail else name


def environment() -> dict[str, str]:
    """Commit, versions, platform and CPU, flat, for study.json and MLflow tags."""
    return {"git_commit": code_commit(), **{f"version.{k}": v for k, v in package_versions().items()},
            "platform": f"{platform.system()} {platform.machine()}", "cpu": cpu_description()}
