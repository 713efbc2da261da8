"""Portable numerics: the same trained model from the same seed on Intel and AMD x86-64 CPUs with AVX2.

PyTorch picks its CPU kernels by the machine: ATen dispatches its vectorised element-wise kernels
(tanh, sigmoid, softmax, reductions) to an AVX-512 or an AVX2 build, and MKL takes a code path per
CPU model and vendor for its matrix products and its vector maths (ATen's sqrt, exp and log of a
contiguous tensor are MKL's). The paths round differently, and over thousands of updates a training
run amplifies an ulp into a different model (the same trial has scored a seed's spread apart on an
Intel Xeon and an AMD EPYC). With ``numerics: portable`` (the default) every training process starts
pinned (pinning 2):

- ``ATEN_CPU_CAPABILITY=avx2``: ATen's dispatch, at the AVX2 level every x86-64 CPU of the last
  decade has (the same instructions on every vendor);
- ``MKL_CBWR=COMPATIBLE``: MKL's conditional numerical reproducibility on the one branch its
  documentation gives for Intel and non-Intel CPUs alike (SSE2 without the approximate rcpps and
  rsqrtps); its AVX2 branch holds on Intel CPUs only, and on others MKL falls back to its own choice;
- ``ONEDNN_MAX_CPU_ISA=AVX2`` and oneDNN off in the process (``torch.backends.mkldnn``): torch.nn.LSTM
  runs on oneDNN's RNN kernel, whose bits differ between Intel and AMD even when capped at AVX2; off,
  it runs on ATen's own LSTM (matrix products by MKL, gates by ATen);
- Adam fused (``adam_options``): its one kernel is ATen's own vectorised code, where torch's default
  Adam takes the square root of a whole tensor through MKL's vector maths, whose last bit differs
  between Intel and AMD even on MKL's COMPATIBLE branch.

Pinning 1 (records without ``pinning``) pinned MKL to AVX2 and used the default Adam: the same numbers
on Intel CPUs only. The two do not mix in a study (study.store.resume_checks) or a trial's checkpoint.

Where each pinning was shown to hold, CPU by CPU: ``PINNINGS`` (tests/golden/golden.json lists each
run of the golden test). ``numerics: native`` leaves the machine its own choice, for speed. Not covered:
other architectures (ARM), GPUs, and more than one intra-op thread (the order of a parallel
reduction depends on the thread count). The environment must be set before torch computes
anything: ATen fixes its capability at the first dispatch and MKL its path at its first call.
Processes started for training get it in their environment (``numerics_env``: the study's Ray
workers); a command sets its own process with ``apply_numerics`` first thing and checks that it took.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from nmt.errors import UserError

NUMERICS = ("portable", "native")
PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2"}
PORTABLE_CAPABILITY = "AVX2"  # what torch.backends.cpu.get_cpu_capability() reports when pinned
PINNING = 2  # the version of what portable pins; a portable record without one used pinning 1
# pinning 1's variables, for measuring or reproducing it: numerics native keeps variables a user set
PINNING_1_ENV = {**PORTABLE_ENV, "MKL_CBWR": "AVX2"}


@dataclass(frozen=True)
class Pinning:
    """One version of what ``portable`` pins, and where it was shown to hold."""

    what: str
    # the CPUs on which the golden test (tests/e2e/test_golden.py) reproduced the committed numbers;
    # tests/golden/golden.json lists each run (model, date, torch), and a test keeps the two alike
    verified_on: tuple[str, ...]
    differs_on: tuple[str, ...] = ()  # CPUs seen to compute other numbers under it


PINNINGS = {
    1: Pinning("ATen and MKL pinned to AVX2", verified_on=("Intel Xeon",), differs_on=("AMD EPYC",)),
    2: Pinning("ATen pinned to AVX2, MKL to its COMPATIBLE branch, oneDNN off, Adam fused",
               verified_on=("Intel Xeon", "AMD EPYC (emulated by QEMU: the golden smoke table)")),
}
_SET_HERE: set[str] = set()  # the variables this process pinned itself (native takes back only these)


def numerics_env(numerics: str) -> dict[str, str]:
    """The environment variables a training process must start with for ``numerics``."""
    check_numerics(numerics, "numerics")
    return dict(PORTABLE_ENV) if numerics == "portable" else {}


def check_numerics(numerics: str, where: str) -> None:
    if numerics not in NUMERICS:
        raise UserError(f"{where}: {numerics!r} is not a numerics setting; use portable (the same numbers on Intel "
                        f"and AMD x86-64 CPUs with AVX2, the default) or native (the CPU's own kernels, faster)")


def apply_numerics(numerics: str, where: str = "numerics", strict: bool = True) -> bool:
    """Set this process to ``numerics`` before torch computes anything, and check that it took: a
    process whose kernels were already chosen otherwise is one UserError line, or, not ``strict``
    (a time estimate, which only reads the speed), False."""
    check_numerics(numerics, where)
    if numerics == "portable":
        if not has_avx2() and not strict:
            return False
        if not has_avx2():
            raise UserError(f"{where}: portable numerics need an x86-64 CPU with AVX2, and this one ({cpu_name()}) "
                            f"is not one; set numerics: native")
        for name, value in PORTABLE_ENV.items():
            if os.environ.get(name) != value:
                os.environ[name] = value
                _SET_HERE.add(name)
    else:  # the processes this one starts (Ray's) inherit its environment: no pin of ours stays; the user's do
        for name in _SET_HERE:
            os.environ.pop(name, None)
        _SET_HERE.clear()
    # torch loads here, after the environment is set: its CPU capability is read at the first dispatch
    import torch

    if numerics == "portable":
        torch.backends.mkldnn.enabled = False  # a flag of this process, read at each op: no environment sets it
    capability = torch.backends.cpu.get_cpu_capability()
    if numerics == "portable" and capability != PORTABLE_CAPABILITY:
        if not strict:
            return False
        raise UserError(f"{where}: portable numerics need ATen's CPU capability {PORTABLE_CAPABILITY}, but this process "
                        f"already computes with {capability} (torch ran before the setting); start the process with "
                        f"{' '.join(f'{k}={v}' for k, v in PORTABLE_ENV.items())} in its environment")
    return True


def adam_options(numerics: str) -> dict:
    """Keyword arguments of ``torch.optim.Adam`` under ``numerics``: fused when portable (its kernel's
    square root is the same on every vendor); torch's default otherwise."""
    return {"fused": True} if numerics == "portable" else {}


