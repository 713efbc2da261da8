"""What an epoch of each row of a grid costs relative to the others, known before any of its
trials has run: the forward products per target token of the row's model (``nmt.benchmarks.models``' count),
built with its shapes only (``nmt.model.build_model_shapes``: no memory, no values). The progress line's ETA
prices a row it has not timed yet from the rows it has (``study.execution.callbacks.ProgressCallback``); ``finishing_time``
turns the trials' costs into wall time on a number of workers, for that ETA and for ``--dry-run``."""

from __future__ import annotations

import heapq
import statistics

from nmt.errors import UserError
from study.spec.model import Trial


def mean_target_length(stats: dict) -> int:
    """A training sentence's mean target length in pieces (at least 2): the shape of the batches
    that time or count a row's model before it trains."""
    return max(2, round(stats["train_tgt_tokens"] / max(1, stats["train_pairs"])))


def row_work(trials: list[Trial], stats: dict) -> dict[str, float]:
    """{row label: forward products per target token}, for the corpus ``stats`` of
    ``study.execution.study_data.prepare_data``. A row whose model cannot be built is left out: its trials fail
    with their own error, and the ETA prices it as it did before."""
    # torch loads only where a model is built or timed, not when the driver starts
    from nmt.benchmarks.models import forward_flops_per_token
    from nmt.config import config_from_dict
    from nmt.model import build_model_shapes

    length = mean_target_length(stats)
    work: dict[str, float] = {}
    for trial in trials:
        if trial.label in work:
            continue
        try:
            cfg = config_from_dict(trial.config, source=f"row {trial.label}")
            model = build_model_shapes(cfg.model, stats["src_vocab"], stats["tgt_vocab"])
            work[trial.label] = float(forward_flops_per_token(model, length))
        except (UserError, ValueError, TypeError, RuntimeError, NotImplementedError):
            continue
    return work


def epoch_seconds_for(work: float, timed: list[tuple[float, float]]) -> float | None:
    """Seconds an epoch of a row doing ``work`` should take, from (work, seconds an epoch) of the
    rows timed so far: in proportion to its work, at the median seconds per unit of work of those
    rows. The median, not a fitted line: a row whose epochs were slowed by other work on the
    machine moves it little, where a line through the rows would carry that slowdown on to every
    deeper row. On a quiet machine an epoch's time grows a little faster than its products
    (validation decoding steps through every layer), so a deeper row comes out about 10% cheap
    (measured on depth_srnmt_m30k: 1L 31.5, 5L 34.6 seconds an epoch per million products a token).
    None with no row timed."""
    ratios = [seconds / done for done, seconds in timed if done > 0 and seconds > 0]
    return work * statistics.median(ratios) if ratios else None


def finishing_time(under_way: list[float], queued: list[float], workers: int) -> float:
    """Seconds until the last trial ends when ``workers`` train at once: the trials under way hold
    their workers for what they have left, and each queued trial, in order, takes the worker that
    frees first (a trial never spreads over two workers, so one long trial left bounds the rest)."""
    free_at = sorted([*under_way[:workers], *[0.0] * max(workers - len(under_way), 0)])  # a heap
    for seconds in [*under_way[workers:], *queued]:
        heapq.heapreplace(free_at, free_at[0] + seconds)
    return max(free_at, default=0.0)
