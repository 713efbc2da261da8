"""The Triton kernels (issue 67) against the torch paths and the cells' reference loops: values and
gradients, float64 and float32, padding, reverse and bidirectional cells. Without a CUDA device the
kernels run in Triton's interpreter on CPU tensors (``nmt.ops.triton_common`` sets
``TRITON_INTERPRET=1`` before it defines them; ``triton.jit`` reads it there, so importing triton
first, as ``importorskip`` does, changes nothing); with one, on CUDA tensors. Shapes are tiny: the
interpreter runs every program in numpy.

Modules covered here: ``nmt.ops.triton_scan`` and ``nmt.ops.triton_steps``."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="the Triton kernels are an optional extra: pip install -e '.[triton]'")

import triton.language as tl  # noqa: E402  (after the skip: triton is optional)
from test_cells import CELL_VARIANTS, build, padded_batch  # noqa: E402

import nmt.ops.triton_common as triton_common  # noqa: E402
import nmt.ops.triton_scan as triton_scan  # noqa: E402
import nmt.ops.triton_steps as triton_steps  # noqa: E402
from nmt.errors import UserError  # noqa: E402
from nmt.ops.atr_scan import atr_scan  # noqa: E402
from nmt.ops.kernels import KERNELS_ENV, triton_runs_on  # noqa: E402
from nmt.ops.linear_scan import linear_scan, linear_scan_reference, masked_linear_scan  # noqa: E402
from nmt.ops.ran_scan import ran_scan  # noqa: E402
from nmt.ops.sru_v2_scan import sru_v2_memory  # noqa: E402

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# float64 to rounding; float32 within its own tolerance (torch's defaults for float32)
TOLERANCE = {torch.float64: {"rtol": 1e-12, "atol": 1e-12}, torch.float32: {"rtol": 1.3e-6, "atol": 1e-5}}


def grads(outputs, inputs, weights):
    return torch.autograd.grad(sum((o * w).sum() for o, w in zip(outputs, weights)), inputs)


def assert_same(outputs, expected, inputs, dtype):
    """Values, and gradients of a random weighting of every output, agree."""
    for o, e in zip(outputs, expected):
        torch.testing.assert_close(o, e, **TOLERANCE[dtype])
    weights = [torch.randn_like(o) for o in outputs]
    for g, r in zip(grads(outputs, inputs, weights), grads(expected, inputs, weights)):
        torch.testing.assert_close(g, r, **TOLERANCE[dtype])


def spy(monkeypatch, module, name) -> list:
    """Count the calls of ``module.name`` (the kernels' entry points, looked up when called)."""
    calls = []
    function = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *args: calls.append(1) or function(*args))
    return calls


def test_the_kernels_run_where_expected():
    """Compiled on a GPU machine; interpreted on CPU tensors without one (else the CPU tests would
    fail to launch: compiled kernels refuse CPU pointers)."""
    interpreted = type(triton_scan._linear_scan_forward).__name__ == "InterpretedFunction"
    assert interpreted == (not torch.cuda.is_available())
    assert triton_runs_on(torch.zeros(1, device=DEVICE, dtype=torch.float64))
    assert not triton_runs_on(torch.zeros(1, device=DEVICE, dtype=torch.float16))


@triton_common.triton.jit
def _apply_tanh(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = at < n
    tl.store(y_ptr + at, triton_common.tanh(tl.load(x_ptr + at, mask=keep, other=0.0)), mask=keep)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_tanh_is_within_a_few_ulps(dtype):
    """The kernels' own tanh, on both sides of its switch from the series (|x| < 0.04) to exp."""
    x = torch.tensor([0.0, 1e-30, 1e-8, 1e-3, 0.0399, 0.0401, 0.3, 1.0, 5.0, 20.0, 400.0, float("inf")], dtype=dtype)
    x = torch.cat([x, -x]).to(DEVICE)
    y = torch.empty_like(x)
    _apply_tanh[(triton_common.triton.cdiv(x.numel(), 16),)](x, y, x.numel(), BLOCK=16)
    ulp = torch.finfo(dtype).eps
    torch.testing.assert_close(y, torch.tanh(x), rtol=8 * ulp, atol=0.0)


def scan_inputs(shape, dtype, noncontiguous=False):
    batch, length, size = shape
    torch.manual_seed(sum(shape))
    a = torch.rand(batch, length, size, dtype=dtype, device=DEVICE)
    b = torch.randn(batch, length, size, dtype=dtype, device=DEVICE)
    if noncontiguous:  # a view with the time axis outermost, as a transposed caller would pass
        a, b = (x.transpose(0, 1).contiguous().transpose(0, 1) for x in (a, b))
    c0 = torch.randn(batch, size, dtype=dtype, device=DEVICE)
    return [x.requires_grad_() for x in (a, b, c0)]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape,max_block", [((3, 9, 4), 128), ((2, 5, 6), 4), ((2, 1, 3), 128)],
                         ids=["one-block", "two-blocks-last-partial", "one-step"])
