"""ATR's and RAN's step loops with each step's element-wise work in one Triton kernel
(``atr_scan``/``ran_scan`` with ``method="triton"``, or ``NMT_KERNELS=triton``: ``nmt.ops.kernels``).

A unit with a recurrent matrix cannot drop its loop over time: every step needs W_h h_{t-1}. What
a step costs besides that GEMM is the gate arithmetic, several small torch kernels a step in
``nmt.ops.atr_scan`` and ``nmt.ops.ran_scan``; here it is one kernel, forward and backward, so a
step is two launches (the GEMM in torch, then the fused kernel). The equations, the saved tensors
and the whole-sequence weight gradients at the end are those of the torch scans (their docstrings
derive them); each kernel's docstring says what it computes. Each program holds one sequence's
block of hidden units. Padded positions keep the state, pass its gradient through and output zeros.
"""

from __future__ import annotations

import torch
from torch import Tensor

# before triton: triton_common sets TRITON_INTERPRET where no CUDA device is present
from nmt.ops.triton_common import check_inputs, grid, sigmoid, tanh, tl, triton


# a step's time index changes every launch: one compiled kernel for all (not one for t = 1, one for t % 16 = 0, ...)
STEP = ["t"]


def _steps(length: int, reverse: bool) -> list[int]:
    return list(range(length - 1, -1, -1)) if reverse else list(range(length))


@triton.jit(do_not_specialize=STEP)
def _atr_forward_step(q_ptr, p_ptr, h_ptr, h_row, next_ptr, next_row, mask_ptr, gates_ptr, out_ptr, t, length, size,
                      COUPLED: tl.constexpr, INDEPENDENT: tl.constexpr, SIGN: tl.constexpr, TANH: tl.constexpr,
                      BLOCK: tl.constexpr):
    """One ATR step at time t, given p = W_h h_{t-1} + b ((B, kH), k = 2 with INDEPENDENT gates, whose
    q and p are [i; f] halves, else 1 and q_f = q_i = q, p_f = p_i = p)::

        i = σ(q_i + p_i),   f = 1 - i (COUPLED) or σ(SIGN (q_f - p_f)),   g = tanh(q_i) (TANH) or q_i
        h_t = i g + f h_{t-1};   out_t = m h_t;   next state = h_t where m, else h_{t-1}

    q (B, T, kH), gates (B, T, 2, H) = [i; f], out (B, T, H), mask (B, T) as uint8: contiguous;
    h_{t-1} and the next state are (B, H) rows h_row and next_row apart."""
    row = tl.program_id(0).to(tl.int64)
    units = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    keep = units < size
    width = 2 * size if INDEPENDENT else size
    q_at = q_ptr + (row * length + t) * width + units
    p_at = p_ptr + row * width + units
    q_i = tl.load(q_at, mask=keep, other=0.0)
    p_i = tl.load(p_at, mask=keep, other=0.0)
    h = tl.load(h_ptr + row * h_row + units, mask=keep, other=0.0)
    real = tl.load(mask_ptr + row * length + t) != 0
    i = sigmoid(q_i + p_i)
    if COUPLED:
        f = 1.0 - i
    elif INDEPENDENT:
        f = sigmoid(SIGN * (tl.load(q_at + size, mask=keep, other=0.0) - tl.load(p_at + size, mask=keep, other=0.0)))
    else:
        f = sigmoid(SIGN * (q_i - p_i))
    content = tanh(q_i) if TANH else q_i
    h_new = i * content + f * h
    gates_at = gates_ptr + (row * length + t) * 2 * size + units
    tl.store(gates_at, i, mask=keep)
    tl.store(gates_at + size, f, mask=keep)
    tl.store(out_ptr + (row * length + t) * size + units, tl.where(real, h_new, 0.0), mask=keep)
    tl.store(next_ptr + row * next_row + units, tl.where(real, h_new, h), mask=keep)


