"""RAN's recurrence over a whole sequence with a hand-written backward (class (c), like
``atr_scan``). The input terms u_t = [W_ix x_t; W_fx x_t; c~_t] are computed for all steps
beforehand (``RANCell.project``); each step does one GEMM and the gate arithmetic, in place
into preallocated outputs, with no autograd graph::

    [a_i; a_f] = [u_i; u_f] + U h_{t-1} + b,   i_t = σ(a_i),  f_t = σ(a_f)
    c_t = i_t * c~_t + f_t * c_{t-1},          h_t = g(c_t)   (g = tanh, or identity)

Backward, in reverse (dσ(a) = σ(1 - σ)); dc~ collects what reaches c_t::

    dh~  = dh_t (+ the output's gradient at t),     dc~ = dh~ g'(c_t) + dc_t
    [da_i; da_f] = [dc~ c~_t σ'_i; dc~ c_{t-1} σ'_f] (= dp_t),   du_t = [dp_t; dc~ i_t]
    dh_{t-1} = dp_t U,    dc_{t-1} = dc~ f_t

The loop keeps only the chain through h and c; the coefficients and du come from whole-sequence
passes, and dU = Σ_t dp_tᵀ h_{t-1}, db = Σ_t dp_t is one GEMM at the end. Padded positions keep
the state (h and c) and output zeros. The same function as the cell's ``step`` loop under
autograd (tests compare values and gradients). ``method="triton"`` (or ``NMT_KERNELS=triton`` for
``auto``: ``nmt.ops.kernels``) runs each step's gate arithmetic as one fused Triton kernel instead
(``nmt.ops.triton_steps``); ``auto`` is this module's loop otherwise.
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.ops.kernels import choose_method


def ran_scan(u: Tensor, weight: Tensor, bias: Tensor, h0: Tensor, c0: Tensor, mask: Tensor, reverse: bool,
             tanh_output: bool, method: str = "auto") -> tuple[Tensor, Tensor, Tensor]:
    """u (B, T, 3H) = [input gate terms; forget gate terms; content], weight (2H, H) = U,
    bias (2H,), h0 and c0 (B, H), mask (B, T) -> outputs (B, T, H), last h and last c (B, H).
    ``method``: ``torch`` (this module's loop), ``triton`` (fused step kernels), ``auto`` (``nmt.ops.kernels``)."""
    if choose_method(method, u, "ran_scan") == "triton":
        # loaded on request only: triton is an optional dependency
        from nmt.ops.triton_steps import triton_ran_scan

        return triton_ran_scan(u, weight, bias, h0, c0, mask, reverse, tanh_output)
    return _RANScan.apply(u, weight, bias, h0, c0, mask, reverse, tanh_output)


def _steps(length: int, reverse: bool) -> range:
    return range(length - 1, -1, -1) if reverse else range(length)


class _RANScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, weight, bias, h0, c0, mask, reverse, tanh_output):
        batch, length = u.shape[:2]
        size = h0.size(1)
        out = u.new_empty(batch, length, size)
        gates_all = u.new_empty(batch, length, 2 * size)  # [i_t; f_t]
        c_all, h_prev_all, c_prev_all = (u.new_empty(batch, length, size) for _ in range(3))
        full = mask.all(dim=0).tolist()
        step_mask = mask.unsqueeze(-1)
        w_t = weight.t()
        h, c = h0, c0
        for t in _steps(length, reverse):
            h_prev_all[:, t] = h
            c_prev_all[:, t] = c
            gates = torch.addmm(bias, h, w_t).add_(u[:, t, : 2 * size]).sigmoid_()
            gates_all[:, t] = gates
            i, f = gates[:, :size], gates[:, size:]
            c_new = torch.mul(i, u[:, t, 2 * size:], out=c_all[:, t]).addcmul_(f, c)
            h_new = torch.tanh(c_new, out=out[:, t]) if tanh_output else out[:, t].copy_(c_new)
            if full[t]:
                h, c = h_new, c_new
            else:
                m = step_mask[:, t]
                h, c = torch.where(m, h_new, h), torch.where(m, c_new, c)
                h_new.mul_(m)
        ctx.save_for_backward(u, weight, mask, gates_all, c_all, h_prev_all, c_prev_all, out)
        ctx.options = (reverse, tanh_output)
        return out, h.clone(), c.clone()  # tensors of their own, not views into the buffers

    @staticmethod
    def backward(ctx, grad_out, grad_h, grad_c):
        u, weight, mask, gates_all, c_all, h_prev_all, c_prev_all, out = ctx.saved_tensors
        reverse, tanh_output = ctx.options
        batch, length, size = c_all.shape
        i_all, f_all = gates_all[..., :size], gates_all[..., size:]
        content = u[..., 2 * size:]
        # dp_t = dc~_t [c~_t σ'_i; c_{t-1} σ'_f]: the coefficients for every step at once
        coef_p = torch.cat([content * i_all * (1 - i_all), c_prev_all * f_all * (1 - f_all)], dim=-1)
        coef_p = coef_p.view(batch, length, 2, size)
        activation_slope = 1 - out * out if tanh_output else None  # g'(c_t) = 1 - h_t² (h is 0 where padded)
        dc_tilde_all = torch.empty_like(c_all)
        dp_all = u.new_empty(batch, length, 2 * size)
        full = mask.all(dim=0).tolist()
        step_mask = mask.unsqueeze(-1)
        dh, dc = grad_h, grad_c
        for t in reversed(_steps(length, reverse)):
            dh_tilde = grad_out[:, t] + dh
            if activation_slope is not None:
                dh_tilde.mul_(activation_slope[:, t])
            dc_tilde = torch.add(dh_tilde, dc, out=dc_tilde_all[:, t])
            passed_h = passed_c = None
            if not full[t]:
                m = step_mask[:, t]
                dc_tilde.mul_(m)
                passed_h, passed_c = dh * ~m, dc * ~m
            torch.mul(dc_tilde.unsqueeze(1), coef_p[:, t], out=dp_all[:, t].view(batch, 2, size))
            dh = torch.mm(dp_all[:, t], weight)
            dc = dc_tilde * f_all[:, t]
            if passed_h is not None:
                dh.add_(passed_h)
                dc.add_(passed_c)
        du = torch.cat([dp_all, dc_tilde_all * i_all], dim=-1)
        flat_dp = dp_all.reshape(-1, 2 * size)
        grad_weight = flat_dp.t() @ h_prev_all.reshape(-1, size)
        grad_bias = flat_dp.sum(dim=0)
        return du, grad_weight, grad_bias, dh, dc, None, None, None
