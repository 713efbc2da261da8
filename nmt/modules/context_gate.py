"""Context gates (Tu et al. 2017, "Context Gates for Neural Machine Translation").

The gate, eq. (4), over any subset of its inputs (paper Table 5)::

    z_i = σ(W_z e(y_{i-1}) + U_z t_{i-1} + C_z s_i)

with ``gate_inputs`` choosing among prev_word e(y_{i-1}), state t_{i-1} and
source s_i (the "peephole"); ``gate_granularity: scalar`` gives one z per
step (the gating scalar of Xu et al. 2015) instead of one per element.
How z enters the state update (Sec. 3.2)::

    source: t_i = f(W e(y_{i-1}) + U t_{i-1} + z_i * C s_i)
    target: t_i = f(z_i * (W e(y_{i-1}) + U t_{i-1}) + C s_i)
    both:   t_i = f((1 - z_i) * (W e(y_{i-1}) + U t_{i-1}) + z_i * C s_i)

For gated cells "f" is the whole cell: W e(y) is the cell's input term, U t
its recurrent term (``history_gate``) and C s the context term, each split
into the cell's gate chunks and scaled chunk by chunk.

The gate z_i has the size n of the decoder state, one weight per element of
the transferred signal (C s_i), as in the paper (its W_z, U_z, C_z map to
R^n). Dropout goes before W_z and C_z, as before every matrix that reads a
layer input; U_z reads the recurrent state, which like the cell's own U is
not dropped.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nmt.cells.base import scale_chunks


class ContextGate(nn.Module):
    #: set to a list to record z_i at every ``gate`` call (nmt.analysis.context_gates)
    trace: list | None = None

    def __init__(self, strategy: str, inputs: list[str], granularity: str, word_size: int, state_size: int,
                 context_size: int, dropout: float = 0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.strategy = strategy
        self.size = state_size
        out = state_size if granularity == "element" else 1
        sizes = {"prev_word": word_size, "state": state_size, "source": context_size}
        self.inputs = list(inputs)
        self.proj = nn.ModuleDict({name: nn.Linear(sizes[name], out, bias=i == 0) for i, name in enumerate(self.inputs)})

    def gate(self, prev_word: Tensor, state: Tensor, context: Tensor) -> Tensor:
        values = {"prev_word": self.dropout(prev_word), "state": state, "source": self.dropout(context)}
        z = torch.sigmoid(sum(self.proj[name](values[name]) for name in self.inputs))
        if self.trace is not None:
            self.trace.append(z.detach())
        return z

    def combine(self, z: Tensor, target_term: Tensor, source_term: Tensor) -> tuple[Tensor, Tensor | None]:
        """The cell's input (B, k*H) and the scale of its recurrent term, per strategy."""
        if self.strategy == "source":
            return target_term + scale_chunks(source_term, z, self.size), None
        if self.strategy == "target":
            return scale_chunks(target_term, z, self.size) + source_term, z
        keep = 1 - z
        return scale_chunks(target_term, keep, self.size) + scale_chunks(source_term, z, self.size), keep
