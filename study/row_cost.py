"""What an epoch of each row of a grid costs relative to the others, known before any of its
trials has run: the forward products per target token of the row's model (``nmt.bench``'s count),
built on PyTorch's meta device, which allocates nothing. The progress line's ETA prices a row it
has not timed yet from the rows it has (``study.callbacks.ProgressCallback``)."""

from __future__ import annotations

import statistics

from study.spec import Trial


def row_work(trials: list[Trial], stats: dict) -> dict[str, float]:
    """{row label: forward products per target token}, for the corpus ``stats`` of
    ``study.runner.prepare_data``. A row whose model cannot be built is left out: its trials fail
    with their own error, and the ETA prices it as it did before."""
    import torch

    from nmt.bench import forward_flops_per_token
    from nmt.config import config_from_dict
    from nmt.errors import UserError
    from nmt.model import build_model

    length = max(2, round(stats["train_tgt_tokens"] / max(1, stats["train_pairs"])))
    work: dict[str, float] = {}
    for trial in trials:
        if trial.label in work:
            continue
        try:
            cfg = config_from_dict(trial.config, source=f"row {trial.label}")
            with torch.device("meta"):
                model = build_model(cfg.model, stats["src_vocab"], stats["tgt_vocab"])
            work[trial.label] = float(forward_flops_per_token(model, length))
        except (UserError, ValueError, TypeError, RuntimeError, NotImplementedError):
            continue
    return work


def epoch_seconds_for(work: float, timed: list[tuple[float, float]]) -> float | None:
    """Seconds an epoch of a row doing ``work`` should take, from (work, seconds an epoch) of the
    rows timed so far: the least-squares line through them (an epoch's time grows faster than its
    products: validation decoding steps through every layer), or in proportion to one timed row
    when they all do the same work or the line would price it at nothing; None with none timed."""
    usable = [(w, s) for w, s in timed if w > 0 and s > 0]
    if not usable:
        return None
    works = [w for w, _ in usable]
    proportional = work * statistics.fmean(s / w for w, s in usable)
    if len(set(works)) < 2:
        return proportional
    centre, mean_seconds = statistics.fmean(works), statistics.fmean(s for _, s in usable)
    slope = sum((w - centre) * (s - mean_seconds) for w, s in usable) / sum((w - centre) ** 2 for w in works)
    fitted = mean_seconds + slope * (work - centre)
    return fitted if fitted > 0 else proportional
