"""``python -m nmt.bench``: how fast every recurrent unit runs here, as ratios measured in one run.

Three parts, on random data (speed does not depend on the values):

1. Cells: forward + backward of one unidirectional layer (input GEMM included),
   B x T tokens, D = H, for every cell, each H and thread count. Reported: tokens/s,
   the ratio to ``torch.nn.LSTM`` of the same size measured in the same run,
   achieved GFLOP/s (the weight-matrix FLOPs: 2 per weight element per token,
   x3 for forward + backward) and its fraction of the machine's GEMM peak, also
   measured in this run (a (B*T x H) @ (H x 4H) matmul).
2. Models: training tokens/s (target tokens, forward + backward + Adam) of
   whole models - the ``ablation_srnmt`` and ``cells`` studies' models, an SR-NMT 4L
   next to an LSTM 2L of about the same size, FSMN next to GRU - decode words/s at
   beam 1 and 5, and activation memory per target token (the tensors autograd keeps
   for the backward pass; on CUDA also the peak allocated memory).
3. Decoding: beam-5 words/s of the search, which drops finished sentences from the
   batch, next to the baseline that kept them (its old loop, kept here), over the same
   length-sorted batches of a 512-sentence test set, at the studies' size (H=64,
   vocabulary 800) and at H=256 with 8,000 pieces; medians of interleaved rounds. The
   GRU models have random weights, and each search ends where a trained GRU's would
   (``ScriptedEnds``), so that sentences leave a batch as unevenly as in real use.
   The only assertion here: both give the same translations.
4. Targets: each speed target of the project with its ratio measured in this run, met or
   missed - whole-model training tokens/s of SR-NMT 3L and 4L against LSTM 2L, ATR and
   FSMN against GRU (at the studies' size, and at H=256 with 8,000 pieces on batches of
   Multi30k's length), beam-5 decoding against the old search (part 3), and the study
   platform's fixed cost (``python -m study.bench --fixed-cost`` in its own process).

``--json`` prints everything as one JSON object instead of tables. Apart from part 3's
check, nothing here asserts: the numbers are for people (and CI logs) to read.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable

import torch
from torch import Tensor, nn

from nmt.cells import make_cell
from nmt.cli import program_name, run_main
from nmt.config import ModelConfig, config_from_dict
from nmt.data.subword import BOS, EOS, PAD
from nmt.errors import UserError
from nmt.model import build_model
from nmt.modules.memory_block import MemoryBlock
from nmt.search import max_lengths
from nmt.typed_config import apply_overrides
from nmt.units import units



# --- timing -----------------------------------------------------------------------


def best_time(fn: Callable[[], None], repeats: int) -> float:
    """The fastest of ``repeats`` calls after one warm-up (the least disturbed measurement)."""
    return interleaved_fastest({"only": fn}, repeats)["only"]


def interleaved_fastest(calls: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Seconds of the fastest of ``repeats`` calls of each (see ``interleaved_times``)."""
    return {name: min(seconds) for name, seconds in interleaved_times(calls, repeats).items()}


def interleaved_times(calls: dict[str, Callable[[], None]], repeats: int) -> dict[str, list[float]]:
    """Seconds of ``repeats`` calls of each, timed in interleaved rounds after one warm-up each: a
    slow spell of the machine then touches every candidate alike, instead of whichever happened
    to run in it (what the ratios between them need)."""
    for call in calls.values():
        call()
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            begin = time.perf_counter()
            call()
            seconds[name].append(time.perf_counter() - begin)
    return seconds


def gemm_call(batch: int, length: int, hidden: int, device: torch.device) -> tuple[Callable[[], None], float]:
    """(the GEMM every recurrent layer is built on, (B*T x H) @ (H x 4H), its FLOPs): timed beside
    the candidates, its speed is the machine's peak for that size in the same run."""
    a = torch.randn(batch * length, hidden, device=device)
    b = torch.randn(hidden, 4 * hidden, device=device)

    def run():
        torch.mm(a, b)
        _sync(device)

    return run, 2 * a.size(0) * hidden * 4 * hidden


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


# --- part 1: cells ------------------------------------------------------------------


class TorchModule(nn.Module):
    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, x, mask):
        return self.module(x)


