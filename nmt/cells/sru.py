"""Simple Recurrent Unit, SRU (Lei et al. 2017, "Training RNNs as Fast as CNNs")::

    x~_t = W x_t
    f_t  = σ(W_f x_t + b_f)
    r_t  = σ(W_r x_t + b_r)
    c_t  = f_t * c_{t-1} + (1 - f_t) * x~_t
    h_t  = r_t * tanh(c_t) + (1 - r_t) * x'_t      (highway; x'_t = x_t, or W_h x_t
                                                     when input and state sizes differ)

3 weight matrices (4 with the highway projection); every input transform
has a bias, and a decoder's initial state seeds the memory (c_0 = h_0). The gates depend on the
input only, so the recurrence is linear (class a) and runs as one scan.
``peephole: true`` gives the v2 gates of Lei et al. 2018::

    f_t = σ(W_f x_t + v_f * c_{t-1} + b_f),   r_t = σ(W_r x_t + v_r * c_{t-1} + b_r)

which make the recurrence state-dependent but still matmul-free (class b): the memory then
runs through ``nmt.ops.sru_v2_scan`` (an elementwise loop, a linear-scan backward).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from nmt.cells.base import OwnWeightsCell, State
from nmt.ops.linear_scan import linear_scan
from nmt.ops.sru_v2_scan import sru_v2_memory
from nmt.typed_config import setting
from nmt.units import Unit


class SRUCell(OwnWeightsCell):
    chunks = 4  # U per direction: [x~, f, r, x']
    state_size = 2

    def __init__(self, input_size: int, hidden_size: int, directions: int = 1, peephole: bool = False):
        self.input_chunks = 3 if input_size == hidden_size else 4
        super().__init__(input_size, hidden_size, directions)
        self.peephole = nn.Parameter(torch.zeros(directions, 2, hidden_size)) if peephole else None
        self.recurrence = "b" if peephole else "a"

    @property
    def weight_matrices(self) -> int:
        return self.input_chunks

    def initial_state(self, batch: int, h0: Tensor | None = None, like: Tensor | None = None) -> State:
        if h0 is None:
            h0 = like.new_zeros(batch, self.hidden_size)
        return (h0, h0)

    def step(self, u_t, state, history_gate=None, direction=0):
        if history_gate is not None:
            raise ValueError("SRU has no recurrent matrix for a context gate to scale")
        h, c = state
        x_tilde, f, r, x_highway = u_t.chunk(4, dim=1)
        if self.peephole is not None:
            v_f, v_r = self.peephole[direction]
            f = f + v_f * c
            r = r + v_r * c
        f, r = torch.sigmoid(f), torch.sigmoid(r)
        c_new = f * c + (1 - f) * x_tilde
        h_new = r * torch.tanh(c_new) + (1 - r) * x_highway
        return h_new, (h_new, c_new)

    def scan_direction(self, u, mask, state, direction):
        x_tilde, f, r, x_highway = u.chunk(4, dim=-1)
        m = mask.unsqueeze(-1)
        reverse = direction == 1
        if self.peephole is not None:  # class (b): the gates read c_{t-1}
            v_f, v_r = self.peephole[direction]
            c = sru_v2_memory(f, x_tilde, v_f, state[1], mask, reverse)
            c0 = state[1].unsqueeze(1)
            c_prev = torch.cat([c[:, 1:], c0], dim=1) if reverse else torch.cat([c0, c[:, :-1]], dim=1)
            r = torch.sigmoid(torch.addcmul(r, v_r, c_prev))
        else:
            f, r = torch.sigmoid(f), torch.sigmoid(r)
            a = torch.where(m, f, 1.0)  # padding: identity element, carries c through
            b = torch.where(m, (1 - f) * x_tilde, 0.0)
            c = linear_scan(a, b, state[1], reverse=reverse)
        h = (r * torch.tanh(c) + (1 - r) * x_highway) * m
        return h, _final_state(h, c, mask, direction)

    def reference_step(self, x_t, state, direction):
        h, c = state
        H = self.hidden_size
        W, b = self.input_slice(direction)
        W_tilde, W_f, W_r = W[:H], W[H:2 * H], W[2 * H:3 * H]
        b_tilde, b_f, b_r = b[:H], b[H:2 * H], b[2 * H:3 * H]
        v_f, v_r = self.peephole[direction] if self.peephole is not None else (0.0, 0.0)
        x_tilde = x_t @ W_tilde.T + b_tilde
        f = torch.sigmoid(x_t @ W_f.T + v_f * c + b_f)
        r = torch.sigmoid(x_t @ W_r.T + v_r * c + b_r)
        x_highway = x_t @ W[3 * H:].T + b[3 * H:] if self.input_chunks == 4 else x_t
        c_new = f * c + (1 - f) * x_tilde
        h_new = r * torch.tanh(c_new) + (1 - r) * x_highway
        return h_new, (h_new, c_new)


def _final_state(h: Tensor, c: Tensor, mask: Tensor, direction: int) -> State:
    """(h, c) after the last real token of each sequence (the first one, right to left)."""
    if direction == 1:
        return h[:, 0], c[:, 0]
    last = (mask.sum(dim=1) - 1).clamp(min=0)
    rows = torch.arange(h.size(0), device=h.device)
    return h[rows, last], c[:, -1]


@dataclass
class SRUOptions:
    peephole: bool = setting(False, "SRU v2's gates with v * c_{t-1} terms (a class b recurrence); "
                                    "false: the v1 gates of the input only")


UNIT = Unit(
    name="sru", label="SRU", rank=6, paper="Lei et al. 2017, Training RNNs as Fast as CNNs", options=SRUOptions,
    cell=lambda options, model, input_size, hidden, directions: SRUCell(input_size, hidden, directions,
                                                                        peephole=options.peephole),
    recurrence="a", triton_kernels=True, variants={"sru-v2": {"model.sru.peephole": True}}, bench=("sru-v2",),
)
