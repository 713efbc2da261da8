"""minGRU (Feng et al. 2024, "Were RNNs All We Needed?")::

    z_t  = σ(Linear_dh(x_t))                       (update gate)
    h~_t = Linear_dh(x_t)                          (candidate)
    h_t  = (1 - z_t) ⊙ h_{t-1} + z_t ⊙ h~_t

The GRU without its reset gate, without the tanh on the candidate and with
gates that read x_t only. 2 weight matrices (W_z, W_h), each with a bias.
The state is the visible h alone. Since nothing in a_t = 1 - z_t or
b_t = z_t ⊙ h~_t depends on h_{t-1}, the recurrence is linear (class a):
training runs as one ``nmt.ops.linear_scan`` over the whole sequence, in
the encoder and also in the decoder when nothing feeds back across steps
(Luong-style attention without input feeding). The paper's log-space form
(with g(x) keeping h~_t positive) only serves its log-space parallel scan;
the linear scan needs no logarithms, so this is the plain form above.
"""

from __future__ import annotations

import torch

from nmt.cells.base import OwnWeightsCell
from nmt.ops.linear_scan import masked_linear_scan
from nmt.units import Unit


class MinGRUCell(OwnWeightsCell):
    chunks = 2  # U per direction: [z, h~]
    recurrence = "a"
    state_size = 1

    @property
    def weight_matrices(self) -> int:
        return 2

    def step(self, u_t, state, history_gate=None, direction=0):
        if history_gate is not None:
            raise ValueError("minGRU has no recurrent matrix for a context gate to scale")
        (h,) = state
        z, h_tilde = u_t.chunk(2, dim=1)
        h_new = torch.sigmoid(-z) * h + torch.sigmoid(z) * h_tilde  # 1 - σ(z) = σ(-z)
        return h_new, (h_new,)

    def scan_direction(self, u, mask, state, direction):
        z, h_tilde = u.chunk(2, dim=-1)
        h, final = masked_linear_scan(torch.sigmoid(-z), torch.sigmoid(z) * h_tilde, mask, state[0],
                                      reverse=direction == 1)  # a_t = 1 - σ(z_t)
        return h, (final,)

    def reference_step(self, x_t, state, direction):
        (h,) = state
        W, b = self.input_slice(direction)
        W_z, W_h = W.split(self.hidden_size)
        b_z, b_h = b.split(self.hidden_size)
        z = torch.sigmoid(x_t @ W_z.T + b_z)
        h_tilde = x_t @ W_h.T + b_h
        h_new = (1 - z) * h + z * h_tilde
        return h_new, (h_new,)


UNIT = Unit(
    name="mingru", label="minGRU", rank=9, paper="Feng et al. 2024, Were RNNs All We Needed?",
    cell=lambda options, model, input_size, hidden, directions: MinGRUCell(input_size, hidden, directions),
    recurrence="a", triton_kernels=True,
    # nothing feeds back across decoder steps, so training runs over the whole target at once
    defaults={"input_feeding": False},
)
