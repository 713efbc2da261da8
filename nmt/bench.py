"""``python -m nmt.bench``: how fast every recurrent unit runs here, as ratios measured in one run.

Three parts, all on random data of fixed shape (speed does not depend on the values):

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
3. ``--json`` prints everything as one JSON object instead of tables.

Nothing here asserts: the numbers are for people (and CI logs) to read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

import torch
from torch import nn

from nmt.cells import make_cell
from nmt.cli import program_name, run_main
from nmt.config import ModelConfig, config_from_dict
from nmt.data.subword import EOS
from nmt.errors import UserError
from nmt.model import build_model
from nmt.modules.memory_block import MemoryBlock
from nmt.typed_config import apply_overrides
from nmt.units import units



# --- timing -----------------------------------------------------------------------


def best_time(fn: Callable[[], None], repeats: int) -> float:
    """The fastest of ``repeats`` calls after one warm-up (the least disturbed measurement)."""
    return interleaved_fastest({"only": fn}, repeats)["only"]


def interleaved_fastest(calls: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Seconds of the fastest of ``repeats`` calls of each, timed in interleaved rounds after one
    warm-up each: a slow spell of the machine then touches every candidate alike, instead of
    whichever happened to run in it (what the ratios between them need)."""
    for call in calls.values():
        call()
    fastest = dict.fromkeys(calls, float("inf"))
    for _ in range(repeats):
        for name, call in calls.items():
            begin = time.perf_counter()
            call()
            fastest[name] = min(fastest[name], time.perf_counter() - begin)
    return fastest


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


# --- command line -------------------------------------------------------------------


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
    parser.add_argument("--skip", choices=("cells", "models"), action="append", default=[], help="leave a part out")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="where to measure (default: cuda when present)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for flag, values in (("--hidden", args.hidden), ("--threads", args.threads), ("--beams", args.beams),
                         ("--batch", [args.batch]), ("--length", [args.length]), ("--repeats", [args.repeats])):
        if any(v < 1 for v in values):
            raise UserError(f"{flag} {' '.join(map(str, values))}: every value must be >= 1")
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
    if args.json:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
