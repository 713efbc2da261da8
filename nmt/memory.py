"""Keeping freed memory in the training process: glibc's malloc settings, for speed alone.

glibc gives every freed block above 128 KiB back to the kernel, and the next batch faults it
in again, page by page. For a 128-unit Multi30k model with an 8k-piece softmax that was 60,000
page faults and 0.2 s of kernel time in each 0.8 s batch. With both thresholds at 1 GiB the
process keeps those blocks: the same numbers, bit for bit (where memory lives changes no
arithmetic), 14-22% sooner, for about 120 MB more memory.

glibc reads ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_`` when a process starts, so
processes started for training get them in their environment (``malloc_env``: the study's Ray
trial workers); a process already running sets them with ``mallopt`` (``keep_freed_memory``:
``nmt.train``, the study's time estimate and its timing pass). A value the user set wins.
"""

from __future__ import annotations

import ctypes
import os
import sys

KEEP_FREED_BYTES = 1 << 30  # under 2 GiB: mallopt takes a C int
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(KEEP_FREED_BYTES), "MALLOC_TRIM_THRESHOLD_": str(KEEP_FREED_BYTES)}
_MALLOPT_PARAMETER = {"MALLOC_MMAP_THRESHOLD_": -3, "MALLOC_TRIM_THRESHOLD_": -1}  # M_MMAP_/M_TRIM_THRESHOLD


def malloc_env() -> dict[str, str]:
    """The environment variables a training process should start with (the user's own values win)."""
    return {name: os.environ.get(name, value) for name, value in MALLOC_ENV.items()}


def keep_freed_memory() -> list[str]:
    """Give this running process the settings of ``MALLOC_ENV`` with glibc's ``mallopt``, except
    those the user set in the environment (glibc read them at start). Returns the names it set:
    none on a C library other than glibc (macOS, musl), whose allocators behave otherwise."""
    if not sys.platform.startswith("linux"):
        return []
    try:
        libc = ctypes.CDLL(None)  # the C library this process already runs on
        libc.gnu_get_libc_version  # noqa: B018 - present in glibc alone
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return []
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return [name for name, parameter in _MALLOPT_PARAMETER.items()
            if name not in os.environ and mallopt(parameter, KEEP_FREED_BYTES) == 1]
