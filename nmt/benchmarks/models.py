"""Part 2 of ``nmt.bench``: whole models - the ``ablation_srnmt`` and ``cells`` studies' models, an
SR-NMT 4L next to an LSTM 2L of about the same size, FSMN next to GRU. Reported: training tokens/s
(target tokens, forward + backward + Adam), FLOPs per token and their share of the GEMM peak, decode
words/s at each beam, and activation memory per target token (the tensors autograd keeps for the
backward pass; on CUDA also the peak allocated memory)."""

from __future__ import annotations

import torch
from torch import nn

from nmt.benchmarks.timing import best_time, gemm_call, interleaved_fastest, synchronize
from nmt.config import ModelConfig, config_from_dict
from nmt.data.subword import EOS
from nmt.decoders.base import InitialState
from nmt.model import build_model
from nmt.modules.attention import Attention
from nmt.modules.memory_block import MemoryBlock
from nmt.search import beam_search
from nmt.units import units


def study_models(size: int) -> dict[str, dict]:
    """The models (model sections of a config) of the ablation_srnmt and cells studies (their
    base sizes), and the pairs the papers compare: SR-NMT 4L vs LSTM 2L of about the same size,
    FSMN vs GRU."""
    base = {"hidden": size, "emb": size, "dropout": 0.1}
    models = {f"cells/{name}": {**base, "cell": name} for name in units()}
    models["ablation_srnmt/SR-NMT 4L"] = {**base, "cell": "srnmt", "enc_layers": 4, "dec_layers": 4}
    # the SR-NMT paper's Table 1: its LSTM baseline (OpenNMT-py, input feeding, MLP attention) has about
    # the parameters of SR-NMT 3L
    models["pair/SR-NMT 3L"] = {**base, "cell": "srnmt", "enc_layers": 3, "dec_layers": 3}
    models["pair/LSTM 2L"] = {**base, "cell": "lstm", "enc_layers": 2, "dec_layers": 2, "attention": "mlp"}
    return models


def forward_flops_per_token(model: nn.Module, source_length: int) -> int:
    """FLOPs of the products in one forward pass, per target token, with as many source as target
    tokens (2 per multiply-add): every weight matrix once (embedding lookups are no products, a
    softmax tied to them is), every memory block's taps, and every attention's scores and context
    over ``source_length`` positions. Elementwise work (gates, tanh, layer norm) and the decoder's
    initial state (one product per sentence) are not counted."""
    macs = sum(p.numel() for p in model.parameters() if p.dim() >= 2)
    for module in model.modules():
        if isinstance(module, nn.Embedding) and module.weight is not model.generator.weight:
            macs -= module.weight.numel()
        elif isinstance(module, MemoryBlock) and module.taps.dim() == 1:  # one scalar tap per order, every unit
            macs += module.taps.numel() * module.size
        elif isinstance(module, InitialState):
            macs -= module.proj.weight.numel()
        elif isinstance(module, Attention):
            macs += source_length * (module.score_size + module.memory_size)
    return 2 * macs


def model_config(model: dict) -> ModelConfig:
    """The resolved model config of a model section (the unit's defaults filled in)."""
    return config_from_dict({"model": model}, source="nmt.bench").model


def prepare_model(model_section: dict, batch: int, length: int, vocab: int, device: torch.device,
                  adam: dict | None = None) -> dict:
    """A model on random data (speed does not depend on the values) and its training step; ``adam``:
    the optimiser's options (nmt.numerics.adam_options: portable numerics fuse it)."""
    cfg = model_config(model_section)
    model = build_model(cfg, vocab, vocab).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, **(adam or {}))
    src = torch.randint(4, vocab, (batch, length), device=device)
    tgt = torch.randint(4, vocab, (batch, length + 1), device=device)
    src_mask = torch.ones_like(src, dtype=torch.bool)
    tgt_mask = torch.ones(batch, length, dtype=torch.bool, device=device)

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        loss, _ = model.loss(src, src_mask, tgt[:, :-1], tgt[:, 1:], tgt_mask)
        (loss / tgt_mask.sum()).backward()
        optimizer.step()
        synchronize(device)

    model.train()
    return {"cfg": cfg, "model": model, "train_step": train_step, "src": src, "src_mask": src_mask,
            "tgt": tgt, "tgt_mask": tgt_mask}


