"""Token-bucketed batches of encoded sentence pairs.

Layout of one training batch (``PAD = 0`` right padding everywhere)::

    src     = x_1 .. x_m EOS          src_mask True on those m+1 positions
    tgt_in  = BOS y_1 .. y_n          tgt_mask True on those n+1 positions
    tgt_out = y_1 .. y_n EOS          (tgt_in shifted left by one)

Examples are sorted by (target length, source length), cut greedily into
batches whose padded size ``B * max(S, T)`` stays within ``batch_tokens``
(an example that alone exceeds it forms its own batch) and, for training,
the *batch order* is shuffled with ``random.Random(seed * 1000003 + epoch)``.
Batch composition is therefore fixed; only the order changes per epoch.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from nmt.data.subword import BOS, EOS, PAD

__all__ = ["Batch", "batch_plan", "make_batches", "make_source_batches", "pad_sources"]


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) long: source ids + EOS, right-padded with PAD
    src_mask: torch.Tensor  # (B, S) bool: True at real tokens
    tgt_in: torch.Tensor  # (B, T) long: BOS + target ids, right-padded
    tgt_out: torch.Tensor  # (B, T) long: target ids + EOS, right-padded
    tgt_mask: torch.Tensor  # (B, T) bool
    indices: list[int]  # positions of these examples in the dataset

    @property
    def ntokens(self) -> int:
        """Real target tokens (EOS included, padding excluded)."""
        return int(self.tgt_mask.sum())

    @property
    def size(self) -> int:
        return self.src.size(0)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        return Batch(
            src=self.src.to(device, non_blocking=non_blocking),
            src_mask=self.src_mask.to(device, non_blocking=non_blocking),
            tgt_in=self.tgt_in.to(device, non_blocking=non_blocking),
            tgt_out=self.tgt_out.to(device, non_blocking=non_blocking),
            tgt_mask=self.tgt_mask.to(device, non_blocking=non_blocking),
            indices=list(self.indices),
        )


def _pad(rows: list[list[int]], width: int) -> torch.Tensor:
    return torch.tensor([row + [PAD] * (width - len(row)) for row in rows], dtype=torch.long)


def _collate(examples: Sequence[tuple[list[int], list[int]]], indices: list[int]) -> Batch:
    srcs = [list(examples[i][0]) + [EOS] for i in indices]
    tgts = [list(examples[i][1]) for i in indices]
    s_len = max(len(s) for s in srcs)
    t_len = max(len(t) for t in tgts) + 1
    src = _pad(srcs, s_len)
    tgt_in = _pad([[BOS] + t for t in tgts], t_len)
    tgt_out = _pad([t + [EOS] for t in tgts], t_len)
    s_lens = torch.tensor([len(s) for s in srcs])
    t_lens = torch.tensor([len(t) + 1 for t in tgts])
    src_mask = torch.arange(s_len)[None, :] < s_lens[:, None]
    tgt_mask = torch.arange(t_len)[None, :] < t_lens[:, None]
    return Batch(src, src_mask, tgt_in, tgt_out, tgt_mask, list(indices))


def batch_plan(examples: Sequence[tuple[Sequence[int], Sequence[int]]], batch_tokens: int) -> list[list[int]]:
    """The example indices of each batch, length-sorted, before any shuffling."""
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens must be >= 1, got {batch_tokens}")
    order = sorted(range(len(examples)), key=lambda i: (len(examples[i][1]), len(examples[i][0]), i))
    plan: list[list[int]] = []
    current: list[int] = []
    width = 0  # max(S, T) of the current batch
    for i in order:
        src, tgt = examples[i]
        w = max(len(src) + 1, len(tgt) + 1)  # + EOS / + BOS
        new_width = max(width, w)
        if current and (len(current) + 1) * new_width > batch_tokens:
            plan.append(current)
            current, new_width = [], w
        current.append(i)
        width = new_width
    if current:
        plan.append(current)
    return plan


def make_batches(examples: Sequence[tuple[list[int], list[int]]], batch_tokens: int, shuffle: bool,
                 seed: int = 0, epoch: int = 0) -> list[Batch]:
    """Length-bucketed batches with padded size ``B * max(S, T) <= batch_tokens``.

    With ``shuffle`` the batch order is a deterministic function of (seed, epoch).
    """
    plan = batch_plan(examples, batch_tokens)
    if shuffle:
        random.Random(seed * 1000003 + epoch).shuffle(plan)
    return [_collate(examples, idx) for idx in plan]


def pad_sources(sources: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) source ids + EOS right-padded with PAD, and the (B, S) mask."""
    rows = [list(s) + [EOS] for s in sources]
    width = max(len(r) for r in rows)
    lens = torch.tensor([len(r) for r in rows])
    return _pad(rows, width), torch.arange(width)[None, :] < lens[:, None]


def make_source_batches(sources: Sequence[Sequence[int]], max_sentences: int
                        ) -> list[tuple[torch.Tensor, torch.Tensor, list[int]]]:
    """Batches of at most ``max_sentences`` sources for decoding: ``(src, src_mask, indices)``.

    Sources are sorted by length, longest first (so batches hold similar lengths
    and the largest batch comes first); ``indices`` are the original positions,
    so ``out[indices[k]] = hyp[k]`` restores the input order. ``src`` has EOS
    appended like training batches.
    """
    if max_sentences < 1:
        raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
    order = sorted(range(len(sources)), key=lambda i: (-len(sources[i]), i))
    out = []
    for start in range(0, len(order), max_sentences):
        idx = order[start:start + max_sentences]
        src, mask = pad_sources([sources[i] for i in idx])
        out.append((src, mask, idx))
    return out
