"""Portable numerics: the same trained model from the same seed on any x86-64 CPU with AVX2.

PyTorch picks its CPU kernels by the instruction sets of the machine: ATen dispatches its vectorised
element-wise kernels (tanh, sigmoid, softmax, reductions) to an AVX-512 or an AVX2 build, and MKL
takes a code path per CPU for its matrix products. The paths round differently, and over thousands
of updates a training run amplifies an ulp into a different model (the same trial has scored a seed's
spread apart on an Intel Xeon and an AMD EPYC). With ``numerics: portable`` (the default) every
training process starts pinned to the AVX2 level that every x86-64 CPU of the last decade has:

- ``ATEN_CPU_CAPABILITY=avx2``: ATen's dispatch;
- ``MKL_CBWR=AVX2``: MKL's conditional numerical reproducibility, one code path on every CPU;
- ``ONEDNN_MAX_CPU_ISA=AVX2``: oneDNN's kernels (no op of ours was seen to differ by it; pinned for
  the ops that use it).

On an AVX-512 Intel Xeon the log-softmax (ATen) and matrix products of some shapes (MKL) differ
between the native and the pinned kernels (tests/nmt/test_numerics.py).

``numerics: native`` leaves the machine's own choice, for speed. Not covered: other architectures
(ARM), GPUs, and more than one intra-op thread (the order of a parallel reduction depends on the
thread count). The environment must be set before torch computes anything: ATen fixes its
capability at the first dispatch and MKL its path at its first call. Processes started for
training get it in their environment (``numerics_env``: the study's Ray workers); a command sets
its own process with ``apply_numerics`` first thing and checks that it took.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from nmt.errors import UserError

NUMERICS = ("portable", "native")
PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
PORTABLE_CAPABILITY = "AVX2"  # what torch.backends.cpu.get_cpu_capability() reports when pinned
_SET_HERE: set[str] = set()  # the variables this process pinned itself (native takes back only these)


def numerics_env(numerics: str) -> dict[str, str]:
    """The environment variables a training process must start with for ``numerics``."""
    check_numerics(numerics, "numerics")
    return dict(PORTABLE_ENV) if numerics == "portable" else {}


def check_numerics(numerics: str, where: str) -> None:
    if numerics not in NUMERICS:
        raise UserError(f"{where}: {numerics!r} is not a numerics setting; use portable (the same numbers on any "
                        f"x86-64 CPU with AVX2, the default) or native (the CPU's own kernels, faster)")


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

    capability = torch.backends.cpu.get_cpu_capability()
    if numerics == "portable" and capability != PORTABLE_CAPABILITY:
        if not strict:
            return False
        raise UserError(f"{where}: portable numerics need ATen's CPU capability {PORTABLE_CAPABILITY}, but this process "
                        f"already computes with {capability} (torch ran before the setting); start the process with "
                        f"{' '.join(f'{k}={v}' for k, v in PORTABLE_ENV.items())} in its environment")
    return True


def numerics_record(numerics: str) -> dict:
    """What a trial's metrics record about its arithmetic: the setting, ATen's capability and MKL's
    path, so a table can say where its numbers hold (the study's records name the CPU too)."""
    # torch is loaded by the trainer that asks
    import torch

    return {"numerics": numerics, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "mkl_cbwr": os.environ.get("MKL_CBWR", "")}


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
