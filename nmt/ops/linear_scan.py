"""The linear recurrence c_t = a_t * c_{t-1} + b_t over a whole sequence.

This is the recurrence of class (a) cells (SR-NMT unit, SRU v1): the gates
a_t and inputs b_t depend on the input only, so the whole sequence can be
computed without per-step Python/autograd work. Padding is handled by the
callers' identity elements (a = 1, b = 0 carries the state through).

Two implementations of the same function, both with a hand-written backward
(the gradient of a linear recurrence is the reverse linear recurrence
dc_t = g_t + a_{t+1} * dc_{t+1}; then da_t = dc_t * c_{t-1}, db_t = dc_t):
- ``sequential``: one fused multiply-add per step, no autograd graph; the
  fastest choice on CPU, where T small kernels beat log(T) large ones.
- ``doubling``: a Hillis-Steele associative scan, log2(T) elementwise passes
  over the whole tensor, combining (a1, b1) then (a2, b2) into
  (a1*a2, a2*b1 + b2); products and sums only (no division), so it is
  numerically stable. The choice on GPUs.
- ``triton``: one Triton kernel forward and one backward, each walking the sequence once per hidden
  unit (``nmt.ops.triton_scan``; needs the ``triton`` extra). Opt-in: ``method="triton"``, or
  ``NMT_KERNELS=triton`` for ``auto`` (``nmt.ops.kernels``); without it ``auto`` picks as above.
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.ops.kernels import choose_method


def linear_scan(a: Tensor, b: Tensor, c0: Tensor, reverse: bool = False, method: str = "auto") -> Tensor:
    """All states c_1..c_T of c_t = a_t * c_{t-1} + b_t.

    a, b: (B, T, H); c0: (B, H). ``reverse`` runs from t = T down to 1
    (c_{T+1} = c0). Returns c: (B, T, H).
    """
    method = choose_method(method, a, "linear_scan", default="doubling" if a.is_cuda else "sequential",
                           torch_methods=("sequential", "doubling"))
    if method == "triton":
        # loaded on request only: triton is an optional dependency
        from nmt.ops.triton_scan import triton_linear_scan

        return triton_linear_scan(a, b, c0, reverse)
    if reverse:
        return _LinearScan.apply(a.flip(1), b.flip(1), c0, method).flip(1)
    return _LinearScan.apply(a, b, c0, method)


def linear_scan_reference(a: Tensor, b: Tensor, c0: Tensor, reverse: bool = False) -> Tensor:
    """Plain per-step loop with autograd; the definition the fast paths are tested against."""
    steps = range(a.size(1) - 1, -1, -1) if reverse else range(a.size(1))
    c = c0
    out = [None] * a.size(1)
    for t in steps:
        c = a[:, t] * c + b[:, t]
        out[t] = c
    return torch.stack(out, dim=1)


def linear_scan_adjoint(a: Tensor, grad_c: Tensor, method: str = "sequential") -> Tensor:
    """The gradient reaching each c_t of c_t = a_t * c_{t-1} + b_t (forward direction), given the
    gradients g_t of the outputs: dc_t = g_t + a_{t+1} dc_{t+1}, the same recurrence run backwards
    with a shifted by one. No autograd (for hand-written backward passes)."""
    a_next = torch.cat([a[:, 1:], torch.zeros_like(a[:, :1])], dim=1)
    return _scan_forward(a_next.flip(1), grad_c.flip(1), torch.zeros_like(grad_c[:, 0]), method).flip(1)


def _scan_forward(a: Tensor, b: Tensor, c0: Tensor, method: str) -> Tensor:
    if method == "sequential":
        c = torch.empty_like(b)
        prev = c0
        for t in range(b.size(1)):
            prev = torch.addcmul(b[:, t], a[:, t], prev, out=c[:, t])
        return c
    # doubling: fold c0 into the first element, then combine with offsets 1, 2, 4, ...
    acc_a = a.clone()
    acc_b = b.clone()
    acc_b[:, 0] = torch.addcmul(b[:, 0], a[:, 0], c0)
    offset = 1
    length = b.size(1)
    while offset < length:
        new_b = acc_b.clone()
        new_b[:, offset:] = torch.addcmul(acc_b[:, offset:], acc_a[:, offset:], acc_b[:, :-offset])
        new_a = acc_a.clone()
        new_a[:, offset:] = acc_a[:, offset:] * acc_a[:, :-offset]
        acc_a, acc_b = new_a, new_b
        offset *= 2
    return acc_b


class _LinearScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a: Tensor, b: Tensor, c0: Tensor, method: str) -> Tensor:
        c = _scan_forward(a, b, c0, method)
        ctx.method = method
        ctx.save_for_backward(a, c0, c)
        return c

    @staticmethod
    def backward(ctx, grad_c: Tensor):
        a, c0, c = ctx.saved_tensors
        dc = linear_scan_adjoint(a, grad_c, ctx.method)
        c_prev = torch.cat([c0.unsqueeze(1), c[:, :-1]], dim=1)
        grad_a = dc * c_prev
        grad_c0 = a[:, 0] * dc[:, 0]
        return grad_a, dc, grad_c0, None


def masked_linear_scan(a: Tensor, b: Tensor, mask: Tensor, h0: Tensor, reverse: bool = False) -> tuple[Tensor, Tensor]:
    """(outputs, final state) of h_t = a_t * h_{t-1} + b_t over padded sequences: padded
    positions (mask False) carry the state through (a = 1, b = 0) and output zeros; the final
    state is the one after each sequence's last real token (its first, when ``reverse``)."""
    m = mask.unsqueeze(-1)
    h = linear_scan(torch.where(m, a, 1.0), torch.where(m, b, 0.0), h0, reverse=reverse)
    return h * m, (h[:, 0] if reverse else h[:, -1])
