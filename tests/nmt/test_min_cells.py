"""minGRU and minLSTM (Feng et al. 2024): the linear-scan fast path against the equation-level
reference loop, ``step`` against the scan, padding, the reference step against the paper's
equations computed by hand, and the weight-matrix and parameter counts.

Modules covered here: ``nmt.cells.mingru`` and ``nmt.cells.minlstm``."""

from __future__ import annotations

import math

import pytest
import torch
from test_cells import build, padded_batch  # the cell tests' own set-up: same seeds, same ±0.8 weights

from nmt.cells.mingru import MinGRUCell
from nmt.cells.minlstm import MinLSTMCell, normalised_gates

CELLS = {"mingru": MinGRUCell, "minlstm": MinLSTMCell}
# (input size, hidden size per direction, directions)
SIZES = [(5, 4, 1), (4, 4, 1), (6, 4, 2), (3, 6, 2)]
TOL = {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize("name", list(CELLS))
@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: f"D{s[0]}H{s[1]}x{s[2]}")
def test_fast_path_equals_reference_loop(name, sizes):
    input_size, hidden, directions = sizes
    cell = build(name, input_size, hidden, directions)
    x, mask = padded_batch(3, 7, input_size)
    h0 = [torch.randn(3, hidden, dtype=torch.double, requires_grad=True) for _ in range(directions)]
    out, finals = cell(x, mask, [cell.initial_state(3, h) for h in h0])
    ref, ref_finals = cell.reference(x, mask, [cell.initial_state(3, h) for h in h0])
    assert out.shape == ref.shape == (3, 7, cell.output_size)
    torch.testing.assert_close(out, ref, **TOL)
    assert len(finals) == len(ref_finals) == directions
    for fast_state, ref_state in zip(finals, ref_finals):
        assert len(fast_state) == len(ref_state) == 1
        torch.testing.assert_close(fast_state[0], ref_state[0], **TOL)
    weights = torch.randn_like(out)
    state_weights = [torch.randn_like(state[0]) for state in finals]

    def loss(outputs, states):  # gradients through the outputs and through the final states
        return (outputs * weights).sum() + sum((state[0] * w).sum() for state, w in zip(states, state_weights))

    params = [x, *h0, *cell.parameters()]
    grads = torch.autograd.grad(loss(out, finals), params)
    ref_grads = torch.autograd.grad(loss(ref, ref_finals), params)
    for g, r in zip(grads, ref_grads):
        assert g.abs().sum() > 0
        torch.testing.assert_close(g, r, **TOL)


@pytest.mark.parametrize("name", list(CELLS))
@pytest.mark.parametrize("directions", [1, 2])
def test_step_equals_scan(name, directions):
    """The incremental ``step`` (decoding) follows the same recurrence as the scan, in both directions."""
    cell = build(name, 5, 4, directions)
    x, _ = padded_batch(2, 6, 5)
    mask = torch.ones(2, 6, dtype=torch.bool)
    h0 = [torch.randn(2, 4, dtype=torch.double) for _ in range(directions)]
    out, finals = cell(x, mask, [cell.initial_state(2, h) for h in h0])
    parts = cell.project(x).split(cell.chunks * 4, dim=-1)
    for d in range(directions):
        state = cell.initial_state(2, h0[d])
        for t in (range(5, -1, -1) if d == 1 else range(6)):
            h, state = cell.step(parts[d][:, t], state, direction=d)
            torch.testing.assert_close(h, out[:, t, d * 4:(d + 1) * 4], **TOL)
        torch.testing.assert_close(state[0], finals[d][0], **TOL)


@pytest.mark.parametrize("name", list(CELLS))
@pytest.mark.parametrize("directions", [1, 2])
def test_padding_carries_state_and_zeroes_output(name, directions):
    cell = build(name, 4, 4, directions)
    x, mask = padded_batch(3, 6, 4)
    h0 = torch.randn(3, 4, dtype=torch.double)
    out, finals = cell(x, mask, [cell.initial_state(3, h0)] * directions)
    assert torch.all(out[~mask] == 0)
    for row in range(3):  # each sentence alone gives what it gives inside the padded batch
        n = int(mask[row].sum())
        alone, alone_finals = cell(x[row:row + 1, :n], mask[row:row + 1, :n],
                                   [cell.initial_state(1, h0[row:row + 1])] * directions)
        torch.testing.assert_close(out[row:row + 1, :n], alone, **TOL)
        for state, alone_state in zip(finals, alone_finals):
            torch.testing.assert_close(state[0][row:row + 1], alone_state[0], **TOL)


