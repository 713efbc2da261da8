"""LSTM (Hochreiter & Schmidhuber 1997), with optional peepholes (Gers & Schmidhuber 2000).

Gate layout as in torch (i, f, g, o)::

    i_t = σ(W_i x_t + U_i h_{t-1} + b_i  [+ p_i * c_{t-1}])
    f_t = σ(W_f x_t + U_f h_{t-1} + b_f  [+ p_f * c_{t-1}])
    g_t = tanh(W_g x_t + U_g h_{t-1} + b_g)
    c_t = f_t * c_{t-1} + i_t * g_t
    o_t = σ(W_o x_t + U_o h_{t-1} + b_o  [+ p_o * c_t])
    h_t = o_t * tanh(c_t)

8 weight matrices (ATR paper, Table 1). ``peephole: true`` adds the three
diagonal vectors p_i, p_f, p_o; it disables torch's fused kernel (the step
loop runs instead). Without peepholes the cell equals ``torch.nn.LSTM``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from nmt.cells.base import State, scale_chunks
from nmt.cells.torch_rnn import TorchRNNCell
from nmt.typed_config import setting
from nmt.units import Unit


class LSTMCell(TorchRNNCell):
    torch_module = nn.LSTM
    chunks = 4
    recurrence = "c"
    state_size = 2

    def __init__(self, input_size: int, hidden_size: int, directions: int = 1, peephole: bool = False):
        super().__init__(input_size, hidden_size, directions)
        self.peephole = nn.Parameter(torch.zeros(directions, 3, hidden_size)) if peephole else None

    @property
    def weight_matrices(self) -> int:
        return 8

    @property
    def fused(self) -> bool:
        return self.peephole is None

    def initial_state(self, batch: int, h0: Tensor | None = None, like: Tensor | None = None) -> State:
        if h0 is None:
            h0 = like.new_zeros(batch, self.hidden_size)
        return (h0, torch.zeros_like(h0))  # c_0 = 0 as in torch

    def step(self, u_t, state, history_gate=None, direction=0):
        h, c = state
        gates = u_t + scale_chunks(self.recurrent_term(h, direction), history_gate, self.hidden_size)
        i, f, g, o = gates.chunk(4, dim=1)
        if self.peephole is not None:
            p_i, p_f, p_o = self.peephole[direction]
            i = i + p_i * c
            f = f + p_f * c
        c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        if self.peephole is not None:
            o = o + p_o * c_new
        h_new = torch.sigmoid(o) * torch.tanh(c_new)
        return h_new, (h_new, c_new)

    def reference_step(self, x_t, state, direction):
        h, c = state
        H = self.hidden_size
        W_i, W_f, W_g, W_o = self.weight_ih(direction).split(H)
        U_i, U_f, U_g, U_o = self.weight_hh(direction).split(H)
        b_i, b_f, b_g, b_o = (self.bias_ih(direction) + self.bias_hh(direction)).split(H)
        p_i, p_f, p_o = self.peephole[direction] if self.peephole is not None else (0.0, 0.0, 0.0)
        i = torch.sigmoid(x_t @ W_i.T + h @ U_i.T + b_i + p_i * c)
        f = torch.sigmoid(x_t @ W_f.T + h @ U_f.T + b_f + p_f * c)
        g = torch.tanh(x_t @ W_g.T + h @ U_g.T + b_g)
        c_new = f * c + i * g
        o = torch.sigmoid(x_t @ W_o.T + h @ U_o.T + b_o + p_o * c_new)
        h_new = o * torch.tanh(c_new)
        return h_new, (h_new, c_new)


@dataclass
class LSTMOptions:
    peephole: bool = setting(False, "diagonal c -> gate links (Gers & Schmidhuber 2000); false removes them")


UNIT = Unit(
    name="lstm", label="LSTM", rank=1, paper="Hochreiter & Schmidhuber 1997", options=LSTMOptions,
    cell=lambda options, model, input_size, hidden, directions: LSTMCell(input_size, hidden, directions,
                                                                         peephole=options.peephole),
    recurrence="c", variants={"lstm-peephole": {"model.lstm.peephole": True}},
)
