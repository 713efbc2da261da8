"""Cells whose parameters live in a torch ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN``.

Keeping torch's own module as the parameter holder means the plain cells run
on torch's fused kernels (MKL-DNN on CPU, cuDNN on GPU) and equal the torch
modules exactly, while ``project``/``step`` read the same weights for
incremental decoding and for the per-step decoders.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.cells.base import RecurrentCell, State


class TorchRNNCell(RecurrentCell):
    #: nn.LSTM, nn.GRU or nn.RNN
    torch_module: type[nn.RNNBase]

    def __init__(self, input_size: int, hidden_size: int, directions: int = 1):
        super().__init__(input_size, hidden_size, directions)
        self.rnn = self.torch_module(input_size, hidden_size, batch_first=True, bidirectional=directions == 2)

    def _param(self, kind: str, direction: int) -> Tensor:
        return getattr(self.rnn, f"{kind}_l0{'_reverse' if direction else ''}")

    def weight_ih(self, direction: int) -> Tensor:
        return self._param("weight_ih", direction)

    def weight_hh(self, direction: int) -> Tensor:
        return self._param("weight_hh", direction)

    def bias_ih(self, direction: int) -> Tensor:
        return self._param("bias_ih", direction)

    def bias_hh(self, direction: int) -> Tensor:
        return self._param("bias_hh", direction)

    def project(self, x: Tensor, skip: Tensor | None = None) -> Tensor:
        if self.directions == 1:
            return F.linear(x, self.weight_ih(0), self.bias_ih(0))
        weight = torch.cat([self.weight_ih(0), self.weight_ih(1)], dim=0)
        bias = torch.cat([self.bias_ih(0), self.bias_ih(1)], dim=0)
        return F.linear(x, weight, bias)

    def recurrent_term(self, h: Tensor, direction: int) -> Tensor:
        return F.linear(h, self.weight_hh(direction), self.bias_hh(direction))

    @property
    def fused(self) -> bool:
        """Whether ``forward`` may use torch's fused kernel."""
        return True

    def forward(self, x: Tensor, mask: Tensor, state0: list[State] | None = None,
                skip: Tensor | None = None) -> tuple[Tensor, list[State]]:
        if not self.fused:
            return super().forward(x, mask, state0)
        hx = None
        if state0 is not None:
            parts = [torch.stack([s[i] for s in state0]) for i in range(self.state_size)]
            hx = tuple(parts) if self.state_size > 1 else parts[0]
        lengths = mask.sum(dim=1)
        if bool((lengths == x.size(1)).all()):
            out, final = self.rnn(x, hx)
        else:
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            out, final = self.rnn(packed, hx)
            out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
        parts = final if isinstance(final, tuple) else (final,)
        return out, [tuple(p[d] for p in parts) for d in range(self.directions)]