def arithmetic(numerics: str, pinning: int | None = PINNING) -> str:
    """One name for how a run computed: ``portable-2``, ``portable-1`` or ``native``; what a study and a
    checkpoint keep one of (a portable record without a pinning is ``pinning=None``: pinning 1)."""
    return f"portable-{pinning or 1}" if numerics == "portable" else numerics


def numerics_record(numerics: str) -> dict:
    """What a trial's metrics record about its arithmetic: the setting and its pinning, ATen's
    capability and MKL's path, so a table can say where its numbers hold (the study's records name
    the CPU too)."""
    # torch is loaded by the trainer that asks
    import torch

    return {"numerics": numerics, **({"pinning": PINNING} if numerics == "portable" else {}),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "mkl_cbwr": os.environ.get("MKL_CBWR", "")}


def arithmetic_pinning(way: str) -> Pinning | None:
    """The pinning an ``arithmetic`` name (``portable-N``) names; None for native or a pinning this version
    does not know (a newer tool's record)."""
    number = way.removeprefix("portable-")
    return PINNINGS.get(int(number)) if way.startswith("portable-") and number.isdigit() else None


def record_arithmetic(metrics: dict, legacy: str = "native") -> str:
    """``arithmetic`` of a trial's stored metrics; ``legacy`` for a record from before the setting existed."""
    numerics = str(metrics.get("numerics") or legacy)
    pinning = metrics.get("pinning")
    return arithmetic(numerics, pinning if isinstance(pinning, int) and not isinstance(pinning, bool) else None)


@lru_cache(maxsize=1)
def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu_name() -> str:
    """The CPU's model name ("Intel(R) Xeon(R) Processor"), or the platform's machine name."""
    for line in _cpuinfo().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    import platform  # only where /proc/cpuinfo says nothing (macOS, Windows)

    return platform.machine() or "unknown CPU"


def has_avx2() -> bool:
    """True on an x86-64 CPU with AVX2 (one whose flags cannot be read counts: torch's check then says
    what it uses); False on any other architecture."""
    import platform  # the architecture, once per call: cheap

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    flags = next((line for line in _cpuinfo().splitlines() if line.startswith("flags")), None)
    return flags is None or "avx2" in flags.split()