def test_linear_scan_kernel_equals_the_reference(monkeypatch, dtype, reverse, shape, max_block):
    monkeypatch.setattr(triton_common, "MAX_BLOCK", max_block)
    a, b, c0 = scan_inputs(shape, dtype, noncontiguous=shape[0] == 2)
    out = linear_scan(a, b, c0, reverse, method="triton")
    assert type(out.grad_fn).__name__ == "_TritonLinearScanBackward"
    assert_same([out], [linear_scan_reference(a, b, c0, reverse)], (a, b, c0), dtype)


@pytest.mark.parametrize("reverse", [False, True])
def test_linear_scan_kernel_gradcheck(monkeypatch, reverse):
    monkeypatch.setattr(triton_common, "MAX_BLOCK", 2)  # two programs per row
    inputs = scan_inputs((2, 4, 3), torch.float64)
    assert torch.autograd.gradcheck(lambda a, b, c0: linear_scan(a, b, c0, reverse, method="triton"), inputs,
                                    fast_mode=True)


def test_masked_linear_scan_with_padding_under_the_switch(monkeypatch):
    """Padding is the callers' identity elements: the masked scan, right to left, on the kernel."""
    a, b, c0 = scan_inputs((3, 7, 4), torch.float64)
    mask = (torch.arange(7)[None, :] < torch.tensor([7, 3, 1])[:, None]).to(DEVICE)
    expected = masked_linear_scan(a, b, mask, c0, reverse=True)
    calls = spy(monkeypatch, triton_scan, "triton_linear_scan")
    monkeypatch.setenv(KERNELS_ENV, "triton")
    out = masked_linear_scan(a, b, mask, c0, reverse=True)
    assert calls == [1]
    assert_same(list(out), list(expected), (a, b, c0), torch.float64)


def test_the_switch_is_opt_in(monkeypatch):
    a, b, c0 = scan_inputs((2, 3, 2), torch.float64)
    monkeypatch.delenv(KERNELS_ENV, raising=False)
    assert type(linear_scan(a, b, c0).grad_fn).__name__ == "_LinearScanBackward"  # the default: the torch scans
    monkeypatch.setenv(KERNELS_ENV, "torch")
    assert type(linear_scan(a, b, c0).grad_fn).__name__ == "_LinearScanBackward"
    monkeypatch.setenv(KERNELS_ENV, "triton")
    assert type(linear_scan(a, b, c0).grad_fn).__name__ == "_TritonLinearScanBackward"
    monkeypatch.setenv(KERNELS_ENV, "cuda")
    with pytest.raises(UserError, match="NMT_KERNELS='cuda' is not a kernel choice"):
        linear_scan(a, b, c0)
    with pytest.raises(ValueError, match="float32 or float64"):
        linear_scan(a.half(), b.half(), c0.half(), method="triton")


def padding_mask(batch, length):
    lengths = torch.tensor([length] + [max(1, length - 2 * i - 1) for i in range(1, batch)])
    return (torch.arange(length)[None, :] < lengths[:, None]).to(DEVICE)


def atr_inputs(gates, dtype, batch=3, length=6, size=5):
    torch.manual_seed(len(gates) + length)
    k = 2 if gates == "independent" else 1
    q = torch.randn(batch, length, k * size, dtype=dtype, device=DEVICE)
    weight = torch.randn(k * size, size, dtype=dtype, device=DEVICE) * 0.5
    bias = torch.randn(k * size, dtype=dtype, device=DEVICE)
    h0 = torch.randn(batch, size, dtype=dtype, device=DEVICE)
    return [x.requires_grad_() for x in (q, weight, bias, h0)]


ATR_OPTIONS = [(gates, sign, candidate) for gates in ("twin", "coupled", "independent")
               for sign in ("input_minus_history", "history_minus_input") for candidate in ("linear", "tanh")]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("gates,sign,candidate", ATR_OPTIONS)
def test_atr_step_kernels_equal_the_torch_scan(gates, sign, candidate, reverse):
    inputs = atr_inputs(gates, torch.float64)
    mask = padding_mask(3, 6)
    out = atr_scan(*inputs, mask, reverse, gates, sign, candidate, method="triton")
    assert type(out[0].grad_fn).__name__ == "_TritonATRScanBackward"
    expected = atr_scan(*inputs, mask, reverse, gates, sign, candidate, method="torch")
    assert_same(list(out), list(expected), inputs, torch.float64)


@pytest.mark.parametrize("gates,sign,candidate", [("twin", "input_minus_history", "linear"),
                                                  ("coupled", "history_minus_input", "tanh"),
                                                  ("independent", "history_minus_input", "tanh")])
def test_atr_step_kernels_in_float32_and_gradcheck(monkeypatch, gates, sign, candidate):
    monkeypatch.setattr(triton_common, "MAX_BLOCK", 4)  # H = 5: a full and a partial block
    mask = padding_mask(3, 6)
    inputs = atr_inputs(gates, torch.float32)
    out = atr_scan(*inputs, mask, True, gates, sign, candidate, method="triton")
    assert_same(list(out), list(atr_scan(*inputs, mask, True, gates, sign, candidate, method="torch")), inputs,
                torch.float32)
    small = atr_inputs(gates, torch.float64, batch=2, length=3, size=5)
    assert torch.autograd.gradcheck(
        lambda *x: atr_scan(*x, padding_mask(2, 3), False, gates, sign, candidate, method="triton"), small,
        fast_mode=True)


