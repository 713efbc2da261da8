"""ATR's recurrence over a whole sequence with a hand-written backward (a class (c) cell: one
matrix product on h per step, which no scan can remove).

The input term q_t = W_x x_t is computed for all steps beforehand (``ATRCell.project``); the
step loop then does one GEMM and the gate arithmetic, in place into preallocated outputs, with
no autograd graph. Per step (``s`` = +1 for the released code's f = σ(q - p), -1 for the
printed σ(p - q))::

    p_t = W_h h_{t-1} + b
    i_t = σ(q_t + p_t),   f_t = σ(s (q_t - p_t))     (coupled: f_t = 1 - i_t;
                                                      independent: q, p split into [i; f] halves)
    h_t = i_t * g(q_t) + f_t * h_{t-1}               (g = identity, or tanh)

The backward pass runs the steps in reverse with the chain rule written out (dσ(a) = σ(1 - σ))::

    dh~  = dh_t (+ the output's gradient at t)
    dq_t = dh~ i_t g'(q_t) + di σ'_i + s df σ'_f,    di = dh~ g(q_t),  df = dh~ h_{t-1}
    dp_t = di σ'_i - s df σ'_f
    dh_{t-1} = dh~ f_t + dp_t W_h

and dW_h = Σ_t dp_tᵀ h_{t-1}, db = Σ_t dp_t as one GEMM over all steps at the end. Padded
positions keep the state (and pass its gradient through) and output zeros, as in every scan.
The same function as the cell's ``step`` loop under autograd (tests compare values and gradients).
``method="triton"`` (or ``NMT_KERNELS=triton`` for ``auto``: ``nmt.ops.kernels``) runs each step's
gate arithmetic as one fused Triton kernel instead (``nmt.ops.triton_steps``); ``auto`` is this
module's loop otherwise.
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.ops.kernels import choose_method


def atr_scan(q: Tensor, weight: Tensor, bias: Tensor, h0: Tensor, mask: Tensor, reverse: bool, gates: str,
             forget_sign: str, candidate: str, method: str = "auto") -> tuple[Tensor, Tensor]:
    """q (B, T, k*H) input terms, weight (k*H, H) = W_h, bias (k*H,), h0 (B, H), mask (B, T) ->
    outputs (B, T, H) and the last state (B, H); k = 2 for independent gates, else 1. ``method``:
    ``torch`` (this module's loop), ``triton`` (fused step kernels), ``auto`` (``nmt.ops.kernels``)."""
    sign = 1.0 if forget_sign == "input_minus_history" else -1.0
    if choose_method(method, q, "atr_scan") == "triton":
        # loaded on request only: triton is an optional dependency
        from nmt.ops.triton_steps import triton_atr_scan

        return triton_atr_scan(q, weight, bias, h0, mask, reverse, gates, sign, candidate == "tanh")
    return _ATRScan.apply(q, weight, bias, h0, mask, reverse, gates, sign, candidate == "tanh")


def _steps(length: int, reverse: bool) -> range:
    return range(length - 1, -1, -1) if reverse else range(length)


def _halves(x: Tensor, independent: bool) -> tuple[Tensor, Tensor]:
    if not independent:
        return x, x
    size = x.size(-1) // 2
    return x[..., :size], x[..., size:]


class _ATRScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, weight, bias, h0, mask, reverse, gates, sign, tanh_candidate):
        batch, length = q.shape[:2]
        size = h0.size(1)
        independent = gates == "independent"
        out = q.new_empty(batch, length, size)
        h_prev_all = q.new_empty(batch, length, size)
        gates_all = q.new_empty(batch, length, 2, size)  # [i_t; f_t] side by side: one sigmoid per step
        i_all, f_all = gates_all[:, :, 0], gates_all[:, :, 1]
        full = mask.all(dim=0).tolist()  # steps where no sequence is padded skip the select
        step_mask = mask.unsqueeze(-1)
        w_t = weight.t()
        h = h0
        for t in _steps(length, reverse):
            h_prev_all[:, t] = h
            p = torch.addmm(bias, h, w_t)
            q_i, q_f = _halves(q[:, t], independent)
            p_i, p_f = _halves(p, independent)
            i, f = i_all[:, t], f_all[:, t]
            torch.add(q_i, p_i, out=i)
            if gates == "coupled":
                i.sigmoid_()
                torch.sub(1.0, i, out=f)
            else:
                torch.sub(q_f, p_f, out=f) if sign > 0 else torch.sub(p_f, q_f, out=f)
                gates_all[:, t].sigmoid_()
            content = torch.tanh(q_i) if tanh_candidate else q_i
            h_new = torch.mul(i, content, out=out[:, t]).addcmul_(f, h)
            if full[t]:
                h = h_new
            else:
                m = step_mask[:, t]
                h = torch.where(m, h_new, h)
                h_new.mul_(m)
        ctx.save_for_backward(q, weight, mask, i_all, f_all, h_prev_all)
        ctx.options = (reverse, gates, sign, tanh_candidate)
        return out, h.clone()  # a tensor of its own, not a view into out

    @staticmethod
    def backward(ctx, grad_out, grad_last):
        q, weight, mask, i_all, f_all, h_prev_all = ctx.saved_tensors
        reverse, gates, sign, tanh_candidate = ctx.options
        batch, length, size = i_all.shape
        # dp_t and dq_t are dh~_t times coefficients known from the forward pass: computed for all
        # steps at once, so the loop itself is only the chain dh_{t-1} = dh~_t f_t + dp_t W_h.
        coef_p, coef_q = _coefficients(q, i_all, f_all, h_prev_all, gates, sign, tanh_candidate)
        split = gates == "independent"  # dp_t = [dh~ c_i; dh~ c_f]: one (B, 2, H) product
        d_tilde = torch.empty_like(grad_out)
        dp_all = q.new_empty(batch, length, weight.size(0))
        full = mask.all(dim=0).tolist()
        step_mask = mask.unsqueeze(-1)
        dh = grad_last
        for t in reversed(_steps(length, reverse)):
            passed = None
            if full[t]:
                dh_new = torch.add(grad_out[:, t], dh, out=d_tilde[:, t])
            else:
                m = step_mask[:, t]
                dh_new = torch.mul(grad_out[:, t] + dh, m, out=d_tilde[:, t])
                passed = dh * ~m
            if split:
                torch.mul(dh_new.unsqueeze(1), coef_p[:, t].view(batch, 2, size),
                          out=dp_all[:, t].view(batch, 2, size))
            else:
                torch.mul(dh_new, coef_p[:, t], out=dp_all[:, t])
            dh = torch.addmm(dh_new * f_all[:, t], dp_all[:, t], weight)
            if passed is not None:
                dh.add_(passed)
        if split:
            dq = (d_tilde.unsqueeze(2) * coef_q.view(batch, length, 2, size)).view_as(q)
        else:
            dq = d_tilde.mul_(coef_q)
        flat_dp = dp_all.reshape(-1, weight.size(0))
        grad_weight = flat_dp.t() @ h_prev_all.reshape(-1, size)
        grad_bias = flat_dp.sum(dim=0)
        return dq, grad_weight, grad_bias, dh, None, None, None, None, None


def _coefficients(q: Tensor, i: Tensor, f: Tensor, h_prev: Tensor, gates: str, sign: float,
                  tanh_candidate: bool) -> tuple[Tensor, Tensor]:
    """(c_p, c_q) with dp_t = dh~_t c_p and dq_t = dh~_t c_q, for every step (B, T, k*H)."""
    q_i, _ = _halves(q, gates == "independent")
    content = torch.tanh(q_i) if tanh_candidate else q_i
    through_content = i * (1 - content * content) if tanh_candidate else i  # ∂h/∂q via g(q)
    through_i = content * i * (1 - i)  # ∂h/∂a_i
    if gates == "coupled":  # f = 1 - i: h = i g(q) + (1 - i) h_prev
        coef_p = (content - h_prev) * i * (1 - i)
        return coef_p, through_content + coef_p
    through_f = h_prev * f * (1 - f) * sign  # ∂h/∂q through f = σ(s (q - p)); ∂h/∂p is its negative
    if gates == "independent":
        return torch.cat([through_i, -through_f], dim=-1), torch.cat([through_content + through_i, through_f], dim=-1)
    return through_i - through_f, through_content + through_i + through_f