@triton.jit(do_not_specialize=STEP)
def _atr_backward_step(g_ptr, dh_ptr, mask_ptr, q_ptr, gates_ptr, h_prev_ptr, dq_ptr, dp_ptr, base_ptr, t, length,
                       size, COUPLED: tl.constexpr, INDEPENDENT: tl.constexpr, SIGN: tl.constexpr,
                       TANH: tl.constexpr, BLOCK: tl.constexpr):
    """The backward of ``_atr_forward_step`` at time t, given dh = ∂L/∂h_t from the later steps
    and g = ∂L/∂out_t (σ' = σ(1 - σ), g' = 1 - g² with TANH, else 1)::

        d = m (g + dh),   ∂h/∂a_i = g(q_i) i (1 - i),   ∂h/∂a_f = h_{t-1} f (1 - f) SIGN
        dp = d [∂h/∂a_i; -∂h/∂a_f] (INDEPENDENT) or d (∂h/∂a_i - ∂h/∂a_f)
             (COUPLED: d (g(q) - h_{t-1}) i (1 - i))
        dq = d [i g'(q_i) + ∂h/∂a_i; ∂h/∂a_f] or d (i g'(q) + ∂h/∂a_i + ∂h/∂a_f) (COUPLED: i g'(q) + dp/d)
        base = d f + (1 - m) dh,   so that ∂L/∂h_{t-1} = base + dp W_h (the caller's GEMM)

    dq and dp (B, T, kH) are written at t; dh and base are (B, H); the rest as in the forward."""
    row = tl.program_id(0).to(tl.int64)
    units = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    keep = units < size
    width = 2 * size if INDEPENDENT else size
    at = (row * length + t) * size + units
    wide_at = (row * length + t) * width + units
    gates_at = gates_ptr + (row * length + t) * 2 * size + units
    dh = tl.load(dh_ptr + row * size + units, mask=keep, other=0.0)
    real = tl.load(mask_ptr + row * length + t) != 0
    d = tl.where(real, tl.load(g_ptr + at, mask=keep, other=0.0) + dh, 0.0)
    i = tl.load(gates_at, mask=keep, other=0.0)
    f = tl.load(gates_at + size, mask=keep, other=0.0)
    h_prev = tl.load(h_prev_ptr + at, mask=keep, other=0.0)
    q_i = tl.load(q_ptr + wide_at, mask=keep, other=0.0)
    content = tanh(q_i) if TANH else q_i
    through_content = i * (1.0 - content * content) if TANH else i
    through_i = content * i * (1.0 - i)
    if COUPLED:
        coef_p = (content - h_prev) * i * (1.0 - i)
        tl.store(dp_ptr + wide_at, d * coef_p, mask=keep)
        tl.store(dq_ptr + wide_at, d * (through_content + coef_p), mask=keep)
    else:
        through_f = h_prev * f * (1.0 - f) * SIGN
        if INDEPENDENT:
            tl.store(dp_ptr + wide_at, d * through_i, mask=keep)
            tl.store(dp_ptr + wide_at + size, -(d * through_f), mask=keep)
            tl.store(dq_ptr + wide_at, d * (through_content + through_i), mask=keep)
            tl.store(dq_ptr + wide_at + size, d * through_f, mask=keep)
        else:
            tl.store(dp_ptr + wide_at, d * (through_i - through_f), mask=keep)
            tl.store(dq_ptr + wide_at, d * (through_content + through_i + through_f), mask=keep)
    tl.store(base_ptr + row * size + units, d * f + tl.where(real, 0.0, dh), mask=keep)


def triton_atr_scan(q: Tensor, weight: Tensor, bias: Tensor, h0: Tensor, mask: Tensor, reverse: bool, gates: str,
                    sign: float, tanh_candidate: bool) -> tuple[Tensor, Tensor]:
    """``atr_scan``'s contract (its arguments after the option strings are resolved): outputs
    (B, T, H) and the last state (B, H)."""
    check_inputs(q, weight, bias, h0)
    return _TritonATRScan.apply(q, weight, bias, h0, mask, reverse, gates, sign, tanh_candidate)


def _atr_options(gates: str, sign: float, tanh_candidate: bool, block: int) -> dict:
    return {"COUPLED": gates == "coupled", "INDEPENDENT": gates == "independent", "SIGN": sign,
            "TANH": tanh_candidate, "BLOCK": block}


class _TritonATRScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, weight, bias, h0, mask, reverse, gates, sign, tanh_candidate):
        q, mask = q.contiguous(), mask.to(torch.uint8).contiguous()
        batch, length = q.shape[:2]
        size = h0.size(1)
        out, h_prev_all = q.new_empty(batch, length, size), q.new_empty(batch, length, size)
        gates_all = q.new_empty(batch, length, 2, size)
        h_last = h0.clone(memory_format=torch.contiguous_format)  # what it stays without steps
        launch, block = grid(batch, size)
        options = _atr_options(gates, sign, tanh_candidate, block)
        steps = _steps(length, reverse)
        w_t = weight.t()
        if steps:
            h_prev_all[:, steps[0]] = h0
        for n, t in enumerate(steps):
            h = h_prev_all[:, t]
            p = torch.addmm(bias, h, w_t)
            after = h_prev_all[:, steps[n + 1]] if n + 1 < length else h_last
            _atr_forward_step[launch](q, p, h, h.stride(0), after, after.stride(0), mask, gates_all, out, t, length, size,
                                      **options)
        ctx.save_for_backward(q, weight, mask, gates_all, h_prev_all)
        ctx.options = (reverse, gates, sign, tanh_candidate)
        return out, h_last

    @staticmethod
    def backward(ctx, grad_out, grad_last):
        q, weight, mask, gates_all, h_prev_all = ctx.saved_tensors
        reverse, gates, sign, tanh_candidate = ctx.options
        batch, length, size = h_prev_all.shape
        grad_out = grad_out.contiguous()
        dq, dp_all = torch.empty_like(q), torch.empty_like(q)
        launch, block = grid(batch, size)
        options = _atr_options(gates, sign, tanh_candidate, block)
        dh = grad_last.contiguous()
        for t in reversed(_steps(length, reverse)):
            base = torch.empty_like(dh)
            _atr_backward_step[launch](grad_out, dh, mask, q, gates_all, h_prev_all, dq, dp_all, base, t, length, size,
                                       **options)
            dh = torch.addmm(base, dp_all[:, t], weight)
        flat_dp = dp_all.reshape(-1, weight.size(0))
        grad_weight = flat_dp.t() @ h_prev_all.reshape(-1, size)
        return dq, grad_weight, flat_dp.sum(dim=0), dh, None, None, None, None, None


