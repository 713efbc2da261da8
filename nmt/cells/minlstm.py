"""minLSTM (Feng et al. 2024, "Were RNNs All We Needed?")::

    f_t  = σ(Linear_dh(x_t))                       (forget gate)
    i_t  = σ(Linear_dh(x_t))                       (input gate)
    h~_t = Linear_dh(x_t)                          (candidate)
    f'_t = f_t / (f_t + i_t),   i'_t = i_t / (f_t + i_t)
    h_t  = f'_t ⊙ h_{t-1} + i'_t ⊙ h~_t

The LSTM without output gate, tanh and separate memory, with gates that read
x_t only and normalised to f'_t + i'_t = 1 (so the scale of h_t does not grow
with t). 3 weight matrices (W_f, W_i, W_h), each with a bias. The state is
the visible h alone. Since nothing in a_t = f'_t or b_t = i'_t ⊙ h~_t
depends on h_{t-1}, the recurrence is linear (class a): training runs as one
``nmt.ops.linear_scan`` over the whole sequence, in the encoder and also in
the decoder when nothing feeds back across steps (Luong-style attention
without input feeding). The paper's log-space form (with g(x) keeping h~_t
positive) only serves its log-space parallel scan; the linear scan needs no
logarithms, so this is the plain form above. The fast paths compute the same
f'_t as σ(log f_t - log i_t) (and i'_t alike), which cannot divide 0 by 0
when both gates underflow; ``reference_step`` divides as printed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from nmt.cells.base import OwnWeightsCell
from nmt.ops.linear_scan import masked_linear_scan
from nmt.units import Unit


def normalised_gates(f: Tensor, i: Tensor) -> tuple[Tensor, Tensor]:
    """(f'_t, i'_t) from the pre-activations of f_t and i_t: f_t / (f_t + i_t) = σ(log f_t - log i_t)
    with log σ(x) = -softplus(-x), and i'_t = σ(log i_t - log f_t) (not 1 - f'_t, which loses
    i'_t's digits when f'_t is close to 1)."""
    log_ratio = F.softplus(-i) - F.softplus(-f)  # log f_t - log i_t
    return torch.sigmoid(log_ratio), torch.sigmoid(-log_ratio)


class MinLSTMCell(OwnWeightsCell):
    chunks = 3  # U per direction: [f, i, h~]
    recurrence = "a"
    state_size = 1

    @property
    def weight_matrices(self) -> int:
        return 3

    def step(self, u_t, state, history_gate=None, direction=0):
        if history_gate is not None:
            raise ValueError("minLSTM has no recurrent matrix for a context gate to scale")
        (h,) = state
        f, i, h_tilde = u_t.chunk(3, dim=1)
        f, i = normalised_gates(f, i)
        h_new = f * h + i * h_tilde
        return h_new, (h_new,)

    def scan_direction(self, u, mask, state, direction):
        f, i, h_tilde = u.chunk(3, dim=-1)
        f, i = normalised_gates(f, i)
        h, final = masked_linear_scan(f, i * h_tilde, mask, state[0], reverse=direction == 1)
        return h, (final,)

    def reference_step(self, x_t, state, direction):
        (h,) = state
        W, b = self.input_slice(direction)
        W_f, W_i, W_h = W.split(self.hidden_size)
        b_f, b_i, b_h = b.split(self.hidden_size)
        f = torch.sigmoid(x_t @ W_f.T + b_f)
        i = torch.sigmoid(x_t @ W_i.T + b_i)
        h_tilde = x_t @ W_h.T + b_h
        f_norm, i_norm = f / (f + i), i / (f + i)
        h_new = f_norm * h + i_norm * h_tilde
        return h_new, (h_new,)


UNIT = Unit(
    name="minlstm", label="minLSTM", rank=10, paper="Feng et al. 2024, Were RNNs All We Needed?",
    cell=lambda options, model, input_size, hidden, directions: MinLSTMCell(input_size, hidden, directions),
    recurrence="a", triton_kernels=True,
    # nothing feeds back across decoder steps, so training runs over the whole target at once
    defaults={"input_feeding": False},
)
