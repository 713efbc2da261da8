"""Measurements of a trained model that a run takes when it ends, stored in ``metrics.json`` beside its
scores: a claim about what happens inside the model, not only its BLEU, is then judged from the
records, with no checkpoint kept. Which units have which measurements is declared once, in
``MEASURES`` (by ``model.cell``); a run of another unit takes none.

They are taken teacher-forced on the validation set, with the model the test set was translated by
(the selected epoch's), dropout off, batch by batch: nothing of the set is kept but running sums, so
a large validation set costs time, not memory.

ATR (Zhang et al. 2018, Sec. 5.1: "the Pearson's r of the input and forget gate is -0.9819"): at
every target position the decoder's first ATR cell (in a conditional decoder its lower cell, the one
that reads the words) has the input gate i_t = σ(q_t + p_t) and the forget gate f_t = σ(q_t - p_t).
Recorded:

- ``atr_gate_r``: Pearson's r of i and f over every gate element (unit and position) of the set;
- ``atr_gate_r_token_means``: Pearson's r of the per-token means (1/d_h) Σ_k i_{t,k} and
  (1/d_h) Σ_k f_{t,k}.

With ``model.atr.gates: coupled`` (f_t = 1 - i_t) both are -1 by construction.
``python -m nmt.analysis.atr_gates`` measures the same on a checkpoint (any text, either side, any
layer), with the figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from nmt.cells.atr import ATRCell
from nmt.data.batching import Batch, make_batches
from nmt.model import Seq2Seq

Examples = Sequence[tuple[list[int], list[int]]]  # encoded (source, target) pairs


@dataclass(frozen=True)
class Measure:
    """What a unit's runs record when they end: the names they store (each a metric of the study
    registry, ``study.spec.metrics``) and the function that takes them."""

    names: tuple[str, ...]
    take: Callable[[Seq2Seq, Iterable[Batch]], dict[str, float | None]]


def pearson(x: Sequence[float] | torch.Tensor, y: Sequence[float] | torch.Tensor) -> float:
    """Pearson's r of two equally long series; NaN for fewer than 2 values or a constant one."""
    x = torch.as_tensor(x, dtype=torch.float64).flatten()
    y = torch.as_tensor(y, dtype=torch.float64).flatten()
    if x.numel() < 2:
        return math.nan
    dx, dy = x - x.mean(), y - y.mean()
    return _r(float((dx * dy).sum()), float((dx * dx).sum()), float((dy * dy).sum()))


def _r(sxy: float, sxx: float, syy: float) -> float:
    """r from centred sums; NaN without spread, and rounding never steps outside [-1, 1]."""
    if sxx <= 0 or syy <= 0:
        return math.nan
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


@dataclass
class CoMoments:
    """Count, means and centred sums of squares and products of two series, merged chunk by chunk
    (the pairwise update of Chan, Golub and LeVeque), so that Pearson's r needs no series kept."""

    n: int = 0
    mean_x: float = 0.0
    mean_y: float = 0.0
    sxx: float = 0.0
    syy: float = 0.0
    sxy: float = 0.0

    def add(self, x: torch.Tensor, y: torch.Tensor) -> None:
        x, y = x.detach().double().flatten(), y.detach().double().flatten()
        m = x.numel()
        if m == 0:
            return
        chunk_x, chunk_y = float(x.mean()), float(y.mean())
        dx, dy = x - chunk_x, y - chunk_y
        n = self.n + m
        shift_x, shift_y, weight = chunk_x - self.mean_x, chunk_y - self.mean_y, self.n * m / n
        self.sxx += float((dx * dx).sum()) + shift_x * shift_x * weight
        self.syy += float((dy * dy).sum()) + shift_y * shift_y * weight
        self.sxy += float((dx * dy).sum()) + shift_x * shift_y * weight
        self.mean_x += shift_x * m / n
        self.mean_y += shift_y * m / n
        self.n = n

    def r(self) -> float:
        return _r(self.sxy, self.sxx, self.syy) if self.n >= 2 else math.nan


def traced(model: Seq2Seq, module: torch.nn.Module, batches: Iterable[Batch]) -> Iterator[tuple[Batch, list]]:
    """Teacher-force every batch through the model with ``module.trace`` switched on; yields each batch
    with what the module recorded for it. The trace is switched off again afterwards."""
    try:
        with torch.no_grad():
            for batch in batches:
                module.trace = recorded = []
                model(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask)
                yield batch, recorded
    finally:
        module.trace = None


def atr_decoder_gates(model: Seq2Seq, batches: Iterable[Batch]) -> dict[str, float | None]:
    """``atr_gate_r`` and ``atr_gate_r_token_means`` of the decoder's first ATR cell (module docstring),
    over the real target positions only; None where r is undefined (a gate constant over the set);
    {} for a decoder without such a cell."""
    cell = next(iter(getattr(model.decoder, "cells", [])), None)
    if not isinstance(cell, ATRCell):
        return {}
    elements, token_means = CoMoments(), CoMoments()
    for batch, trace in traced(model, cell, batches):
        i = torch.stack([i for i, _, direction in trace if direction == 0], dim=1)  # (B, T, d_h)
        f = torch.stack([f for _, f, direction in trace if direction == 0], dim=1)
        real = batch.tgt_mask.bool()
        elements.add(i[real], f[real])
        token_means.add(i.mean(dim=-1)[real], f.mean(dim=-1)[real])
    return {"atr_gate_r": _finite(elements.r()), "atr_gate_r_token_means": _finite(token_means.r())}


MEASURES = {"atr": Measure(("atr_gate_r", "atr_gate_r_token_means"), atr_decoder_gates)}


def measured_cells(name: str) -> tuple[str, ...]:
    """The units whose runs record the measurement ``name`` (empty: none does)."""
    return tuple(cell for cell, measure in MEASURES.items() if name in measure.names)


def take_measures(model: Seq2Seq, cell: str, examples: Examples, batch_tokens: int, device: torch.device
                  ) -> dict[str, float | None]:
    """The unit's measurements of the trained ``model`` on ``examples`` (the validation set); {} for a unit
    without any."""
    measure = MEASURES.get(cell)
    if measure is None:
        return {}
    model.eval()
    batches = (batch.to(device) for batch in make_batches(examples, batch_tokens, shuffle=False))
    return measure.take(model, batches)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
