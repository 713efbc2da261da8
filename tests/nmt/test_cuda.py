"""The CUDA paths against the reference paths (values and gradients): every cell's
fast path (the doubling scan for SRU and SR-NMT), the sliced MLP-attention scores,
whole models, beam search and a training step. Skipped where no GPU is present;
run on a GPU machine with ``python -m pytest tests/nmt/test_cuda.py``."""

from __future__ import annotations

import pytest
import torch
from test_cells import CELL_VARIANTS, build, padded_batch
from test_model import MODELS, V, batch
from test_model import build as build_model
from torch import nn

import nmt.ops.additive_scores as additive
from nmt.ops.linear_scan import linear_scan, linear_scan_reference
from nmt.search import beam_search

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
CUDA = torch.device("cuda")


def rnn_kernels_in_training_mode(model):
    """cuDNN runs an RNN's backward only in training mode. A one-layer ``nn.RNNBase`` computes the
    same in either mode (its dropout acts between layers), so only those modules switch and the
    rest of the model stays in eval mode, without dropout, comparable with the CPU."""
    for module in model.modules():
        if isinstance(module, nn.RNNBase):
            assert module.num_layers == 1
            module.train()
    return model


def grads_of(out, params, weights):
    return torch.autograd.grad((out * weights).sum(), params)


@pytest.mark.parametrize("variant", list(CELL_VARIANTS))
def test_cell_fast_path_on_cuda_equals_reference_loop_and_cpu(variant):
    cpu_cell = build(variant, 6, 4, 2)
    cell = build(variant, 6, 4, 2).to(CUDA)
    x_cpu, mask_cpu = padded_batch(3, 9, 6)
    x = x_cpu.detach().to(CUDA).requires_grad_(True)
    mask = mask_cpu.to(CUDA)
    out, _ = cell(x, mask)
    ref, _ = cell.reference(x, mask)
    torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-10)
    weights = torch.randn_like(out)
    params = [x, *cell.parameters()]
    for g, r in zip(grads_of(out, params, weights), grads_of(ref, params, weights)):
        torch.testing.assert_close(g, r, rtol=1e-8, atol=1e-9)
    out_cpu, _ = cpu_cell(x_cpu, mask_cpu)
    torch.testing.assert_close(out.cpu(), out_cpu, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("reverse", [False, True])
def test_doubling_scan_on_cuda(reverse):
    torch.manual_seed(0)
    a = torch.rand(4, 37, 8, dtype=torch.double, device=CUDA, requires_grad=True)
    b = torch.randn(4, 37, 8, dtype=torch.double, device=CUDA, requires_grad=True)
    c0 = torch.randn(4, 8, dtype=torch.double, device=CUDA, requires_grad=True)
    fast = linear_scan(a, b, c0, reverse)  # "auto" picks the doubling scan on CUDA
    ref = linear_scan_reference(a, b, c0, reverse)
    torch.testing.assert_close(fast, ref)
    w = torch.randn_like(fast)
    for g, r in zip(grads_of(fast, (a, b, c0), w), grads_of(ref, (a, b, c0), w)):
        torch.testing.assert_close(g, r)


def test_additive_scores_on_cuda():
    torch.manual_seed(0)
    q = torch.randn(5, 6, 7, 16, dtype=torch.double, device=CUDA)[:, :, 0].requires_grad_(True)
    k = torch.randn(5, 9, 16, dtype=torch.double, device=CUDA, requires_grad=True)
    v = torch.randn(16, dtype=torch.double, device=CUDA, requires_grad=True)
    fast = additive.additive_scores(q, k, v)
    plain = additive.additive_scores_reference(q, k, v)
    torch.testing.assert_close(fast, plain, rtol=1e-12, atol=1e-12)
    w = torch.randn_like(fast)
    for g, r in zip(grads_of(fast, (q, k, v), w), grads_of(plain, (q, k, v), w)):
        torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", list(MODELS))
def test_model_loss_gradients_and_beam_search_on_cuda_equal_cpu(name):
    cpu_model = build_model(MODELS[name])
    model = rnn_kernels_in_training_mode(build_model(MODELS[name]).to(CUDA))
    src, src_mask, tgt, tgt_mask = batch()
    tgt_in, tgt_out, out_mask = tgt[:, :-1], tgt[:, 1:], tgt_mask[:, 1:]
    loss_cpu, _ = cpu_model.loss(src, src_mask, tgt_in, tgt_out, out_mask)
    loss, _ = model.loss(*(t.to(CUDA) for t in (src, src_mask, tgt_in, tgt_out, out_mask)))
    torch.testing.assert_close(loss.cpu(), loss_cpu)
    for g_cpu, g in zip(torch.autograd.grad(loss_cpu, list(cpu_model.parameters())),
                        torch.autograd.grad(loss, list(model.parameters()))):
        torch.testing.assert_close(g.cpu(), g_cpu)
    with torch.no_grad():
        hyps_cpu = beam_search(cpu_model, src, src_mask, beam=3)
        hyps = beam_search(model, src.to(CUDA), src_mask.to(CUDA), beam=3)
    assert hyps == hyps_cpu and len(hyps) == 3
    assert all(0 <= token < V for hyp in hyps for token in hyp)
