"""The element-wise recurrences as one Triton kernel forward and one backward each (``method="triton"``,
or ``NMT_KERNELS=triton``: ``nmt.ops.kernels``): the linear recurrence c_t = a_t * c_{t-1} + b_t of
``linear_scan`` (SR-NMT, SRU v1, minGRU, minLSTM) and SRU v2's memory (``sru_v2_memory``).

Each program holds one sequence's block of hidden units and walks the whole sequence, as SRU's own
CUDA kernel does: one launch, T dependent fused multiply-adds per unit, nothing written but the
states (no log2(T) passes over the whole tensor as in the doubling scan). The backward kernel is
the reverse recurrence in one walk from the last step to the first, with the weight gradients
written on the way. ``reverse`` walks from t = T down to 1 in both kernels, without flipped copies.
Padding is the callers' identity elements (a = 1, b = 0), as for every ``linear_scan``; SRU v2's
kernels take the mask and carry the memory through padded steps themselves.
"""

from __future__ import annotations

import torch
from torch import Tensor

# before triton: triton_common sets TRITON_INTERPRET where no CUDA device is present
from nmt.ops.triton_common import check_inputs, grid, sigmoid, tl, triton


@triton.jit
def _time(step, length, REVERSE: tl.constexpr):
    """The time index of the scan's step number ``step`` (0 first): t = step, or T - 1 - step when
    the scan runs from t = T down."""
    t = step
    if REVERSE:
        t = length - 1 - step
    return t


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
        at = start + _time(step, length, REVERSE) * size
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
        t = _time(position, length, REVERSE)
        before = _time(tl.maximum(position - 1, 0), length, REVERSE)  # the step before t (clamped at the first)
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


@triton.jit
def _sru_v2_forward(u_ptr, x_ptr, v_ptr, c0_ptr, mask_ptr, c_ptr, length, size, REVERSE: tl.constexpr,
                    BLOCK: tl.constexpr):
    """SRU v2's memory, f_t = σ(u_t + v c_{t-1}), c_t = f_t c_{t-1} + (1 - f_t) x~_t, for t = 1..T
    from c0 (REVERSE: t = T..1); where m_t = 0 (padding) c_t = c_{t-1}. u, x~, c: (B, T, H), v: (H,),
    c0: (B, H), mask: (B, T) as uint8, contiguous; programs as in ``_linear_scan_forward``."""
    row = tl.program_id(0).to(tl.int64)
    units = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    keep = units < size
    v = tl.load(v_ptr + units, mask=keep, other=0.0)
    c = tl.load(c0_ptr + row * size + units, mask=keep, other=0.0)
    start = row * length * size + units
    for step in range(length):
        t = _time(step, length, REVERSE)
        at = start + t * size
        x = tl.load(x_ptr + at, mask=keep, other=0.0)
        f = sigmoid(tl.load(u_ptr + at, mask=keep, other=0.0) + v * c)
        c = tl.where(tl.load(mask_ptr + row * length + t) != 0, x + f * (c - x), c)
        tl.store(c_ptr + at, c, mask=keep)


@triton.jit
def _sru_v2_backward(u_ptr, x_ptr, v_ptr, c0_ptr, mask_ptr, c_ptr, g_ptr, grad_u_ptr, grad_x_ptr, grad_v_ptr,
                     grad_c0_ptr, length, size, REVERSE: tl.constexpr, BLOCK: tl.constexpr):
    """The gradients of ``_sru_v2_forward`` given g_t = ∂L/∂c_t, in one walk from the scan's last
    step to its first (f_t recomputed from u_t + v c_{t-1}; σ'_t = f_t (1 - f_t)): the adjoint
    dc_t = g_t + a_{t+1} dc_{t+1} with a_t = ∂c_t/∂c_{t-1} = f_t + (c_{t-1} - x~_t) σ'_t v (1 where
    padded), and du_t = m_t dc_t (c_{t-1} - x~_t) σ'_t, dx~_t = m_t dc_t (1 - f_t), grad_c0 = a_1 dc_1;
    grad_v (B, H) holds each sequence's Σ_t du_t c_{t-1}, summed over the batch by the caller."""
    row = tl.program_id(0).to(tl.int64)
    units = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    keep = units < size
    v = tl.load(v_ptr + units, mask=keep, other=0.0)
    c0 = tl.load(c0_ptr + row * size + units, mask=keep, other=0.0)
    carry = c0 * 0.0  # a_{t+1} dc_{t+1}
    grad_v = c0 * 0.0
    start = row * length * size + units
    for step in range(length):
        position = length - 1 - step
        t = _time(position, length, REVERSE)
        before = _time(tl.maximum(position - 1, 0), length, REVERSE)
        at = start + t * size
        real = tl.load(mask_ptr + row * length + t) != 0
        c_prev = tl.where(position > 0, tl.load(c_ptr + start + before * size, mask=keep, other=0.0), c0)
        x = tl.load(x_ptr + at, mask=keep, other=0.0)
        f = sigmoid(tl.load(u_ptr + at, mask=keep, other=0.0) + v * c_prev)
        dc = tl.load(g_ptr + at, mask=keep, other=0.0) + carry
        through_f = tl.where(real, (c_prev - x) * f * (1.0 - f), 0.0)
        grad_u = dc * through_f
        tl.store(grad_u_ptr + at, grad_u, mask=keep)
        tl.store(grad_x_ptr + at, tl.where(real, dc * (1.0 - f), 0.0), mask=keep)
        grad_v += grad_u * c_prev
        carry = tl.where(real, f + through_f * v, 1.0) * dc
    tl.store(grad_c0_ptr + row * size + units, carry, mask=keep)
    tl.store(grad_v_ptr + row * size + units, grad_v, mask=keep)


def triton_sru_v2_memory(u: Tensor, x_tilde: Tensor, v: Tensor, c0: Tensor, mask: Tensor, reverse: bool = False) -> Tensor:
    """``sru_v2_memory``'s contract: u, x_tilde (B, T, H), v (H,), c0 (B, H), mask (B, T) -> every c_t."""
    check_inputs(u, x_tilde, v, c0)
    return _TritonSRUv2Memory.apply(u, x_tilde, v, c0, mask, reverse)


class _TritonSRUv2Memory(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, x_tilde, v, c0, mask, reverse):
        u, x_tilde, v, c0 = (x.contiguous() for x in (u, x_tilde, v, c0))
        mask = mask.to(torch.uint8).contiguous()
        batch, length, size = u.shape
        c = torch.empty_like(u)
        if length:
            launch, block = grid(batch, size)
            _sru_v2_forward[launch](u, x_tilde, v, c0, mask, c, length, size, REVERSE=reverse, BLOCK=block)
        ctx.reverse = reverse
        ctx.save_for_backward(u, x_tilde, v, c0, mask, c)
        return c

    @staticmethod
    def backward(ctx, grad_c):
        u, x_tilde, v, c0, mask, c = ctx.saved_tensors
        batch, length, size = c.shape
        grad_u, grad_x = torch.empty_like(u), torch.empty_like(u)
        grad_v, grad_c0 = torch.zeros_like(c0), torch.zeros_like(c0)  # what they stay without steps
        if length:
            launch, block = grid(batch, size)
            _sru_v2_backward[launch](u, x_tilde, v, c0, mask, c, grad_c.contiguous(), grad_u, grad_x, grad_v, grad_c0,
                                     length, size, REVERSE=ctx.reverse, BLOCK=block)
        return grad_u, grad_x, grad_v.sum(dim=0), grad_c0, None, None