def bench_cells_names() -> list[str]:
    """torch's fused LSTM and GRU, then every unit of the registry and the variants it asks the
    benchmark to time."""
    names = ["nn.LSTM", "nn.GRU"]
    for unit in units().values():
        names += [unit.name, *unit.bench]
    return names


def build_layer(name: str, hidden: int) -> nn.Module:
    if name == "nn.LSTM":
        return TorchModule(nn.LSTM(hidden, hidden, batch_first=True))
    if name == "nn.GRU":
        return TorchModule(nn.GRU(hidden, hidden, batch_first=True))
    unit = next(u for u in units().values() if name == u.name or name in u.variants)
    if unit.cell is None:
        return unit.bench_layer(hidden)
    changes = unit.variants.get(name, {})
    cfg = config_from_dict(apply_overrides({"model": {"cell": unit.name}}, list(changes.items()))).model
    return make_cell(cfg, hidden, hidden)  # a unit bidirectional by construction takes d = hidden in total


def matrix_elements(module: nn.Module) -> int:
    """Weight-matrix elements: each is one multiply-add per token in the forward pass."""
    return sum(p.numel() for p in module.parameters() if p.dim() >= 2)


def cell_step(name: str, hidden: int, batch: int, length: int, device: torch.device) -> tuple[Callable[[], None], int]:
    """(one forward + backward of the layer, its weight-matrix elements)."""
    layer = build_layer(name, hidden).to(device)
    x = torch.randn(batch, length, hidden, device=device, requires_grad=True)  # inside a model: dL/dx is needed
    mask = torch.ones(batch, length, dtype=torch.bool, device=device)

    def run():
        x.grad = None
        out = layer(x, mask)
        (out[0] if isinstance(out, tuple) else out).sum().backward()
        _sync(device)

    return run, matrix_elements(layer)


def bench_cells(names: list[str], hidden: int, batch: int, length: int, device: torch.device,
                repeats: int) -> tuple[dict[str, dict], float]:
    """({cell: its row}, the GEMM peak in GFLOP/s), all timed in the same interleaved rounds."""
    steps = {name: cell_step(name, hidden, batch, length, device) for name in names}
    gemm, gemm_flops = gemm_call(batch, length, hidden, device)
    fastest = interleaved_fastest({"GEMM": gemm, **{name: run for name, (run, _) in steps.items()}}, repeats)
    results = {}
    for name, (_, elements) in steps.items():
        seconds = fastest[name]
        flops = 3 * 2 * batch * length * elements
        results[name] = {"cell": name, "hidden": hidden, "tokens_per_s": batch * length / seconds, "seconds": seconds,
                         "gflops": flops / seconds / 1e9}
    return results, gemm_flops / fastest["GEMM"] / 1e9


def cell_table(hiddens: list[int], threads: list[int], batch: int, length: int, device: torch.device,
               repeats: int, cells: list[str], log) -> list[dict]:
    rows = []
    for n in threads:
        if device.type == "cpu":
            torch.set_num_threads(n)
        for hidden in hiddens:
            results, peak = bench_cells(cells, hidden, batch, length, device, repeats)
            log(f"cells: {n} thread(s), H={hidden}: GEMM peak {peak:.1f} GFLOP/s")
            lstm = results.get("nn.LSTM", {}).get("tokens_per_s")
            for name in cells:
                r = results[name]
                r.update(threads=n, vs_lstm=r["tokens_per_s"] / lstm if lstm else None, peak_gflops=peak,
                         of_peak=r["gflops"] / peak)
                rows.append(r)
                log(f"  {name:8s} {r['tokens_per_s']:>10,.0f} tok/s  x{r['vs_lstm'] or 0:5.2f} nn.LSTM  "
                    f"{r['gflops']:6.1f} GFLOP/s ({100 * r['of_peak']:3.0f}% of peak)")
    return rows


# --- part 2: models -----------------------------------------------------------------


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
    from nmt.decoders.base import InitialState
    from nmt.modules.attention import Attention

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


def prepare_model(model_section: dict, batch: int, length: int, vocab: int, device: torch.device) -> dict:
    """A model on random data (speed does not depend on the values) and its training step."""
    cfg = model_config(model_section)
    model = build_model(cfg, vocab, vocab).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    src = torch.randint(4, vocab, (batch, length), device=device)
    tgt = torch.randint(4, vocab, (batch, length + 1), device=device)
    src_mask = torch.ones_like(src, dtype=torch.bool)
    tgt_mask = torch.ones(batch, length, dtype=torch.bool, device=device)

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        loss, _ = model.loss(src, src_mask, tgt[:, :-1], tgt[:, 1:], tgt_mask)
        (loss / tgt_mask.sum()).backward()
        optimizer.step()
        _sync(device)

    model.train()
    return {"cfg": cfg, "model": model, "train_step": train_step, "src": src, "src_mask": src_mask,
            "tgt": tgt, "tgt_mask": tgt_mask}


