"""Plain tanh RNN (Elman 1990)::

    h_t = tanh(W x_t + U h_{t-1} + b)

2 weight matrices. Equals ``torch.nn.RNN(nonlinearity="tanh")`` and runs on
its fused kernel.
"""

from __future__ import annotations

import torch
from torch import nn

from nmt.cells.base import scale_chunks
from nmt.cells.torch_rnn import TorchRNNCell
from nmt.units import Unit


class RNNCell(TorchRNNCell):
    torch_module = nn.RNN
    chunks = 1
    recurrence = "c"

    @property
    def weight_matrices(self) -> int:
        return 2

    def step(self, u_t, state, history_gate=None, direction=0):
        (h,) = state
        h_new = torch.tanh(u_t + scale_chunks(self.recurrent_term(h, direction), history_gate, self.hidden_size))
        return h_new, (h_new,)

    def reference_step(self, x_t, state, direction):
        (h,) = state
        W, U = self.weight_ih(direction), self.weight_hh(direction)
        b = self.bias_ih(direction) + self.bias_hh(direction)
        h_new = torch.tanh(x_t @ W.T + h @ U.T + b)
        return h_new, (h_new,)


UNIT = Unit(
    name="rnn", label="RNN", rank=3, paper="Elman 1990",
    cell=lambda options, model, input_size, hidden, directions: RNNCell(input_size, hidden, directions),
    recurrence="c",
)