def ran_inputs(dtype, batch=3, length=6, size=5):
    torch.manual_seed(length + size)
    u = torch.randn(batch, length, 3 * size, dtype=dtype, device=DEVICE)
    weight = torch.randn(2 * size, size, dtype=dtype, device=DEVICE) * 0.5
    bias = torch.randn(2 * size, dtype=dtype, device=DEVICE)
    h0, c0 = (torch.randn(batch, size, dtype=dtype, device=DEVICE) for _ in range(2))
    return [x.requires_grad_() for x in (u, weight, bias, h0, c0)]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("tanh_output", [True, False])
def test_ran_step_kernels_equal_the_torch_scan(monkeypatch, dtype, reverse, tanh_output):
    if dtype == torch.float32:
        monkeypatch.setattr(triton_common, "MAX_BLOCK", 4)
    inputs = ran_inputs(dtype)
    mask = padding_mask(3, 6)
    out = ran_scan(*inputs, mask, reverse, tanh_output, method="triton")
    assert type(out[0].grad_fn).__name__ == "_TritonRANScanBackward"
    assert_same(list(out), list(ran_scan(*inputs, mask, reverse, tanh_output, method="torch")), inputs, dtype)


@pytest.mark.parametrize("tanh_output", [True, False])
def test_ran_step_kernels_gradcheck(tanh_output):
    inputs = ran_inputs(torch.float64, batch=2, length=3, size=3)
    assert torch.autograd.gradcheck(
        lambda *x: ran_scan(*x, padding_mask(2, 3), True, tanh_output, method="triton"), inputs, fast_mode=True)


def sru_v2_inputs(dtype, batch=3, length=6, size=5):
    torch.manual_seed(length * size)
    u, x_tilde = (torch.randn(batch, length, size, dtype=dtype, device=DEVICE) for _ in range(2))
    v = torch.randn(size, dtype=dtype, device=DEVICE)
    c0 = torch.randn(batch, size, dtype=dtype, device=DEVICE)
    return [x.requires_grad_() for x in (u, x_tilde, v, c0)]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("reverse", [False, True])
def test_sru_v2_kernels_equal_the_torch_loop(monkeypatch, dtype, reverse):
    monkeypatch.setattr(triton_common, "MAX_BLOCK", 4)  # H = 5: a full and a partial block
    inputs = sru_v2_inputs(dtype)
    mask = padding_mask(3, 6)
    out = sru_v2_memory(*inputs, mask, reverse, method="triton")
    assert type(out.grad_fn).__name__ == "_TritonSRUv2MemoryBackward"
    assert_same([out], [sru_v2_memory(*inputs, mask, reverse, method="torch")], inputs, dtype)


@pytest.mark.parametrize("reverse", [False, True])
def test_sru_v2_kernels_gradcheck(reverse):
    inputs = sru_v2_inputs(torch.float64, batch=2, length=4, size=3)
    assert torch.autograd.gradcheck(lambda *x: sru_v2_memory(*x, padding_mask(2, 4), reverse, method="triton"), inputs,
                                    fast_mode=True)


# every variant of a unit whose scan runs on a kernel under the switch
KERNEL_VARIANTS = [v for v in CELL_VARIANTS if v.split("-")[0] in ("srnmt", "sru", "mingru", "minlstm", "atr", "ran")]
KERNEL_OF = {"atr": (triton_steps, "triton_atr_scan"), "ran": (triton_steps, "triton_ran_scan"),
             "sru-v2": (triton_scan, "triton_sru_v2_memory")}


@pytest.mark.parametrize("variant", KERNEL_VARIANTS)
def test_cells_under_the_switch_equal_their_reference_loops(monkeypatch, variant):
    """Bidirectional (the second direction runs right to left), padded, input size = hidden size
    (RAN's and SRU's appended x): values, final states and every gradient against the reference loop."""
    kernel = KERNEL_OF.get(variant) or KERNEL_OF.get(variant.split("-")[0]) or (triton_scan, "triton_linear_scan")
    calls = spy(monkeypatch, *kernel)
    monkeypatch.setenv(KERNELS_ENV, "triton")
    cell = build(variant, 4, 4, 2).to(DEVICE)
    x, mask = padded_batch(3, 6, 4)
    x, mask = x.detach().to(DEVICE).requires_grad_(), mask.to(DEVICE)
    out, finals = cell(x, mask)
    assert len(calls) == 2  # one scan per direction
    ref, ref_finals = cell.reference(x, mask)
    flat, ref_flat = [out, *sum(map(list, finals), [])], [ref, *sum(map(list, ref_finals), [])]
    assert_same(flat, ref_flat, [x, *cell.parameters()], torch.float64)