def bench_model(name: str, prepared: dict, seconds: float, device: torch.device, repeats: int,
                beams: list[int]) -> dict:
    """The row of one model: training speed from ``seconds`` per step, FLOPs, activation memory
    and decoding speed."""
    cfg, model, src, src_mask = prepared["cfg"], prepared["model"], prepared["src"], prepared["src_mask"]
    tgt, tgt_mask = prepared["tgt"], prepared["tgt_mask"]
    batch, length = tgt_mask.shape
    saved = {"bytes": 0}

    def pack(tensor):
        saved["bytes"] += tensor.numel() * tensor.element_size()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss, _ = model.loss(src, src_mask, tgt[:, :-1], tgt[:, 1:], tgt_mask)
    del loss
    tokens_per_s = batch * length / seconds
    flops = forward_flops_per_token(model, length)
    row = {"model": name, "cell": cfg.cell, "params": model.parameter_count, "hidden": cfg.hidden,
           "layers": f"{cfg.enc_layers}+{cfg.dec_layers}", "train_tokens_per_s": tokens_per_s,
           "train_flops_per_token": 3 * flops, "gflops": 3 * flops * tokens_per_s / 1e9,
           "activation_bytes_per_token": saved["bytes"] / (batch * length)}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        prepared["train_step"]()
        row["peak_bytes_per_token"] = torch.cuda.max_memory_allocated() / (batch * length)
    model.eval()
    decode_src, decode_mask = src[: min(batch, 32)], src_mask[: min(batch, 32)]
    eos_bias = model.generator.bias.data[EOS].item()
    model.generator.bias.data[EOS] = -1e4  # no early stop: every sentence runs to the length limit
    for beam in beams:
        words = {"n": 0}

        def decode(beam=beam, words=words):
            words["n"] = sum(len(h) for h in beam_search(model, decode_src, decode_mask, beam=beam,
                                                          max_len_ratio=1.0))
            synchronize(device)

        t = best_time(decode, max(1, repeats // 2))
        row[f"decode_words_per_s_beam{beam}"] = words["n"] / t
    model.generator.bias.data[EOS] = eos_bias
    model.train()
    return row


def model_table(size: int, batch: int, length: int, vocab: int, device: torch.device, repeats: int,
                beams: list[int], log) -> list[dict]:
    """Part 2's rows: every model of ``study_models``, trained in interleaved rounds beside the GEMM
    peak, then the ratios of the pairs the papers compare (logged)."""
    rows = []
    prepared = {name: prepare_model(cfg, batch, length, vocab, device) for name, cfg in study_models(size).items()}
    gemm, gemm_flops = gemm_call(batch, length, size, device)
    seconds = interleaved_fastest({"GEMM": gemm, **{name: p["train_step"] for name, p in prepared.items()}}, repeats)
    peak = gemm_flops / seconds["GEMM"] / 1e9
    log(f"  GEMM peak at this size: {peak:.1f} GFLOP/s; training FLOPs = 3 x the forward products")
    for name in prepared:
        row = bench_model(name, prepared[name], seconds[name], device, repeats, beams)
        row.update(peak_gflops=peak, of_peak=row["gflops"] / peak)
        rows.append(row)
        decode = "  ".join(f"beam {b}: {row[f'decode_words_per_s_beam{b}']:>7,.0f} w/s" for b in beams)
        log(f"  {name:26s} {row['params']:>10,} params  {row['train_tokens_per_s']:>8,.0f} train tok/s  "
            f"{row['train_flops_per_token'] / 1e6:6.2f} MFLOP/tok ({100 * row['of_peak']:3.0f}% of peak)  {decode}  "
            f"{row['activation_bytes_per_token'] / 1024:6.1f} KiB/token")
    by_name = {r["model"]: r for r in rows}
    pairs = [("ablation_srnmt/SR-NMT 4L", "pair/LSTM 2L"), ("pair/SR-NMT 3L", "pair/LSTM 2L"), ("cells/fsmn", "cells/gru"),
             ("cells/atr", "cells/lstm"), ("cells/atr", "cells/gru"), ("cells/gru", "cells/lstm"), ("cells/sru", "cells/lstm")]
    for a, b in pairs:
        ratio = by_name[a]["train_tokens_per_s"] / by_name[b]["train_tokens_per_s"]
        flops = by_name[a]["train_flops_per_token"] / by_name[b]["train_flops_per_token"]
        log(f"  ratio {a} / {b}: x{ratio:.2f} training tokens/s, x{flops:.2f} FLOPs per token "
            f"({by_name[a]['params']:,} vs {by_name[b]['params']:,} params)")
    return rows
