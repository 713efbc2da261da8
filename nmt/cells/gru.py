"""GRU (Cho et al. 2014) in torch's/cuDNN's formulation (gates r, z, n)::

    r_t = σ(W_r x_t + b_ir + U_r h_{t-1} + b_hr)
    z_t = σ(W_z x_t + b_iz + U_z h_{t-1} + b_hz)
    n_t = tanh(W_n x_t + b_in + r_t * (U_n h_{t-1} + b_hn))
    h_t = (1 - z_t) * n_t + z_t * h_{t-1}

The ATR paper's eq. (2-5) apply r_t before U_h (U_h (r * h)); torch applies
it after the matmul, which lets the recurrent GEMM run once per step for all
three gates. Both have 6 weight matrices (ATR paper, Table 1). The cell
equals ``torch.nn.GRU`` and runs on its fused kernel.
"""

from __future__ import annotations

import torch
from torch import nn

from nmt.cells.base import scale_chunks
from nmt.cells.torch_rnn import TorchRNNCell
from nmt.units import Unit


class GRUCell(TorchRNNCell):
    torch_module = nn.GRU
    chunks = 3
    recurrence = "c"

    @property
    def weight_matrices(self) -> int:
        return 6

    def step(self, u_t, state, history_gate=None, direction=0):
        (h,) = state
        rec = scale_chunks(self.recurrent_term(h, direction), history_gate, self.hidden_size)
        u_r, u_z, u_n = u_t.chunk(3, dim=1)
        h_r, h_z, h_n = rec.chunk(3, dim=1)
        r = torch.sigmoid(u_r + h_r)
        z = torch.sigmoid(u_z + h_z)
        n = torch.tanh(u_n + r * h_n)
        h_new = n + z * (h - n)
        return h_new, (h_new,)

    def reference_step(self, x_t, state, direction):
        (h,) = state
        H = self.hidden_size
        W_r, W_z, W_n = self.weight_ih(direction).split(H)
        U_r, U_z, U_n = self.weight_hh(direction).split(H)
        b_ir, b_iz, b_in = self.bias_ih(direction).split(H)
        b_hr, b_hz, b_hn = self.bias_hh(direction).split(H)
        r = torch.sigmoid(x_t @ W_r.T + b_ir + h @ U_r.T + b_hr)
        z = torch.sigmoid(x_t @ W_z.T + b_iz + h @ U_z.T + b_hz)
        n = torch.tanh(x_t @ W_n.T + b_in + r * (h @ U_n.T + b_hn))
        h_new = (1 - z) * n + z * h
        return h_new, (h_new,)


UNIT = Unit(
    name="gru", label="GRU", rank=2, paper="Cho et al. 2014",
    cell=lambda options, model, input_size, hidden, directions: GRUCell(input_size, hidden, directions),
    recurrence="c",
)
