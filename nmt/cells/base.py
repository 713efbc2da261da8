"""The contract every recurrent cell follows.

- ``project(x)``: one GEMM over all time steps, (B, T, D) -> (B, T, dirs*k*H),
  both directions in the same matrix where the cell is bidirectional.
- ``scan(U, mask, state0)``: the recurrence over time for every direction.
  Padded positions (mask False) carry the state through unchanged, so results
  do not depend on padding or batch composition; outputs there are zero.
- ``step(U_t, state)``: one step of one direction, for incremental decoding.
- ``forward(x, mask, state0, skip)`` = ``scan(project(x, skip), ...)``; cells
  with a fused kernel (plain LSTM/GRU/RNN) override it. ``skip`` is the
  clean input of identity paths (SRU's and SR-NMT's highway, RAN's content)
  when ``x`` went through dropout: dropout sits before parameter matrices
  only, never on a skip connection.
- ``reference(x, mask, state0)``: a plain per-step loop written directly from
  the paper's equations, which every fast path is tested against.

A state is a tuple of (B, H) tensors whose first element is the visible
output h_{t-1} (what attention and context gates look at); cells with a
separate memory (LSTM, RAN, SRU) carry it as the second element.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

State = tuple[Tensor, ...]


class RecurrentCell(nn.Module):
    #: feature chunks of size H per direction in ``project``'s output
    chunks: int = 1
    #: recurrence class: "a" linear in the state, "b" elementwise on it, "c" a matrix product on h_{t-1}
    recurrence: str = "c"
    #: elements of the state tuple
    state_size: int = 1

    def __init__(self, input_size: int, hidden_size: int, directions: int = 1):
        super().__init__()
        if directions not in (1, 2):
            raise ValueError("directions must be 1 or 2")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.directions = directions

    @property
    def output_size(self) -> int:
        return self.hidden_size * self.directions

    @property
    def weight_matrices(self) -> int:
        """Weight matrices per unit, counted as in the ATR paper's Table 1."""
        raise NotImplementedError

    # --- contract -----------------------------------------------------------

    def project(self, x: Tensor, skip: Tensor | None = None) -> Tensor:
        raise NotImplementedError

    def step(self, u_t: Tensor, state: State, history_gate: Tensor | None = None, direction: int = 0) -> tuple[Tensor, State]:
        """One step. ``history_gate`` (B, H) or (B, 1) scales the recurrent term
        (the matmul on h_{t-1}); context gates use it."""
        raise NotImplementedError

    def reference_step(self, x_t: Tensor, state: State, direction: int) -> tuple[Tensor, State]:
        """One step on the raw input x_t, written from the paper's equations."""
        raise NotImplementedError

    def reference(self, x: Tensor, mask: Tensor, state0: list[State] | None = None) -> tuple[Tensor, list[State]]:
        """The plain per-step loop over ``reference_step`` for every direction."""
        outputs, finals = [], []
        for d in range(self.directions):
            init = state0[d] if state0 is not None else self.initial_state(x.size(0), like=x)
            out, final = reference_loop(
                lambda t, state, d=d: self.reference_step(x[:, t], state, d), x.size(1), mask, init, reverse=d == 1
            )
            outputs.append(out)
            finals.append(final)
        return torch.cat(outputs, dim=-1), finals

    def initial_state(self, batch: int, h0: Tensor | None = None, like: Tensor | None = None) -> State:
        """Zeros, or a state whose visible part (and memory, where it has one) starts at ``h0``."""
        if h0 is None:
            h0 = like.new_zeros(batch, self.hidden_size)
        return (h0,) * self.state_size

    def forward(self, x: Tensor, mask: Tensor, state0: list[State] | None = None,
                skip: Tensor | None = None) -> tuple[Tensor, list[State]]:
        return self.scan(self.project(x, skip), mask, state0)

    def scan(self, u: Tensor, mask: Tensor, state0: list[State] | None = None) -> tuple[Tensor, list[State]]:
        # split, not slices: each slice's backward would zero-fill a gradient the size of u
        parts = u.split(u.size(-1) // self.directions, dim=-1)
        outputs, finals = [], []
        for d in range(self.directions):
            init = state0[d] if state0 is not None else self.initial_state(u.size(0), like=u)
            out, final = self.scan_direction(parts[d], mask, init, d)
            outputs.append(out)
            finals.append(final)
        return (outputs[0] if self.directions == 1 else torch.cat(outputs, dim=-1)), finals

    def scan_direction(self, u: Tensor, mask: Tensor, state: State, direction: int) -> tuple[Tensor, State]:
        """Default fast path for step cells: the input GEMM is already hoisted
        into ``u``; the loop does only the per-step work. Direction 1 runs
        right to left."""
        length = u.size(1)
        steps = range(length - 1, -1, -1) if direction == 1 else range(length)
        step_mask = mask.unsqueeze(-1)
        full = mask.all(dim=0).tolist()  # steps where no sequence is padded skip the select
        outputs: list[Tensor | None] = [None] * length
        for t in steps:
            h, new_state = self.step(u[:, t], state, direction=direction)
            if full[t]:
                state = new_state
                outputs[t] = h
            else:
                m = step_mask[:, t]
                state = tuple(torch.where(m, new, old) for new, old in zip(new_state, state))
                outputs[t] = h * m
        return torch.stack(outputs, dim=1), state


def scale_chunks(x: Tensor, gate: Tensor | None, size: int) -> Tensor:
    """Multiply every size-``size`` chunk of ``x`` (B, n*size) by ``gate`` (B, size) or (B, 1)."""
    if gate is None:
        return x
    batch = x.size(0)
    return (x.view(batch, -1, size) * gate.unsqueeze(1)).view(batch, -1)


def reference_loop(step_fn, x_len: int, mask: Tensor, state: State, reverse: bool) -> tuple[Tensor, State]:
    """Shared driver for reference loops: ``step_fn(t, state) -> (h, new_state)``;
    padded steps keep the old state and output zeros."""
    steps = range(x_len - 1, -1, -1) if reverse else range(x_len)
    outputs: list[Tensor | None] = [None] * x_len
    for t in steps:
        h, new_state = step_fn(t, state)
        m = mask[:, t].unsqueeze(-1).to(h.dtype)
        state = tuple(m * new + (1 - m) * old for new, old in zip(new_state, state))
        outputs[t] = m * h
    return torch.stack(outputs, dim=1), state


class OwnWeightsCell(RecurrentCell):
    """A cell with its own input matrix W (all directions, one GEMM) and,
    when ``recurrent_chunks`` > 0, a recurrent matrix U and bias per direction.
    Initialised like torch's RNNs: uniform(-1/sqrt(H), 1/sqrt(H))."""

    #: chunks of size H in the recurrent term U h_{t-1} + b
    recurrent_chunks: int = 0
    #: chunks of size H produced by W per direction; ``project`` appends the
    #: raw input x as a last chunk when this is one less than ``chunks``
    input_chunks: int | None = None
    #: whether W x_t has its own bias (ATR's q_t = W_x x_t has none)
    input_has_bias: bool = True

    def __init__(self, input_size: int, hidden_size: int, directions: int = 1):
        super().__init__(input_size, hidden_size, directions)
        if self.input_chunks is None:
            self.input_chunks = self.chunks
        if self.input_chunks < self.chunks and input_size != hidden_size:
            raise ValueError("appending x to U needs input_size == hidden_size")
        rows = directions * self.input_chunks * hidden_size
        self.input_weight = nn.Parameter(torch.empty(rows, input_size))
        self.input_bias = nn.Parameter(torch.empty(rows)) if self.input_has_bias else None
        if self.recurrent_chunks:
            self.recurrent_weight = nn.Parameter(torch.empty(directions, self.recurrent_chunks * hidden_size, hidden_size))
            self.recurrent_bias = nn.Parameter(torch.empty(directions, self.recurrent_chunks * hidden_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = self.hidden_size ** -0.5
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def project(self, x: Tensor, skip: Tensor | None = None) -> Tensor:
        u = torch.nn.functional.linear(x, self.input_weight, self.input_bias)
        if self.input_chunks == self.chunks:
            return u
        identity = x if skip is None else skip
        parts = []
        for own in u.split(self.input_chunks * self.hidden_size, dim=-1):
            parts += [own, identity]
        return torch.cat(parts, dim=-1)

    def input_slice(self, direction: int) -> tuple[Tensor, Tensor]:
        """(W, b) of one direction, for reference loops."""
        width = self.input_chunks * self.hidden_size
        rows = slice(direction * width, (direction + 1) * width)
        bias = self.input_bias[rows] if self.input_bias is not None else torch.zeros_like(self.input_weight[rows, 0])
        return self.input_weight[rows], bias

    def recurrent_term(self, h: Tensor, direction: int) -> Tensor:
        return torch.addmm(self.recurrent_bias[direction], h, self.recurrent_weight[direction].t())
