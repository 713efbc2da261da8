"""Recurrent Additive Network, RAN (Lee et al. 2017, "Recurrent Additive Networks")::

    c~_t = W_c x_t                    (x_t itself when input and state sizes match)
    i_t  = σ(W_ix x_t + U_ih h_{t-1} + b_i)
    f_t  = σ(W_fx x_t + U_fh h_{t-1} + b_f)
    c_t  = i_t * c~_t + f_t * c_{t-1}
    h_t  = tanh(c_t)                  (``ran_output: identity``: h_t = c_t)

4 weight matrices in the simplest version (ATR paper, Table 1), where the
content is x_t itself; a fifth, W_c, appears only when the input size
differs from the state size (with a bias, like every input transform here).
A decoder's initial state h_0 also seeds the memory: c_0 = h_0. Whole sequences
(``scan``) run through ``nmt.ops.ran_scan`` (one GEMM per step, a hand-written backward).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from nmt.cells.base import OwnWeightsCell, State, scale_chunks
from nmt.ops.ran_scan import ran_scan
from nmt.typed_config import setting
from nmt.units import Unit


class RANCell(OwnWeightsCell):
    recurrence = "c"
    state_size = 2
    chunks = 3  # U per direction: [i, f, content]
    recurrent_chunks = 2

    def __init__(self, input_size: int, hidden_size: int, directions: int = 1, output: str = "tanh"):
        self.input_chunks = 2 if input_size == hidden_size else 3
        super().__init__(input_size, hidden_size, directions)
        self.output = output

    @property
    def weight_matrices(self) -> int:
        return 2 + self.input_chunks

    def initial_state(self, batch: int, h0: Tensor | None = None, like: Tensor | None = None) -> State:
        if h0 is None:
            h0 = like.new_zeros(batch, self.hidden_size)
        return (h0, h0)  # the memory starts where the visible state does

    def _activate(self, c: Tensor) -> Tensor:
        return torch.tanh(c) if self.output == "tanh" else c

    def step(self, u_t, state, history_gate=None, direction=0):
        h, c = state
        H = self.hidden_size
        gate_terms, content = u_t.split([2 * H, H], dim=1)
        gates = gate_terms + scale_chunks(self.recurrent_term(h, direction), history_gate, H)
        i, f = torch.sigmoid(gates).chunk(2, dim=1)
        c_new = i * content + f * c
        h_new = self._activate(c_new)
        return h_new, (h_new, c_new)

    def scan_direction(self, u, mask, state, direction):
        out, h, c = ran_scan(u, self.recurrent_weight[direction], self.recurrent_bias[direction], state[0], state[1],
                             mask, direction == 1, self.output == "tanh")
        return out, (h, c)

    def reference_step(self, x_t, state, direction):
        h, c = state
        H = self.hidden_size
        W, b = self.input_slice(direction)
        W_ix, W_fx = W[:H], W[H:2 * H]
        b_i, b_f = b[:H], b[H:2 * H]
        U_ih, U_fh = self.recurrent_weight[direction].split(H)
        c_i, c_f = self.recurrent_bias[direction].split(H)
        content = x_t @ W[2 * H:].T + b[2 * H:] if self.input_chunks == 3 else x_t
        i = torch.sigmoid(x_t @ W_ix.T + h @ U_ih.T + b_i + c_i)
        f = torch.sigmoid(x_t @ W_fx.T + h @ U_fh.T + b_f + c_f)
        c_new = i * content + f * c
        h_new = self._activate(c_new)
        return h_new, (h_new, c_new)


@dataclass
class RANOptions:
    output: Literal["tanh", "identity"] = setting("tanh", "h_t = tanh(c_t), or c_t itself (identity)")


UNIT = Unit(
    name="ran", label="RAN", rank=4, paper="Lee et al. 2017, Recurrent Additive Networks", options=RANOptions,
    cell=lambda options, model, input_size, hidden, directions: RANCell(input_size, hidden, directions,
                                                                        output=options.output),
    recurrence="c", triton_kernels=True, variants={"ran-identity": {"model.ran.output": "identity"}},
    renamed={"ran_output": "output"},
)