def bench_model(name: str, prepared: dict, seconds: float, device: torch.device, repeats: int,
                beams: list[int]) -> dict:
    """The row of one model: training speed from ``seconds`` per step, FLOPs, activation memory
    and decoding speed."""
    from nmt.search import beam_search

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
            _sync(device)

        t = best_time(decode, max(1, repeats // 2))
        row[f"decode_words_per_s_beam{beam}"] = words["n"] / t
    model.generator.bias.data[EOS] = eos_bias
    model.train()
    return row


def model_table(size: int, batch: int, length: int, vocab: int, device: torch.device, repeats: int,
                beams: list[int], log) -> list[dict]:
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


# --- part 3: decoding ---------------------------------------------------------------


@torch.no_grad()
def baseline_beam_search(model, src: Tensor, src_mask: Tensor, beam: int = 5, length_penalty: float = 1.0,
                         max_len_ratio: float = 2.0) -> list[list[int]]:
    """``nmt.search.beam_search`` as it was before finished sentences left the batch (every sentence
    keeps its K rows until the batch's last search ends), kept here only as the baseline of the
    decoding ratio."""
    batch, device = src.size(0), src.device
    memory = model.encode(src, src_mask)
    state = model.decoder.init_state(memory)
    rows = torch.arange(batch, device=device).repeat_interleave(beam)
    memory = {k: v.index_select(0, rows) for k, v in memory.items()}
    state = {k: v.index_select(0, rows) for k, v in state.items()}
    limits = max_lengths(src_mask, max_len_ratio).tolist()

    scores = torch.full((batch, beam), float("-inf"), device=device)
    scores[:, 0] = 0.0
    tokens = torch.full((batch * beam, 1), BOS, dtype=torch.long, device=device)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]
    done = [False] * batch

    def finish(sentence: int, hypothesis: list[int], score: float, eos: bool = True) -> None:
        length = len(hypothesis) + (1 if eos else 0)
        finished[sentence].append((score / max(length, 1) ** length_penalty, hypothesis))

    for t in range(max(limits)):
        log_probs, state = model.step_log_probs(memory, tokens[:, -1], state)
        log_probs[:, PAD] = float("-inf")
        log_probs[:, BOS] = float("-inf")
        vocab = log_probs.size(-1)
        candidates = (scores.view(-1, 1) + log_probs).view(batch, beam * vocab)
        top_scores, top_index = candidates.topk(2 * beam, dim=1)
        origin = torch.div(top_index, vocab, rounding_mode="floor")
        words = top_index % vocab
        is_eos = words == EOS

        eos_rank = is_eos & (torch.arange(2 * beam, device=device) < beam)
        for sentence, position in eos_rank.nonzero().tolist():
            if not done[sentence]:
                prefix = tokens[sentence * beam + int(origin[sentence, position]), 1:].tolist()
                finish(sentence, prefix, float(top_scores[sentence, position]))

        keep_rank = (~is_eos).cumsum(dim=1)
        keep = (~is_eos) & (keep_rank <= beam)
        order = keep.float().argsort(dim=1, descending=True, stable=True)[:, :beam]
        scores = top_scores.gather(1, order)
        chosen_origin = origin.gather(1, order)
        chosen_words = words.gather(1, order)
        flat_origin = (torch.arange(batch, device=device).unsqueeze(1) * beam + chosen_origin).view(-1)
        tokens = torch.cat([tokens.index_select(0, flat_origin), chosen_words.view(-1, 1)], dim=1)
        state = {k: v.index_select(0, flat_origin) for k, v in state.items()}

        for sentence in range(batch):
            if done[sentence]:
                continue
            if len(finished[sentence]) >= beam:
                done[sentence] = True
            elif t + 1 >= limits[sentence]:
                for k in range(beam):
                    hypothesis = tokens[sentence * beam + k, 1:].tolist()
                    finish(sentence, hypothesis, float(scores[sentence, k]), eos=False)
                done[sentence] = True
        if all(done):
            break

    return [max(hypotheses, key=lambda item: item[0])[1] for hypotheses in finished]


class ScriptedEnds:
    """A random-weight model whose searches end where a trained model's would: EOS is impossible
    before the step drawn for the sentence and the only word at it. A random model's own EOS
    probability ends nearly every search at once or at the length limit, and how many rows the
    baseline keeps busy for nothing depends on how unevenly the searches of a batch end.
    Everything else - encoder, decoder steps, softmax, search - is the real model's work."""

    def __init__(self, model: nn.Module, ends: dict[tuple[int, ...], int]):
        self.model, self.decoder, self.ends = model, model.decoder, ends
        self.rows = 0  # decoder rows computed, summed over steps

    def encode(self, src: Tensor, src_mask: Tensor) -> dict[str, Tensor]:
        memory = self.model.encode(src, src_mask)
        ends = [self.ends[tuple(ids[real][:-1].tolist())] for ids, real in zip(src, src_mask)]  # source without EOS
        memory["scripted_end"] = torch.tensor(ends, device=src.device)  # a batch row like any, so the search moves it
        return memory

    def step_log_probs(self, memory: dict[str, Tensor], y_prev: Tensor, state: dict) -> tuple[Tensor, dict]:
        state = dict(state)
        steps = state.pop("scripted_steps", torch.zeros_like(y_prev)) + 1
        self.rows += y_prev.size(0)
        log_probs, state = self.model.step_log_probs(memory, y_prev, state)
        # rows past their end belong to finished searches; a row index, not a mask: no pass over (rows, V)
        ending = (steps == memory["scripted_end"]).nonzero().squeeze(1)
        log_probs[:, EOS] = float("-inf")
        log_probs.index_fill_(0, ending, float("-inf"))
        log_probs[ending, EOS] = 0.0
        state["scripted_steps"] = steps
        return log_probs, state


def scripted_test_set(sentences: int, vocab: int, max_len_ratio: float, seed: int = 1
                      ) -> tuple[list[list[int]], dict[tuple[int, ...], int]]:
    """(sources, the step where each one's search ends). Sources have the lengths of the synthetic
    corpus's test set (3-50 tokens, mean 16; Multi30k's test set has 14 BPE pieces on average) and
    random ids. A search ends after its source length (+ EOS) x a log-normal factor, median 1.15
    and sigma 0.29: fitted to what beam 5 gives with a GRU trained for one epoch on Multi30k
    (median 1.15, 5th to 95th percentile 0.77 to 2.0; half of the baseline's rows work there, as here)."""
    from nmt.data.synthetic import generate_corpus, tokenize

    rng = random.Random(seed)
    sources, ends = [], {}
    for source, _ in generate_corpus(seed, 1, 1, sentences)["test"]:
        ids = [rng.randrange(4, vocab) for _ in tokenize(source)]
        length = len(ids) + 1
        limit = int(length * max_len_ratio) + 10  # nmt.search.max_lengths
        ends[tuple(ids)] = min(max(2, round(length * math.exp(rng.gauss(0.14, 0.29)))), limit)
        sources.append(ids)
    return sources, ends


def decoding_row(hidden: int, vocab: int, sentences: int, device: torch.device, repeats: int) -> dict:
    """Beam-search words/s of the GRU model (the studies' unit) at one size, the search as it is and
    the baseline, both over the same length-sorted batches as ``nmt.translator``, timed in
    interleaved rounds (medians); the translations must be the same."""
    from nmt.config import DecodeConfig
    from nmt.data.batching import make_source_batches
    from nmt.search import beam_search

    decode = DecodeConfig()
    torch.manual_seed(0)
    model = build_model(model_config({"hidden": hidden, "emb": hidden, "cell": "gru"}), vocab, vocab)
    sources, ends = scripted_test_set(sentences, vocab, decode.max_len_ratio)
    scripted = ScriptedEnds(model.to(device).eval(), ends)
    batches = [(src.to(device), mask.to(device), indices)
               for src, mask, indices in make_source_batches(sources, decode.batch_size)]
    outputs: dict[str, list] = {}
    rows: dict[str, int] = {}

    def translate_with(name: str, search) -> Callable[[], None]:
        def run():
            start, translations = scripted.rows, [None] * len(sources)
            for src, mask, indices in batches:
                hypotheses = search(scripted, src, mask, beam=decode.beam, length_penalty=decode.length_penalty,
                                    max_len_ratio=decode.max_len_ratio)
                for index, hypothesis in zip(indices, hypotheses):
                    translations[index] = hypothesis
            _sync(device)
            outputs[name], rows[name] = translations, scripted.rows - start

        return run

    seconds = interleaved_times({"baseline": translate_with("baseline", baseline_beam_search),
                                 "search": translate_with("search", beam_search)}, repeats)
    if outputs["search"] != outputs["baseline"]:
        raise AssertionError(f"H={hidden}, vocab {vocab}: the search and its baseline translate differently")
    words = sum(len(hypothesis) for hypothesis in outputs["search"])
    median = {name: statistics.median(values) for name, values in seconds.items()}
    return {"hidden": hidden, "vocab": vocab, "sentences": sentences, "beam": decode.beam, "words": words,
            "words_per_s": words / median["search"], "baseline_words_per_s": words / median["baseline"],
            "speedup": median["baseline"] / median["search"], "seconds": seconds["search"],
            "baseline_seconds": seconds["baseline"], "baseline_useful_rows": rows["search"] / rows["baseline"]}


def decoding_table(sizes: list[tuple[int, int]], sentences: int, device: torch.device, repeats: int,
                   log) -> list[dict]:
    rows = []
    for hidden, vocab in sizes:
        row = decoding_row(hidden, vocab, sentences, device, repeats)
        rows.append(row)
        log(f"  H={hidden:<4d} vocab {vocab:<6,d} {row['words_per_s']:>8,.0f} words/s  baseline "
            f"{row['baseline_words_per_s']:>8,.0f} words/s  x{row['speedup']:.2f} (medians of {repeats} interleaved "
            f"rounds; the baseline's rows doing useful work: {100 * row['baseline_useful_rows']:.0f}%; same translations)")
    return rows


# --- part 4: targets ----------------------------------------------------------------

# (what, model, baseline model, the least ratio wanted): training tokens/s of whole models. The
# SR-NMT paper (Table 1) has SR-NMT 3L at 1.16x its LSTM 2L, the ATR paper (Table 4) ATR at 1.26x
# GRU, the FSMN paper 1.4-2x; the project's targets are set above them.
TRAINING_TARGETS = [
    ("SR-NMT 3L / LSTM 2L", "pair/SR-NMT 3L", "pair/LSTM 2L", 1.3),
    ("SR-NMT 4L / LSTM 2L", "ablation_srnmt/SR-NMT 4L", "pair/LSTM 2L", 1.0),
    ("ATR / GRU", "cells/atr", "cells/gru", 1.3),
    ("FSMN / GRU", "cells/fsmn", "cells/gru", 2.0),
]
BEAM_TARGET = 2.0  # beam-5 words/s against the search that kept finished sentences in the batch
FIXED_COST_TARGET = 0.5  # the study's fixed cost against the 13 s measured before (the same machine type)
FIXED_COST_BEFORE = 13.0


def target_size(text: str) -> dict:
    """``H:V:BxT`` -> the size of a target's models and batches."""
    try:
        hidden, vocab, shape = text.split(":")
        batch, length = shape.split("x")
        size = {"hidden": int(hidden), "vocab": int(vocab), "batch": int(batch), "length": int(length)}
    except ValueError:
        raise UserError(f"--target-sizes {text}: give hidden size, vocabulary and batch as H:V:BxT, "
                        f"e.g. 256:8000:128x16") from None
    if min(size.values()) < 1 or size["vocab"] < 5:  # ids 0-3 are PAD, UNK, BOS, EOS
        raise UserError(f"--target-sizes {text}: needs every number >= 1 and V >= 5")
    return size


def training_targets(size: dict, device: torch.device, repeats: int) -> list[dict]:
    """Training tokens/s of the models the targets compare, timed in the same interleaved rounds."""
    models = study_models(size["hidden"])
    names = sorted({name for _, a, b, _ in TRAINING_TARGETS for name in (a, b)})
    steps = {name: prepare_model(models[name], size["batch"], size["length"], size["vocab"], device)["train_step"]
             for name in names}
    seconds = interleaved_fastest(steps, repeats)
    rows = []
    for what, model, baseline, wanted in TRAINING_TARGETS:
        ratio = seconds[baseline] / seconds[model]
        rows.append({"target": f"{what} training tokens/s", **size, "ratio": ratio, "wanted": wanted, "bound": ">=",
                     "met": ratio >= wanted,
                     "tokens_per_s": size["batch"] * size["length"] / seconds[model],
                     "baseline_tokens_per_s": size["batch"] * size["length"] / seconds[baseline]})
    return rows


def study_fixed_cost(log) -> dict | None:
    """``python -m study.bench --fixed-cost`` in its own process (``nmt`` never imports the study
    platform): None where the study package is not installed."""
    import importlib.util
    import subprocess

    if importlib.util.find_spec("study") is None or importlib.util.find_spec("study.bench") is None:
        return None
    result = subprocess.run([sys.executable, "-m", "study.bench", "--fixed-cost", "--json"], capture_output=True,
                            text=True, check=False)
    if result.returncode != 0:
        log(f"  study fixed cost: not measured, python -m study.bench --fixed-cost failed: "
            f"{(result.stderr.strip().splitlines() or ['no output'])[-1]}")
        return None
    return json.loads(result.stdout.strip().splitlines()[-1])


def target_table(sizes: list[dict], decoding: list[dict] | None, fixed_cost: dict | None, device: torch.device,
                 repeats: int, log) -> list[dict]:
    """Every speed target with its ratio measured in this run: met or missed."""
    rows = []
    for size in sizes:
        rows += training_targets(size, device, repeats)
    for row in decoding or []:
        rows.append({"target": "beam-5 words/s / the search that kept finished sentences",
                     "hidden": row["hidden"], "vocab": row["vocab"], "ratio": row["speedup"], "wanted": BEAM_TARGET,
                     "bound": ">=", "met": row["speedup"] >= BEAM_TARGET})
    if fixed_cost is not None:
        ratio = fixed_cost["fixed_seconds"] / FIXED_COST_BEFORE
        rows.append({"target": f"study fixed cost / {FIXED_COST_BEFORE:.0f} s before", "ratio": ratio,
                     "wanted": FIXED_COST_TARGET, "bound": "<=", "met": ratio <= FIXED_COST_TARGET,
                     "seconds": fixed_cost})
    for row in rows:
        where = f"H={row['hidden']}, vocabulary {row['vocab']:,}" if "hidden" in row else "this machine"
        if "batch" in row:
            where += f", {row['batch']} x {row['length']} tokens"
        log(f"  {row['target']:58s} x{row['ratio']:.2f}  (wanted {row['bound']} {row['wanted']:.1f}: "
            f"{'met' if row['met'] else 'MISSED'})  {where}")
    if decoding is None:
        log("  beam-5 decoding: not measured (--skip decoding)")
    if fixed_cost is None:
        log("  study fixed cost: not measured (--skip study, no study package installed, or its run failed)")
    else:
        log(f"  study fixed cost {fixed_cost['fixed_seconds']:.1f} s: {fixed_cost['before_trials_seconds']:.1f} s "
            f"before the trials, {fixed_cost['after_trials_seconds']:.1f} s after (python -m study.bench --fixed-cost)")
    return rows


# --- command line -------------------------------------------------------------------


def decode_size(text: str) -> tuple[int, int]:
    """``H:V`` -> (hidden size, vocabulary)."""
    try:
        hidden, vocab = (int(part) for part in text.split(":"))
    except ValueError:
        raise UserError(f"--decode-sizes {text}: give hidden size and vocabulary as H:V, e.g. 256:8000") from None
    if hidden < 1 or vocab < 5:  # ids 0-3 are PAD, UNK, BOS, EOS
        raise UserError(f"--decode-sizes {text}: needs H >= 1 and V >= 5")
    return hidden, vocab


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=program_name("nmt.bench"),
        description="Speed of every recurrent unit as ratios to torch.nn.LSTM measured in the same run, "
                    "achieved GFLOP/s against this machine's measured GEMM peak, and whole-model training "
                    "and decoding speed.",
        epilog="Example: python -m nmt.bench --hidden 512 --threads 1 --json > bench.json")
    parser.add_argument("--hidden", type=int, nargs="+", default=[512, 1024], help="cell sizes H = D (default 512 1024)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="CPU thread counts (default 1 2)")
    parser.add_argument("--batch", type=int, default=64, help="batch size B (default 64)")
    parser.add_argument("--length", type=int, default=30, help="sequence length T (default 30)")
    names = bench_cells_names()
    parser.add_argument("--cells", nargs="+", default=names, choices=names, metavar="CELL",
                        help=f"cells to measure (default: all of {', '.join(names)})")
    parser.add_argument("--model-size", type=int, default=64,
                        help="hidden and embedding size of the whole models (default 64, as in the studies)")
    parser.add_argument("--vocab", type=int, default=800,
                        help="vocabulary of the whole models (default 800, as in the studies)")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5], help="decoding beams (default 1 5)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed rounds (cells: interleaved), the fastest counts (default 5)")
    parser.add_argument("--decode-sizes", nargs="+", metavar="H:V",
                        help="hidden size and vocabulary of the decoding part's models (default: --model-size and "
                             "--vocab, and 4x the size with 10x the vocabulary: 64:800 256:8000)")
    parser.add_argument("--decode-sentences", type=int, default=512,
                        help="test-set sentences of the decoding part (default 512)")
    parser.add_argument("--target-sizes", nargs="+", metavar="H:V:BxT",
                        help="sizes of the targets' models and batches (default: --model-size, --vocab, --batch x "
                             "--length, and H=256 with 8,000 pieces on batches of Multi30k's length, 128 sentences "
                             "of 16 pieces: the 2,000-token batches of the Multi30k studies)")
    parser.add_argument("--skip", choices=("cells", "models", "decoding", "targets", "study"), action="append",
                        default=[], help="leave a part out (study: the study's fixed cost, a run of python -m "
                                         "study.bench --fixed-cost, in the targets part)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="where to measure (default: cuda when present)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for flag, values in (("--hidden", args.hidden), ("--threads", args.threads), ("--beams", args.beams),
                         ("--batch", [args.batch]), ("--length", [args.length]), ("--repeats", [args.repeats]),
                         ("--decode-sentences", [args.decode_sentences])):
        if any(v < 1 for v in values):
            raise UserError(f"{flag} {' '.join(map(str, values))}: every value must be >= 1")
    decode_sizes = ([decode_size(text) for text in args.decode_sizes] if args.decode_sizes else
                    [(args.model_size, args.vocab), (4 * args.model_size, 10 * args.vocab)])
    target_sizes = ([target_size(text) for text in args.target_sizes] if args.target_sizes else
                    [{"hidden": args.model_size, "vocab": args.vocab, "batch": args.batch, "length": args.length},
                     {"hidden": 256, "vocab": 8000, "batch": 128, "length": 16}])
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device here; use --device cpu")
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          args.device if args.device != "auto" else "cpu")
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads max)"
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (lambda line: print(line, flush=True))
    log(f"device: {device.type} - {where}; torch {torch.__version__}; B={args.batch}, T={args.length}")
    report = {"device": device.type, "device_name": where, "torch": torch.__version__, "batch": args.batch,
              "length": args.length}
    if "cells" not in args.skip:
        threads = args.threads if device.type == "cpu" else [torch.get_num_threads()]
        report["cells"] = cell_table(args.hidden, threads, args.batch, args.length, device, args.repeats,
                                     args.cells, log)
    if "models" not in args.skip:
        if device.type == "cpu":
            torch.set_num_threads(args.threads[0])
        log(f"models: size {args.model_size}, vocabulary {args.vocab}, {torch.get_num_threads()} thread(s)")
        report["models"] = model_table(args.model_size, args.batch, args.length, args.vocab, device, args.repeats,
                                       args.beams, log)
    if "decoding" not in args.skip:
        if device.type == "cpu":
            torch.set_num_threads(args.threads[0])
        log(f"decoding: beam 5, {args.decode_sentences} sentences in length-sorted batches, the search vs its "
            f"baseline that kept finished sentences in the batch, {torch.get_num_threads()} thread(s)")
        report["decoding"] = decoding_table(decode_sizes, args.decode_sentences, device, args.repeats, log)
    if "targets" not in args.skip:
        if device.type == "cpu":
            torch.set_num_threads(args.threads[0])
        log(f"targets: ratios measured in this run, {torch.get_num_threads()} thread(s)")
        fixed_cost = None if "study" in args.skip else study_fixed_cost(log)
        report["targets"] = target_table(target_sizes, report.get("decoding"), fixed_cost, device, args.repeats,
                                         log)
    if args.json:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
