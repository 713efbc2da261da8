"""Every cell's fast path against its equation-level reference loop, torch's
fused LSTM/GRU/RNN against ours, and the paper's weight-matrix counts.

Modules covered here: ``nmt.cells.atr``, ``nmt.cells.base``, ``nmt.cells.gru``, ``nmt.cells.lstm``,
``nmt.cells.ran``, ``nmt.cells.rnn``, ``nmt.cells.srnmt``, ``nmt.cells.sru``, ``nmt.cells.torch_rnn``,
``nmt.modules.memory_block``, ``nmt.ops.atr_scan``, ``nmt.ops.linear_scan``, ``nmt.ops.ran_scan`` and
``nmt.ops.sru_v2_scan``."""

from __future__ import annotations

import zlib

import pytest
import torch
from torch import nn

from nmt.cells import make_cell
from nmt.cells.base import RecurrentCell
from nmt.config import config_from_dict, load_config
from nmt.modules.memory_block import MemoryBlock
from nmt.ops.linear_scan import linear_scan, linear_scan_reference
from nmt.typed_config import apply_overrides
from nmt.units import units

# every unit with a cell, at its defaults and in the variants its module declares
CELL_VARIANTS = {name: {**variant} for unit in units().values() if unit.cell is not None
                 for name, variant in [(unit.name, {}), *unit.variants.items()]}
# the cells that also run step by step (in the decoder; an encoder-only unit has no initial state to learn from)
STEPPED = [v for v in CELL_VARIANTS if units()[v.split("-")[0]].recurrent_decoder]
# (input size, hidden size per direction, directions): input = hidden exercises the
# "x appended to U" paths of RAN and SRU; srnmt takes the total size d.
SIZES = [(5, 4, 1), (4, 4, 1), (6, 4, 2), (4, 4, 2), (3, 6, 2)]


def cell_config(variant: str):
    cell = variant.split("-")[0]
    overrides = [(key, value) for key, value in CELL_VARIANTS[variant].items()]
    return config_from_dict(apply_overrides({"model": {"cell": cell}}, overrides)).model


def build(variant: str, input_size: int, hidden: int, directions: int) -> RecurrentCell:
    cfg = cell_config(variant)
    if cfg.unit.bidirectional == "total":
        cell = make_cell(cfg, input_size, 2 * hidden)
    else:
        cell = make_cell(cfg, input_size, hidden, directions)
    torch.manual_seed(zlib.crc32(f"{variant}{input_size}{hidden}{directions}".encode()))
    for p in cell.parameters():  # peepholes and LN start at constants: randomise everything
        nn.init.uniform_(p, -0.8, 0.8)
    return cell.double()


def padded_batch(batch: int, length: int, size: int):
    x = torch.randn(batch, length, size, dtype=torch.double, requires_grad=True)
    lengths = torch.tensor([length] + [max(1, length - 2 * i - 1) for i in range(1, batch)])
    mask = torch.arange(length)[None, :] < lengths[:, None]
    return x, mask


@pytest.mark.parametrize("variant", list(CELL_VARIANTS))
@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: f"D{s[0]}H{s[1]}x{s[2]}")
def test_fast_path_equals_reference_loop(variant, sizes):
    input_size, hidden, directions = sizes
    cell = build(variant, input_size, hidden, directions)
    x, mask = padded_batch(3, 7, input_size)
    out, finals = cell(x, mask)
    ref, ref_finals = cell.reference(x, mask)
    assert out.shape == ref.shape == (3, 7, cell.output_size)
    torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-10)
    for fast_state, ref_state in zip(finals, ref_finals):
        for a, b in zip(fast_state, ref_state):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)
    weights = torch.randn_like(out)
    state_weights = [[torch.randn_like(part) for part in state] for state in finals]

    def loss(outputs, states):  # gradients through the outputs and through the final states
        total = (outputs * weights).sum()
        for state, ws in zip(states, state_weights):
            total = total + sum((part * w).sum() for part, w in zip(state, ws))
        return total

    params = [x, *cell.parameters()]
    grads = torch.autograd.grad(loss(out, finals), params)
    ref_grads = torch.autograd.grad(loss(ref, ref_finals), params)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("variant", STEPPED)
