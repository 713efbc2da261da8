"""Addition-subtraction twin-gated recurrent unit, ATR (Zhang et al. 2018,
"Simplifying Neural Machine Translation with Addition-Subtraction Twin-Gated
Recurrent Networks"), eq. (6-9)::

    q_t = W_x x_t                   (input)
    p_t = W_h h_{t-1} + b           (history)
    i_t = σ(q_t + p_t)              (input gate)
    f_t = σ(q_t - p_t)              (forget gate)
    h_t = i_t * q_t + f_t * h_{t-1}

The forget gate is input minus history, as in the authors' released code (the
zero toolkit, github.com/bzhangGo/zero, ``rnns/atr.py``); the paper's eq. (8)
prints history minus input (``forget_sign: history_minus_input`` gives the
printed version). 2 weight matrices (Table 1). Variants:

- ``gates: coupled``: f_t = 1 - i_t (GRU-like coupling; still 2 matrices).
- ``gates: independent``: separate matrices per gate, i_t = σ(W_i x + U_i h + b_i),
  f_t = σ(W_f x ∓ U_f h + b_f), candidate W_i x (4 matrices, RAN-like).
- ``candidate: tanh``: h_t = i_t * tanh(q_t) + f_t * h_{t-1}.

Whole sequences (``scan``) run through ``nmt.ops.atr_scan``: the hoisted input GEMM, one
GEMM per step, and a hand-written backward; ``step`` serves decoding and context gates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from nmt.cells.base import OwnWeightsCell, scale_chunks
from nmt.ops.atr_scan import atr_scan
from nmt.typed_config import setting
from nmt.units import Unit


class ATRCell(OwnWeightsCell):
    recurrence = "c"
    input_has_bias = False  # q_t = W_x x_t; the bias sits in the history term
    #: set to a list to record (i_t, f_t, direction) at every ``step`` (nmt.analysis.atr_gates)
    trace: list | None = None

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        directions: int = 1,
        gates: str = "twin",
        forget_sign: str = "input_minus_history",
        candidate: str = "linear",
    ):
        independent = gates == "independent"
        self.chunks = 2 if independent else 1  # q (and q_f)
        self.recurrent_chunks = 2 if independent else 1  # p (and p_f)
        super().__init__(input_size, hidden_size, directions)
        self.gates = gates
        self.forget_sign = forget_sign
        self.candidate = candidate

    @property
    def weight_matrices(self) -> int:
        return 4 if self.gates == "independent" else 2

    def step(self, u_t, state, history_gate=None, direction=0):
        (h,) = state
        p = scale_chunks(self.recurrent_term(h, direction), history_gate, self.hidden_size)
        if self.gates == "independent":
            q_i, q_f = u_t.chunk(2, dim=1)
            p_i, p_f = p.chunk(2, dim=1)
        else:
            q_i = q_f = u_t
            p_i = p_f = p
        i = torch.sigmoid(q_i + p_i)
        if self.gates == "coupled":
            f = 1 - i
        elif self.forget_sign == "input_minus_history":
            f = torch.sigmoid(q_f - p_f)
        else:
            f = torch.sigmoid(p_f - q_f)
        if self.trace is not None:
            self.trace.append((i.detach(), f.detach(), direction))
        content = torch.tanh(q_i) if self.candidate == "tanh" else q_i
        h_new = torch.addcmul(i * content, f, h)
        return h_new, (h_new,)

    def scan_direction(self, u, mask, state, direction):
        if self.trace is not None:  # the analysis records the gates step by step
            return super().scan_direction(u, mask, state, direction)
        out, h = atr_scan(u, self.recurrent_weight[direction], self.recurrent_bias[direction], state[0], mask,
                          direction == 1, self.gates, self.forget_sign, self.candidate)
        return out, (h,)

    def reference_step(self, x_t, state, direction):
        (h,) = state
        H = self.hidden_size
        W_x, _ = self.input_slice(direction)
        W_h, b = self.recurrent_weight[direction], self.recurrent_bias[direction]
        if self.gates == "independent":  # W_x = [W_i; W_f], W_h = [U_i; U_f]
            q, q_f = x_t @ W_x[:H].T, x_t @ W_x[H:].T
            p, p_f = h @ W_h[:H].T + b[:H], h @ W_h[H:].T + b[H:]
        else:
            q = q_f = x_t @ W_x.T
            p = p_f = h @ W_h.T + b
        i = torch.sigmoid(q + p)
        if self.gates == "coupled":
            f = 1 - i
        elif self.forget_sign == "input_minus_history":
            f = torch.sigmoid(q_f - p_f)
        else:
            f = torch.sigmoid(p_f - q_f)
        candidate = torch.tanh(q) if self.candidate == "tanh" else q
        h_new = i * candidate + f * h
        return h_new, (h_new,)


@dataclass
class ATROptions:
    gates: Literal["twin", "coupled", "independent"] = setting(
        "twin", "twin: i and f from q +- p (the paper's); coupled: f = 1 - i; independent: own matrices per gate")
    forget_sign: Literal["input_minus_history", "history_minus_input"] = setting(
        "input_minus_history", "f = σ(q - p) as in the authors' code, or σ(p - q) as printed in eq. (8)")
    candidate: Literal["linear", "tanh"] = setting("linear", "the input term q_t, or tanh(q_t)")


UNIT = Unit(
    name="atr", label="ATR", rank=5, options=ATROptions,
    paper="Zhang et al. 2018, Simplifying Neural Machine Translation with Addition-Subtraction Twin-Gated "
          "Recurrent Networks",
    cell=lambda options, model, input_size, hidden, directions: ATRCell(
        input_size, hidden, directions, gates=options.gates, forget_sign=options.forget_sign,
        candidate=options.candidate),
    recurrence="c", triton_kernels=True,
    variants={"atr-coupled": {"model.atr.gates": "coupled"},
              "atr-independent-tanh": {"model.atr.gates": "independent", "model.atr.candidate": "tanh"},
              "atr-history-minus-input": {"model.atr.forget_sign": "history_minus_input"},
              "atr-independent-printed": {"model.atr.gates": "independent",
                                          "model.atr.forget_sign": "history_minus_input"},
              "atr-coupled-tanh": {"model.atr.gates": "coupled", "model.atr.candidate": "tanh"}},
)
