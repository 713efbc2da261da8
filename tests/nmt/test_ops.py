"""Fast operators against their plain definitions: values and gradients.

Modules covered here: ``nmt.ops.additive_scores``."""

from __future__ import annotations

import pytest
import torch

import nmt.ops.additive_scores as additive


@pytest.mark.parametrize("shape", [(1, 1, 1, 3), (3, 5, 7, 8), (7, 4, 9, 16)])
@pytest.mark.parametrize("slice_elements", [1, 200, 1 << 18])  # one sentence per slice, a few, all at once
def test_additive_scores_equal_the_plain_definition(monkeypatch, shape, slice_elements):
    monkeypatch.setattr(additive, "SLICE_ELEMENTS", slice_elements)
    batch, length, source, size = shape
    torch.manual_seed(0)
    q = torch.randn(batch, length, size, dtype=torch.double, requires_grad=True)
    k = torch.randn(batch, source, size, dtype=torch.double, requires_grad=True)
    v = torch.randn(size, dtype=torch.double, requires_grad=True)
    weights = torch.randn(batch, length, source, dtype=torch.double)
    fast = additive.additive_scores(q, k, v)
    grads_fast = torch.autograd.grad((fast * weights).sum(), (q, k, v))
    plain = additive.additive_scores_reference(q, k, v)
    grads_plain = torch.autograd.grad((plain * weights).sum(), (q, k, v))
    torch.testing.assert_close(fast, plain, rtol=1e-12, atol=1e-12)
    for a, b in zip(grads_fast, grads_plain):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    assert torch.autograd.gradcheck(additive.additive_scores, (q, k, v))