def test_fast_path_gradients_reach_the_initial_state(variant):
    """Decoders without feedback scan from a learned h0: its gradient must match the reference."""
    cell = build(variant, 4, 4, 2)
    x, mask = padded_batch(3, 6, 4)
    h0 = torch.randn(3, 4, dtype=torch.double, requires_grad=True)
    weights = torch.randn(3, 6, cell.output_size, dtype=torch.double)

    def state0():
        return [cell.initial_state(3, h0 * (d + 1)) for d in range(2)]

    (grad,) = torch.autograd.grad((cell(x, mask, state0())[0] * weights).sum(), [h0])
    (ref_grad,) = torch.autograd.grad((cell.reference(x, mask, state0())[0] * weights).sum(), [h0])
    torch.testing.assert_close(grad, ref_grad, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("variant", STEPPED)
def test_step_equals_scan(variant):
    """The incremental ``step`` (decoding) follows the same recurrence as ``scan``."""
    cell = build(variant, 5, 4, 1)
    x, _ = padded_batch(2, 6, 5)
    mask = torch.ones(2, 6, dtype=torch.bool)
    out, _ = cell(x, mask)
    state = cell.initial_state(2, like=x)
    u = cell.project(x)
    for t in range(6):
        h, state = cell.step(u[:, t], state)
        torch.testing.assert_close(h, out[:, t], rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("variant", list(CELL_VARIANTS))
def test_padding_carries_state_and_zeroes_output(variant):
    cell = build(variant, 4, 4, 2)
    x, mask = padded_batch(3, 6, 4)
    out, _ = cell(x, mask)
    assert torch.all(out[~mask] == 0)
    alone, _ = cell(x[2:3, : int(mask[2].sum())], mask[2:3, : int(mask[2].sum())])
    torch.testing.assert_close(out[2:3, : int(mask[2].sum())], alone, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name,torch_cls", [("lstm", nn.LSTM), ("gru", nn.GRU), ("rnn", nn.RNN)])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_matches_torch_module_with_same_weights(name, torch_cls, bidirectional):
    torch.manual_seed(3)
    reference = torch_cls(5, 4, batch_first=True, bidirectional=bidirectional).double()
    cell = make_cell(load_config(None, [f"model.cell={name}"]).model, 5, 4, 2 if bidirectional else 1).double()
    cell.rnn.load_state_dict(reference.state_dict())
    x = torch.randn(3, 6, 5, dtype=torch.double)
    mask = torch.ones(3, 6, dtype=torch.bool)
    expected, _ = reference(x)
    # the fused path, our own project/scan/step path, and the equation loop all agree with torch
    torch.testing.assert_close(cell(x, mask)[0], expected)
    torch.testing.assert_close(RecurrentCell.forward(cell, x, mask)[0], expected)
    torch.testing.assert_close(cell.reference(x, mask)[0], expected)


@pytest.mark.parametrize("method", ["sequential", "doubling"])
@pytest.mark.parametrize("reverse", [False, True])
def test_linear_scan_values_and_gradients(method, reverse):
    torch.manual_seed(0)
    a = torch.rand(3, 9, 4, dtype=torch.double, requires_grad=True)
    b = torch.randn(3, 9, 4, dtype=torch.double, requires_grad=True)
    c0 = torch.randn(3, 4, dtype=torch.double, requires_grad=True)
    torch.testing.assert_close(linear_scan(a, b, c0, reverse, method), linear_scan_reference(a, b, c0, reverse))
    assert torch.autograd.gradcheck(lambda a, b, c0: linear_scan(a, b, c0, reverse, method), (a, b, c0))


def test_linear_scan_is_stable_with_tiny_gates():
    """Products of many near-zero gates must not produce inf/nan (no division by cumulative products)."""
    a = torch.full((1, 200, 3), 1e-6)
    b = torch.ones(1, 200, 3)
    for method in ("sequential", "doubling"):
        out = linear_scan(a, b, torch.zeros(1, 3), method=method)
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out, linear_scan_reference(a, b, torch.zeros(1, 3)))


@pytest.mark.parametrize("length", [7, 2])  # longer and shorter than the window of N + 1 = 4
@pytest.mark.parametrize("kind", ["scalar", "vector"])
def test_memory_block_equals_eq5_loop_and_step(kind, length):
    torch.manual_seed(1)
    block = MemoryBlock(4, order=3, kind=kind).double()
    nn.init.normal_(block.taps)
    h = torch.randn(2, length, 4, dtype=torch.double, requires_grad=True)
    upstream = torch.randn(2, length, 4, dtype=torch.double)
    full = block(h)
    reference = block.reference(h)
    torch.testing.assert_close(full, reference)
    fast_grads = torch.autograd.grad(full, (h, block.taps), upstream)
    reference_grads = torch.autograd.grad(reference, (h, block.taps), upstream)
    for fast, slow in zip(fast_grads, reference_grads):
        torch.testing.assert_close(fast, slow)
    buffer = block.initial_buffer(2, h)
    for t in range(length):
        m_t, buffer = block.step(h[:, t], buffer)
        torch.testing.assert_close(m_t, full[:, t])


# --- weight matrices and parameter counts (hand computation, ATR paper Table 1) ------


def unit_params(variant: str, D: int, H: int) -> int:
    """Parameters of one unidirectional unit, written out by hand from the equations."""
    if variant == "lstm":  # 4 gates x (W: H x D, U: H x H, b_ih, b_hh)
        return 4 * (H * D + H * H + 2 * H)
    if variant == "gru":  # 3 gates x (W, U, b_ih, b_hh)
        return 3 * (H * D + H * H + 2 * H)
    if variant == "rnn":
        return H * D + H * H + 2 * H
    if variant == "ran":  # D == H: i, f gates (W, U, 2 biases); content is x_t
        return 2 * (H * D + H * H + 2 * H)
    if variant == "atr":  # W_x (no bias), W_h + b
        return H * D + H * H + H
    if variant == "sru":  # D == H: W, W_f, W_r with biases; highway is x_t
        return 3 * (H * D + H)
    raise ValueError(variant)


@pytest.mark.parametrize("variant,matrices", [("lstm", 8), ("gru", 6), ("ran", 4), ("atr", 2), ("rnn", 2), ("sru", 3)])
def test_weight_matrices_and_parameters_by_hand(variant, matrices):
    D = H = 6
    cell = make_cell(load_config(None, [f"model.cell={variant}"]).model, D, H, 1)
    assert cell.weight_matrices == matrices
    assert sum(p.numel() for p in cell.parameters()) == unit_params(variant, D, H)


def test_variant_matrix_counts():
    assert make_cell(cell_config("atr-independent-tanh"), 4, 4).weight_matrices == 4
    assert make_cell(cell_config("atr-coupled"), 4, 4).weight_matrices == 2
    assert make_cell(cell_config("ran"), 5, 4).weight_matrices == 5  # content projection W_c when D != H
    assert make_cell(cell_config("sru"), 5, 4).weight_matrices == 4  # highway projection when D != H
    srnmt = make_cell(cell_config("srnmt"), 8, 8)
    assert srnmt.weight_matrices == 3
    # W in R^{d x (4 d/2 + d)} + bias, one LN over 3d, no highway projection when D == d
    assert sum(p.numel() for p in srnmt.parameters()) == 8 * 24 + 24 + 2 * 24
    # "- highway" removes z from W: W in R^{d x 4 d/2}, LN over 2d
    plain = make_cell(cell_config("srnmt-no-ln-no-highway"), 8, 8)
    assert plain.weight_matrices == 2 and sum(p.numel() for p in plain.parameters()) == 8 * 16 + 16
    layer_norm_only = make_cell(load_config(None, ["model.cell=srnmt", "model.highway=false"]).model, 8, 8)
    assert sum(p.numel() for p in layer_norm_only.parameters()) == 8 * 16 + 16 + 2 * 16


@pytest.mark.parametrize("variant,identity_chunk", [("sru", 3), ("ran", 2)])
def test_identity_paths_read_the_clean_input(variant, identity_chunk):
    """Dropout goes before parameter matrices only: the appended identity chunk is ``skip``."""
    cell = build(variant, 4, 4, 1)
    x = torch.randn(2, 3, 4, dtype=torch.double)
    dropped = torch.nn.functional.dropout(x, 0.5, training=True)
    u = cell.project(dropped, skip=x)
    torch.testing.assert_close(u[..., identity_chunk * 4:(identity_chunk + 1) * 4], x)
    torch.testing.assert_close(u[..., :identity_chunk * 4], cell.project(dropped)[..., :identity_chunk * 4])


def test_srnmt_highway_reads_the_clean_input():
    cell = build("srnmt", 8, 4, 2)  # d = 8 = input size: the highway is x itself
    x = torch.randn(2, 3, 8, dtype=torch.double)
    u = cell.project(torch.zeros_like(x), skip=x)
    torch.testing.assert_close(u[..., 24:], x)
