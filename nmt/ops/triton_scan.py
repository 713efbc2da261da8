"""The linear recurrence c_t = a_t * c_{t-1} + b_t as one Triton kernel forward and one backward
(``linear_scan(..., method="triton")``, or ``NMT_KERNELS=triton``: ``nmt.ops.kernels``).

Each program holds one sequence's block of hidden units and walks the whole sequence, as SRU's own
CUDA kernel does: one launch, T dependent fused multiply-adds per unit, nothing written but the
states (no log2(T) passes over the whole tensor as in the doubling scan). The backward kernel is
the reverse recurrence in one walk from the last step to the first, with the weight gradients
written on the way. ``reverse`` walks from t = T down to 1 in both kernels, without flipped copies.
Padding is the callers' identity elements (a = 1, b = 0), as for every ``linear_scan``.
"""

from __future__ import annotations

import torch
from torch import Tensor

# before triton: triton_common sets TRITON_INTERPRET where no CUDA device is present
from nmt.ops.triton_common import check_inputs, grid, tl, triton


@triton.jit
def _linear_scan_forward(a_ptr, b_ptr, c0_ptr, c_ptr, length, size, REVERSE: tl.constexpr, BLOCK: tl.constexpr):
    """c_t = a_t * c_{t-1} + b_t for t = 1..T from c_0 = c0 (REVERSE: t = T..1 from c_{T+1} = c0).
    a, b, c: (B, T, H) contiguous, c0: (B, H); program (n, j) computes sequence n's units
    j*BLOCK .. j*BLOCK + BLOCK - 1, stepping through time inside."""
    row = tl.program_id(0).to(tl.int64)
    units = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    keep = units < size
    c = tl.load(c0_ptr + row * size + units, mask=keep, other=0.0)
    start = row * length * size + units
    for step in range(length):
        if REVERSE:
            t = length - 1 - step
        else:
            t = step
        at = start + t * size
        c = tl.load(a_ptr + at, mask=keep, other=0.0) * c + tl.load(b_ptr + at, mask=keep, other=0.0)
        tl.store(c_ptr + at, c, mask=keep)


@triton.jit
def _linear_scan_backward(a_ptr, c0_ptr, c_ptr, g_ptr, grad_a_ptr, grad_b_ptr, grad_c0_ptr, length, size,
                          REVERSE: tl.constexpr, BLOCK: tl.constexpr):
    """The gradients of c_t = a_t * c_{t-1} + b_t given g_t = ∂L/∂c_t, steps counted in the scan's
    own order (REVERSE: from t = T down): the adjoint dc_t = g_t + a_{t+1} dc_{t+1} runs from the
    last step to the first, and on the way grad_b_t = dc_t, grad_a_t = dc_t * c_{t-1} (c0 before
    the first step); then grad_c0 = a_1 * dc_1. Same layout and programs as the forward kernel."""
    row = tl.program_id(0).to(tl.int64)
    units = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    keep = units < size
    c0 = tl.load(c0_ptr + row * size + units, mask=keep, other=0.0)
    carry = c0 * 0.0  # a_{t+1} dc_{t+1}: what reaches c_t from the later steps
    start = row * length * size + units
    for step in range(length):
        position = length - 1 - step  # the scan's steps, last first
        if REVERSE:
            t = length - 1 - position
            before = tl.minimum(t + 1, length - 1)  # the step the scan took before t (clamped at its first)
        else:
            t = position
            before = tl.maximum(t - 1, 0)
        at = start + t * size
        dc = tl.load(g_ptr + at, mask=keep, other=0.0) + carry
        c_prev = tl.where(position > 0, tl.load(c_ptr + start + before * size, mask=keep, other=0.0), c0)
        tl.store(grad_b_ptr + at, dc, mask=keep)
        tl.store(grad_a_ptr + at, dc * c_prev, mask=keep)
        carry = tl.load(a_ptr + at, mask=keep, other=0.0) * dc
    tl.store(grad_c0_ptr + row * size + units, carry, mask=keep)


def triton_linear_scan(a: Tensor, b: Tensor, c0: Tensor, reverse: bool = False) -> Tensor:
    """All states c_1..c_T of c_t = a_t * c_{t-1} + b_t (``linear_scan``'s contract): a, b (B, T, H),
    c0 (B, H), float32 or float64 on one device."""
    check_inputs(a, b, c0)
    return _TritonLinearScan.apply(a, b, c0, reverse)


class _TritonLinearScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, c0, reverse):
        a, b, c0 = a.contiguous(), b.contiguous(), c0.contiguous()
        batch, length, size = b.shape
        c = torch.empty_like(b)
        if length:
            launch, block = grid(batch, size)
            _linear_scan_forward[launch](a, b, c0, c, length, size, REVERSE=reverse, BLOCK=block)
        ctx.reverse = reverse
        ctx.save_for_backward(a, c0, c)
        return c

    @staticmethod
    def backward(ctx, grad_c):
        a, c0, c = ctx.saved_tensors
        batch, length, size = c.shape
        grad_a, grad_b = torch.empty_like(a), torch.empty_like(a)
        grad_c0 = torch.zeros_like(c0)  # what it stays without steps
        if length:
            launch, block = grid(batch, size)
            _linear_scan_backward[launch](a, c0, c, grad_c.contiguous(), grad_a, grad_b, grad_c0, length, size,
                                          REVERSE=ctx.reverse, BLOCK=block)
        return grad_a, grad_b, grad_c0, None