@triton.jit(do_not_specialize=STEP)
def _ran_forward_step(u_ptr, pre_ptr, h_ptr, c_ptr, state_row, next_h_ptr, next_c_ptr, next_row, mask_ptr, gates_ptr,
                      out_ptr, t, length, size, TANH: tl.constexpr, BLOCK: tl.constexpr):
    """One RAN step at time t, given pre = U h_{t-1} + b (B, 2H) and u_t = [u_i; u_f; c~] (B, T, 3H)::

        i = σ(pre_i + u_i),   f = σ(pre_f + u_f),   c_t = i c~ + f c_{t-1},   h_t = tanh(c_t) (TANH) or c_t
        out_t = m h_t;   next state (h, c) = (h_t, c_t) where m, else (h_{t-1}, c_{t-1})

    gates (B, T, 2H) = [i; f], out (B, T, H), mask (B, T) as uint8: contiguous; the states (B, H)
    are rows state_row (read) and next_row (written) apart."""
    row = tl.program_id(0).to(tl.int64)
    units = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    keep = units < size
    u_at = u_ptr + (row * length + t) * 3 * size + units
    pre_at = pre_ptr + row * 2 * size + units
    i = sigmoid(tl.load(pre_at, mask=keep, other=0.0) + tl.load(u_at, mask=keep, other=0.0))
    f = sigmoid(tl.load(pre_at + size, mask=keep, other=0.0) + tl.load(u_at + size, mask=keep, other=0.0))
    h = tl.load(h_ptr + row * state_row + units, mask=keep, other=0.0)
    c = tl.load(c_ptr + row * state_row + units, mask=keep, other=0.0)
    real = tl.load(mask_ptr + row * length + t) != 0
    c_new = i * tl.load(u_at + 2 * size, mask=keep, other=0.0) + f * c
    h_new = tanh(c_new) if TANH else c_new
    gates_at = gates_ptr + (row * length + t) * 2 * size + units
    tl.store(gates_at, i, mask=keep)
    tl.store(gates_at + size, f, mask=keep)
    at = (row * length + t) * size + units
    tl.store(out_ptr + at, tl.where(real, h_new, 0.0), mask=keep)
    tl.store(next_h_ptr + row * next_row + units, tl.where(real, h_new, h), mask=keep)
    tl.store(next_c_ptr + row * next_row + units, tl.where(real, c_new, c), mask=keep)


