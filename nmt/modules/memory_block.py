"""FSMN memory block (Hou et al., "Feedforward Sequential Memory Networks
based Encoder-Decoder Model for Machine Translation", eq. 5)::

    scalar:  m_t = f(Σ_{i=0..N} a_i   h_{t-i})       one coefficient per tap
    vector:  m_t = f(Σ_{i=0..N} a_i ⊙ h_{t-i})       one per tap and dimension

with f = ReLU and zero padding for t <= N. Whole sequences are computed at
once, as one product with the banded (Toeplitz) matrix of the taps,
A[t, u] = a_{t-u} for 0 <= t-u <= N: a matrix product runs several times
faster forward and backward than the equivalent depthwise convolution on
CPU, though it also multiplies the zeros outside the band. ``step`` keeps
the last N inputs for incremental decoding.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class MemoryBlock(nn.Module):
    #: the taps start as a moving average, which a uniform initialisation must not overwrite
    keeps_initial_values = True

    def __init__(self, size: int, order: int, kind: str = "scalar"):
        super().__init__()
        self.lr_scale = 1.0  # the taps' learning rate / the rest's (Seq2Seq.lr_scales)
        self.size = size
        self.order = order
        shape = (order + 1,) if kind == "scalar" else (order + 1, size)
        # Start as a moving average over the window; learning shapes the filter.
        self.taps = nn.Parameter(torch.full(shape, 1.0 / (order + 1)))

    def _filter(self) -> Tensor:
        """Taps as (size, order+1): column i multiplies h_{t-i}."""
        taps = self.taps if self.taps.dim() == 2 else self.taps.unsqueeze(1).expand(-1, self.size)
        return taps.t()

    def forward(self, h: Tensor) -> Tensor:
        """h (B, T, H) -> m (B, T, H); position t sees h_{t-N} .. h_t."""
        length = h.size(1)
        steps_back = torch.arange(length, device=h.device)
        steps_back = steps_back.unsqueeze(1) - steps_back  # [t, u] = t - u
        # shifts[i, t, u] = 1 where t - u = i: the band's i-th diagonal
        shifts = (steps_back == torch.arange(self.order + 1, device=h.device).view(-1, 1, 1)).to(h.dtype)
        if self.taps.dim() == 1:
            band = torch.einsum("i,itu->tu", self.taps, shifts)
            return torch.relu(torch.matmul(band, h))
        band = torch.einsum("ih,itu->htu", self.taps, shifts)  # one band per dimension
        return torch.relu(torch.einsum("htu,buh->bth", band, h))

    def initial_buffer(self, batch: int, like: Tensor) -> Tensor:
        return like.new_zeros(batch, self.order, self.size)

    def step(self, h_t: Tensor, buffer: Tensor) -> tuple[Tensor, Tensor]:
        """h_t (B, H), buffer (B, N, H) of h_{t-N}..h_{t-1} -> m_t, new buffer."""
        window = torch.cat([buffer, h_t.unsqueeze(1)], dim=1)  # oldest first
        taps = self._filter().flip(1).t()  # (N+1, H), row k multiplies window[k] = h_{t-N+k}
        m_t = torch.relu((window * taps.unsqueeze(0)).sum(dim=1))
        return m_t, window[:, 1:]

    def reference(self, h: Tensor) -> Tensor:
        """Plain loop over eq. (5)."""
        taps = self._filter()  # (H, N+1)
        out = []
        for t in range(h.size(1)):
            acc = torch.zeros_like(h[:, 0])
            for i in range(self.order + 1):
                if t - i >= 0:
                    acc = acc + taps[:, i] * h[:, t - i]
            out.append(torch.relu(acc))
        return torch.stack(out, dim=1)


def set_memory_lr_scale(module: nn.Module, scale: float) -> None:
    """Every memory block in ``module`` learns at ``scale`` times the rate of the rest."""
    for block in module.modules():
        if isinstance(block, MemoryBlock):
            block.lr_scale = scale