# --- the equations themselves, computed by hand -----------------------------------


def sigmoid(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


def by_hand(name: str, cell, x_t, h, direction: int) -> torch.Tensor:
    """One step of the paper's equations, element by element in Python floats. Row layout of
    ``input_weight``: direction-major, then one block of H rows per matrix ([W_z; W_h] or
    [W_f; W_i; W_h])."""
    H, D = cell.hidden_size, cell.input_size
    W, b = cell.input_weight.tolist(), cell.input_bias.tolist()

    def linear(matrix: int, row: int, j: int) -> float:
        r = (direction * cell.chunks + matrix) * H + j
        return sum(W[r][k] * x_t[row][k] for k in range(D)) + b[r]

    out = []
    for row in range(len(x_t)):
        values = []
        for j in range(H):
            if name == "mingru":
                z = sigmoid(linear(0, row, j))
                h_tilde = linear(1, row, j)
                values.append((1 - z) * h[row][j] + z * h_tilde)
            else:
                f, i = sigmoid(linear(0, row, j)), sigmoid(linear(1, row, j))
                h_tilde = linear(2, row, j)
                f_norm, i_norm = f / (f + i), i / (f + i)
                assert abs(f_norm + i_norm - 1) < 1e-15
                values.append(f_norm * h[row][j] + i_norm * h_tilde)
        out.append(values)
    return torch.tensor(out, dtype=torch.double)


@pytest.mark.parametrize("name", list(CELLS))
@pytest.mark.parametrize("direction", [0, 1])
def test_reference_step_is_the_papers_equation(name, direction):
    cell = build(name, 3, 4, 2)
    x_t = torch.randn(2, 3, dtype=torch.double)
    h = torch.randn(2, 4, dtype=torch.double)
    expected = by_hand(name, cell, x_t.tolist(), h.tolist(), direction)
    with torch.no_grad():
        h_new, state = cell.reference_step(x_t, (h,), direction)
        torch.testing.assert_close(h_new, expected, **TOL)
        assert len(state) == 1 and torch.equal(state[0], h_new)
        # and the fast step on the projected input
        u = cell.project(x_t[:, None])[:, 0].split(cell.chunks * 4, dim=-1)[direction]
        torch.testing.assert_close(cell.step(u, (h,), direction=direction)[0], expected, **TOL)


@pytest.mark.parametrize("direction", [0, 1])
def test_minlstm_is_a_convex_combination(direction):
    """f'_t + i'_t = 1: when h_{t-1} equals the candidate h~_t, the step returns it unchanged,
    whatever the gates; and h_t lies between h_{t-1} and h~_t."""
    cell = build("minlstm", 3, 4, 2)
    x_t = torch.randn(5, 3, dtype=torch.double)
    with torch.no_grad():
        W, b = cell.input_slice(direction)
        h_tilde = x_t @ W[8:].T + b[8:]
        h_new, _ = cell.reference_step(x_t, (h_tilde,), direction)
        torch.testing.assert_close(h_new, h_tilde, **TOL)
        h = torch.randn(5, 4, dtype=torch.double)
        h_new, _ = cell.reference_step(x_t, (h,), direction)
        assert torch.all(h_new >= torch.minimum(h, h_tilde) - 1e-12)
        assert torch.all(h_new <= torch.maximum(h, h_tilde) + 1e-12)


def test_minlstm_normalised_gates():
    """The fast paths' σ(log f - log i) equals the printed f / (f + i), and stays finite where
    both gates underflow (the printed division gives 0/0 there)."""
    f_pre = torch.randn(50, dtype=torch.double) * 4
    i_pre = torch.randn(50, dtype=torch.double) * 4
    f_norm, i_norm = normalised_gates(f_pre, i_pre)
    f, i = torch.sigmoid(f_pre), torch.sigmoid(i_pre)
    torch.testing.assert_close(f_norm, f / (f + i), **TOL)
    torch.testing.assert_close(i_norm, i / (f + i), **TOL)
    torch.testing.assert_close(f_norm + i_norm, torch.ones_like(f_norm), **TOL)
    f_pre, i_pre = torch.tensor([-200.0, -300.0]), torch.tensor([-201.0, -300.0])
    f, i = torch.sigmoid(f_pre), torch.sigmoid(i_pre)
    assert torch.isnan(f / (f + i)).all()  # float32: both gates are 0
    f_norm, i_norm = normalised_gates(f_pre, i_pre)
    torch.testing.assert_close(f_norm, torch.tensor([1 / (1 + math.exp(-1)), 0.5]))
    torch.testing.assert_close(i_norm, 1 - f_norm)


def test_mingru_gate_extremes():
    """z_t = 0 keeps h_{t-1}; z_t = 1 takes the candidate h~_t (bias-driven gate, in the fast step)."""
    cell = build("mingru", 3, 4, 1)
    x_t = torch.randn(2, 3, dtype=torch.double)
    h = torch.randn(2, 4, dtype=torch.double)
    with torch.no_grad():
        h_tilde = x_t @ cell.input_weight[4:].T + cell.input_bias[4:]
        cell.input_weight[:4] = 0
        for bias, expected in ((-100.0, h), (100.0, h_tilde)):
            cell.input_bias[:4] = bias
            torch.testing.assert_close(cell.step(cell.project(x_t[:, None])[:, 0], (h,))[0], expected, **TOL)
            torch.testing.assert_close(cell.reference_step(x_t, (h,), 0)[0], expected, **TOL)


# --- contract details -------------------------------------------------------------


@pytest.mark.parametrize("name", list(CELLS))
def test_contract_attributes(name):
    cell = build(name, 5, 4, 2)
    assert cell.recurrence == "a" and cell.state_size == 1
    assert cell.chunks == {"mingru": 2, "minlstm": 3}[name]
    assert cell.output_size == 8
    x = torch.randn(2, 3, 5, dtype=torch.double)
    u = cell.project(x)
    assert u.shape == (2, 3, 2 * cell.chunks * 4)  # one GEMM, both directions
    torch.testing.assert_close(cell.project(x, skip=torch.zeros_like(x)), u)  # no identity path
    state = cell.initial_state(2, like=x)
    assert len(state) == 1 and torch.equal(state[0], torch.zeros(2, 4, dtype=torch.double))
    h0 = torch.randn(2, 4, dtype=torch.double)
    assert cell.initial_state(2, h0)[0] is h0


@pytest.mark.parametrize("name", list(CELLS))
def test_history_gate_is_rejected(name):
    """Context gates scale a matmul on h_{t-1}; these cells have none."""
    cell = build(name, 4, 4, 1)
    u = cell.project(torch.randn(2, 1, 4, dtype=torch.double))[:, 0]
    state = cell.initial_state(2, like=u)
    cell.step(u, state, history_gate=None)
    with pytest.raises(ValueError, match="context gate"):
        cell.step(u, state, history_gate=torch.ones(2, 4, dtype=torch.double))


@pytest.mark.parametrize("name,matrices", [("mingru", 2), ("minlstm", 3)])
@pytest.mark.parametrize("sizes", [(6, 6, 1), (5, 4, 1), (3, 6, 2)], ids=lambda s: f"D{s[0]}H{s[1]}x{s[2]}")
def test_weight_matrices_and_parameters_by_hand(name, matrices, sizes):
    D, H, directions = sizes
    cell = CELLS[name](D, H, directions)
    assert cell.weight_matrices == matrices
    # k matrices H x D and k biases of size H per direction; no recurrent matrix
    assert sum(p.numel() for p in cell.parameters()) == directions * (matrices * H * D + matrices * H)
    bound = H ** -0.5  # initialised like the other cells: uniform(-1/sqrt(H), 1/sqrt(H))
    assert all(p.abs().max() <= bound for p in cell.parameters())