@triton.jit(do_not_specialize=STEP)
def _ran_backward_step(g_ptr, dh_ptr, dc_ptr, mask_ptr, u_ptr, gates_ptr, c_prev_ptr, out_ptr, du_ptr, dp_ptr,
                       base_ptr, dc_next_ptr, t, length, size, TANH: tl.constexpr, BLOCK: tl.constexpr):
    """The backward of ``_ran_forward_step`` at time t, given dh = ∂L/∂h_t, dc = ∂L/∂c_t from the
    later steps and g = ∂L/∂out_t (σ' = σ(1 - σ); with TANH, tanh'(c_t) = 1 - h_t²)::

        d = m ((g + dh) tanh'(c_t) + dc)     (without TANH: m (g + dh + dc))
        dp = [d c~ i (1 - i); d c_{t-1} f (1 - f)],   du_t = [dp; d i]
        base = (1 - m) dh   (∂L/∂h_{t-1} = base + dp U: the caller's GEMM),   dc_next = d f + (1 - m) dc

    du (B, T, 3H) and dp (B, T, 2H) are written at t; dh, dc, base and dc_next are (B, H)."""
    row = tl.program_id(0).to(tl.int64)
    units = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    keep = units < size
    at = (row * length + t) * size + units
    gates_at = gates_ptr + (row * length + t) * 2 * size + units
    dh = tl.load(dh_ptr + row * size + units, mask=keep, other=0.0)
    dc = tl.load(dc_ptr + row * size + units, mask=keep, other=0.0)
    real = tl.load(mask_ptr + row * length + t) != 0
    through_h = tl.load(g_ptr + at, mask=keep, other=0.0) + dh
    if TANH:
        h = tl.load(out_ptr + at, mask=keep, other=0.0)
        through_h = through_h * (1.0 - h * h)
    d = tl.where(real, through_h + dc, 0.0)
    i = tl.load(gates_at, mask=keep, other=0.0)
    f = tl.load(gates_at + size, mask=keep, other=0.0)
    content = tl.load(u_ptr + (row * length + t) * 3 * size + 2 * size + units, mask=keep, other=0.0)
    c_prev = tl.load(c_prev_ptr + at, mask=keep, other=0.0)
    dp_i = d * (content * i * (1.0 - i))
    dp_f = d * (c_prev * f * (1.0 - f))
    dp_at = dp_ptr + (row * length + t) * 2 * size + units
    tl.store(dp_at, dp_i, mask=keep)
    tl.store(dp_at + size, dp_f, mask=keep)
    du_at = du_ptr + (row * length + t) * 3 * size + units
    tl.store(du_at, dp_i, mask=keep)
    tl.store(du_at + size, dp_f, mask=keep)
    tl.store(du_at + 2 * size, d * i, mask=keep)
    tl.store(base_ptr + row * size + units, tl.where(real, 0.0, dh), mask=keep)
    tl.store(dc_next_ptr + row * size + units, d * f + tl.where(real, 0.0, dc), mask=keep)


def triton_ran_scan(u: Tensor, weight: Tensor, bias: Tensor, h0: Tensor, c0: Tensor, mask: Tensor, reverse: bool,
                    tanh_output: bool) -> tuple[Tensor, Tensor, Tensor]:
    """``ran_scan``'s contract: outputs (B, T, H), the last h and the last c (B, H)."""
    check_inputs(u, weight, bias, h0, c0)
    return _TritonRANScan.apply(u, weight, bias, h0, c0, mask, reverse, tanh_output)


class _TritonRANScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, weight, bias, h0, c0, mask, reverse, tanh_output):
        u, mask = u.contiguous(), mask.to(torch.uint8).contiguous()
        batch, length = u.shape[:2]
        size = h0.size(1)
        out = u.new_empty(batch, length, size)
        gates_all = u.new_empty(batch, length, 2 * size)
        states = u.new_empty(2, batch, length, size)  # the state before each step, [h; c]
        # what they stay without steps
        h_last, c_last = (x.clone(memory_format=torch.contiguous_format) for x in (h0, c0))
        launch, block = grid(batch, size)
        steps = _steps(length, reverse)
        w_t = weight.t()
        if steps:
            states[0, :, steps[0]], states[1, :, steps[0]] = h0, c0
        for n, t in enumerate(steps):
            h, c = states[0, :, t], states[1, :, t]
            pre = torch.addmm(bias, h, w_t)
            after_h, after_c = (states[0, :, steps[n + 1]], states[1, :, steps[n + 1]]) if n + 1 < length else (h_last, c_last)
            _ran_forward_step[launch](u, pre, h, c, h.stride(0), after_h, after_c, after_h.stride(0), mask, gates_all, out,
                                      t, length, size, TANH=tanh_output, BLOCK=block)
        ctx.save_for_backward(u, weight, mask, gates_all, states, out)
        ctx.tanh_output, ctx.reverse = tanh_output, reverse
        return out, h_last, c_last

    @staticmethod
    def backward(ctx, grad_out, grad_h, grad_c):
        u, weight, mask, gates_all, states, out = ctx.saved_tensors
        batch, length, size = out.shape
        grad_out = grad_out.contiguous()
        du, dp_all = torch.empty_like(u), u.new_empty(batch, length, 2 * size)
        launch, block = grid(batch, size)
        dh, dc = grad_h.contiguous(), grad_c.contiguous()
        for t in reversed(_steps(length, ctx.reverse)):
            base, dc_next = torch.empty_like(dh), torch.empty_like(dc)
            _ran_backward_step[launch](grad_out, dh, dc, mask, u, gates_all, states[1], out, du, dp_all, base, dc_next, t,
                                       length, size, TANH=ctx.tanh_output, BLOCK=block)
            dh, dc = torch.addmm(base, dp_all[:, t], weight), dc_next
        flat_dp = dp_all.reshape(-1, 2 * size)
        grad_weight = flat_dp.t() @ states[0].reshape(-1, size)
        return du, grad_weight, flat_dp.sum(dim=0), dh, dc, None, None, None
