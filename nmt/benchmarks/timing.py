"""The stopwatch of ``nmt.bench``: the fastest of interleaved rounds, and the GEMM peak timed beside
the candidates."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def best_time(fn: Callable[[], None], repeats: int) -> float:
    """The fastest of ``repeats`` calls after one warm-up (the least disturbed measurement)."""
    return interleaved_fastest({"only": fn}, repeats)["only"]


def interleaved_fastest(calls: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Seconds of the fastest of ``repeats`` calls of each (see ``interleaved_times``)."""
    return {name: min(seconds) for name, seconds in interleaved_times(calls, repeats).items()}


def interleaved_times(calls: dict[str, Callable[[], None]], repeats: int) -> dict[str, list[float]]:
    """Seconds of ``repeats`` calls of each, timed in interleaved rounds after one warm-up each: a
    slow spell of the machine then touches every candidate alike, instead of whichever happened
    to run in it (what the ratios between them need)."""
    for call in calls.values():
        call()
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            begin = time.perf_counter()
            call()
            seconds[name].append(time.perf_counter() - begin)
    return seconds


def gemm_call(batch: int, length: int, hidden: int, device: torch.device) -> tuple[Callable[[], None], float]:
    """(the GEMM every recurrent layer is built on, (B*T x H) @ (H x 4H), its FLOPs): timed beside
    the candidates, its speed is the machine's peak for that size in the same run."""
    a = torch.randn(batch * length, hidden, device=device)
    b = torch.randn(hidden, 4 * hidden, device=device)

    def run():
        torch.mm(a, b)
        synchronize(device)

    return run, 2 * a.size(0) * hidden * 4 * hidden


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously), so that a timing covers it."""
    if device.type == "cuda":
        torch.cuda.synchronize()
