"""The memory recurrence of SRU with v2 gates (Lei et al. 2018), a class (b) recurrence: the
forget gate reads the previous memory, so the steps are sequential, but there is no matrix
product in them::

    f_t = σ(u_t + v * c_{t-1}),     c_t = f_t * c_{t-1} + (1 - f_t) * x~_t

with u_t = W_f x_t + b_f and x~_t = W x_t + b computed for all steps beforehand. The forward
loop is a few in-place elementwise operations per step, with no autograd graph. Its gradient
is a linear recurrence, because c_t depends on c_{t-1} only through the two terms above::

    ∂c_t/∂c_{t-1} = f_t + (c_{t-1} - x~_t) σ'_t v =: a_t,   σ'_t = f_t (1 - f_t)
    dc_t = g_t + a_{t+1} dc_{t+1}                    (``linear_scan_adjoint``)
    du_t = dc_t (c_{t-1} - x~_t) σ'_t,   dx~_t = dc_t (1 - f_t),   dv = Σ_t du_t c_{t-1}

Padded positions carry c through (a = 1, no input). The readout gate r_t = σ(W_r x_t + v_r * c_{t-1})
and the output need no loop: the cell computes them from all c_t at once. ``method="triton"`` (or
``NMT_KERNELS=triton`` for ``auto``: ``nmt.ops.kernels``) runs the loop as one Triton kernel forward
and one backward (``nmt.ops.triton_scan``); ``auto`` is this module's loop otherwise.
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.ops.kernels import choose_method
from nmt.ops.linear_scan import linear_scan_adjoint


def sru_v2_memory(u: Tensor, x_tilde: Tensor, v: Tensor, c0: Tensor, mask: Tensor, reverse: bool = False,
                  method: str = "auto") -> Tensor:
    """u, x_tilde (B, T, H), v (H,), c0 (B, H), mask (B, T) -> c (B, T, H): every c_t, carried
    through padded positions; ``reverse`` runs from t = T down to 1. ``method``: ``torch`` (this
    module's loop), ``triton`` (one kernel each way), ``auto`` (``nmt.ops.kernels``)."""
    if choose_method(method, u, "sru_v2_memory") == "triton":
        # loaded on request only: triton is an optional dependency
        from nmt.ops.triton_scan import triton_sru_v2_memory

        return triton_sru_v2_memory(u, x_tilde, v, c0, mask, reverse)
    if reverse:
        return _SRUv2Memory.apply(u.flip(1), x_tilde.flip(1), v, c0, mask.flip(1)).flip(1)
    return _SRUv2Memory.apply(u, x_tilde, v, c0, mask)


class _SRUv2Memory(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, x_tilde, v, c0, mask):
        c_all = torch.empty_like(x_tilde)
        f_all = torch.empty_like(x_tilde)
        full = mask.all(dim=0).tolist()
        step_mask = mask.unsqueeze(-1)
        c = c0
        for t in range(u.size(1)):
            f = torch.addcmul(u[:, t], v, c, out=f_all[:, t]).sigmoid_()
            c_new = torch.addcmul(x_tilde[:, t], f, c - x_tilde[:, t], out=c_all[:, t])  # f c + (1 - f) x~
            if not full[t]:
                c_new.copy_(torch.where(step_mask[:, t], c_new, c))
            c = c_new
        ctx.save_for_backward(x_tilde, v, c0, mask, c_all, f_all)
        return c_all

    @staticmethod
    def backward(ctx, grad_c):
        x_tilde, v, c0, mask, c_all, f_all = ctx.saved_tensors
        m = mask.unsqueeze(-1).to(c_all.dtype)
        c_prev = torch.cat([c0.unsqueeze(1), c_all[:, :-1]], dim=1)
        through_f = (c_prev - x_tilde) * f_all * (1 - f_all) * m  # ∂c_t/∂u_t (0 where padded)
        slope = torch.where(mask.unsqueeze(-1), f_all + through_f * v, 1.0)  # ∂c_t/∂c_{t-1}
        dc = linear_scan_adjoint(slope, grad_c, "doubling" if grad_c.is_cuda else "sequential")
        du = dc * through_f
        dx_tilde = dc * (1 - f_all) * m
        dv = (du * c_prev).sum(dim=(0, 1))
        dc0 = slope[:, 0] * dc[:, 0]
        return du, dx_tilde, dv, dc0, None
