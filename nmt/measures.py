"""Measurements of a trained model that a run takes when it ends, stored in ``metrics.json`` beside its
scores: a claim about what happens inside the model, not only its BLEU, is then judged from the
records, with no checkpoint kept. Which units have which measurements is declared once, in
``MEASURES`` (by ``model.cell``); a run of another unit takes none.

They are taken teacher-forced on the validation set, with the model the test set was translated by
(the selected epoch's), dropout off.

ATR (Zhang et al. 2018, Sec. 5.3, Figure 3): at every target position the decoder's first ATR cell
(in a conditional decoder its lower cell, the one that reads the words) has the input gate
i_t = σ(q_t + p_t) and the forget gate f_t = σ(q_t - p_t); the paper reports r = -0.9819 between
them. Recorded:

- ``atr_gate_r``: Pearson's r of i and f over every gate element (unit and position) of the set;
- ``atr_gate_r_token_means``: Pearson's r of the per-token means (1/d_h) Σ_k i_{t,k} and
  (1/d_h) Σ_k f_{t,k}.

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
    denominator = math.sqrt(float((dx * dx).sum()) * float((dy * dy).sum()))
    if denominator == 0:
        return math.nan
    return max(-1.0, min(1.0, float((dx * dy).sum()) / denominator))  # rounding must not step outside [-1, 1]


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


def atr_gates_by_sentence(model: Seq2Seq, cell: ATRCell, batches: Iterable[Batch], side: str
                          ) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """Example index -> (i, f), each (length, d_h) in float64 on the CPU, padding removed: the gates of the
    cell's left-to-right direction at every position of the ``side`` ("decoder" or "encoder")."""
    gates = {}
    for batch, trace in traced(model, cell, batches):
        forward = [(i, f) for i, f, direction in trace if direction == 0]
        i = torch.stack([i for i, _ in forward], dim=1).double().cpu()
        f = torch.stack([f for _, f in forward], dim=1).double().cpu()
        lengths = (batch.tgt_mask if side == "decoder" else batch.src_mask).sum(dim=1).tolist()
        for row, (index, length) in enumerate(zip(batch.indices, lengths)):
            gates[index] = (i[row, :int(length)], f[row, :int(length)])
    return gates


def gate_correlations(gates: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, float]:
    """Pearson's r of the input and forget gates over every element, and over the per-token means."""
    gates = list(gates)
    return {"elements": pearson(torch.cat([i.flatten() for i, _ in gates]), torch.cat([f.flatten() for _, f in gates])),
            "token_means": pearson(torch.cat([i.mean(dim=1) for i, _ in gates]),
                                   torch.cat([f.mean(dim=1) for _, f in gates]))}


def atr_decoder_gates(model: Seq2Seq, batches: Iterable[Batch]) -> dict[str, float | None]:
    """``atr_gate_r`` and ``atr_gate_r_token_means`` of the decoder's first ATR cell (module docstring);
    None where r is undefined (a gate constant over the set); {} for a decoder without one."""
    cell = next(iter(getattr(model.decoder, "cells", [])), None)
    if not isinstance(cell, ATRCell):
        return {}
    r = gate_correlations(atr_gates_by_sentence(model, cell, batches, "decoder").values())
    return {"atr_gate_r": _finite(r["elements"]), "atr_gate_r_token_means": _finite(r["token_means"])}


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
