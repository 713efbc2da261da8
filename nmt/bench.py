"""``python -m nmt.bench``: how fast every recurrent unit runs here, as ratios measured in one run.

Four parts, on random data (speed does not depend on the values), each in its module of
``nmt.benchmarks``:

1. Cells (``cells``): forward + backward of one unidirectional layer (input GEMM included),
   B x T tokens, D = H, for every cell, each H and thread count. Reported: tokens/s, the
   ratio to ``torch.nn.LSTM`` of the same size measured in the same run, achieved GFLOP/s
   (the weight-matrix FLOPs: 2 per weight element per token, x3 for forward + backward)
   and its fraction of the machine's GEMM peak, also measured in this run (a (B*T x H) @
   (H x 4H) matmul).
2. Models (``models``): training tokens/s (target tokens, forward + backward + Adam) of
   whole models - the ``ablation_srnmt`` and ``cells`` studies' models, an SR-NMT 4L next
   to an LSTM 2L of about the same size, FSMN next to GRU - decode words/s at beam 1 and
   5, and activation memory per target token (the tensors autograd keeps for the backward
   pass; on CUDA also the peak allocated memory).
3. Decoding (``decoding``): beam-5 words/s of the search, which drops finished sentences
   from the batch, next to the baseline that kept them (its old loop, frozen there), over
   the same length-sorted batches of a 512-sentence test set, at the studies' size (H=64,
   vocabulary 800) and at H=256 with 8,000 pieces; medians of interleaved rounds. The GRU
   models have random weights, and each search ends where a trained GRU's would
   (``ScriptedEnds``), so that sentences leave a batch as unevenly as in real use. The
   only assertion here: both give the same translations.
4. Targets (``targets``): each speed target of the project with its ratio measured in this
   run, met or missed - whole-model training tokens/s of SR-NMT 3L and 4L against LSTM 2L,
   ATR and FSMN against GRU (at the studies' size, and at H=256 with 8,000 pieces on
   batches of Multi30k's length), and beam-5 decoding against the old search (part 3).
   The study platform's fixed cost is not measured here: ``python -m study.bench
   --fixed-cost`` reports it (``--skip study`` is still accepted and changes nothing).

``--json`` prints everything as one JSON object instead of tables. Apart from part 3's
check, nothing here asserts: the numbers are for people (and CI logs) to read. This module
is the command line only: the arguments, and one call per part.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from nmt.benchmarks.cells import bench_cells_names, cell_table
from nmt.benchmarks.decoding import decoding_table
from nmt.benchmarks.models import model_table
from nmt.benchmarks.targets import target_table
from nmt.cli import command_parser, run_main
from nmt.errors import UserError


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
    parser = command_parser(
        "nmt.bench",
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
    # "study" left out the study's fixed cost, which nmt.bench no longer runs (python -m study.bench
    # --fixed-cost reports it): still accepted, so that command lines written for it keep working
    parser.add_argument("--skip", choices=("cells", "models", "decoding", "targets", "study"), action="append",
                        default=[], help="leave a part out (study: accepted for old command lines, with a note; the study's "
                                         "fixed cost is python -m study.bench --fixed-cost's)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="where to measure (default: cuda when present)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def checked_arguments(argv: list[str] | None) -> argparse.Namespace:
    """The parsed command line; a count or size below 1 is a one-line error."""
    args = build_parser().parse_args(argv)
    for flag, values in (("--hidden", args.hidden), ("--threads", args.threads), ("--beams", args.beams),
                         ("--batch", [args.batch]), ("--length", [args.length]), ("--repeats", [args.repeats]),
                         ("--decode-sentences", [args.decode_sentences])):
        if any(v < 1 for v in values):
            raise UserError(f"{flag} {' '.join(map(str, values))}: every value must be >= 1")
    return args


def measuring_device(choice: str) -> torch.device:
    """``--device``: cuda when asked for or, with auto, when present; else the CPU."""
    if choice == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device here; use --device cpu")
    return torch.device("cuda" if choice == "auto" and torch.cuda.is_available() else
                        choice if choice != "auto" else "cpu")


def main(argv: list[str] | None = None) -> int:
    args = checked_arguments(argv)
    decode_sizes = ([decode_size(text) for text in args.decode_sizes] if args.decode_sizes else
                    [(args.model_size, args.vocab), (4 * args.model_size, 10 * args.vocab)])
    target_sizes = ([target_size(text) for text in args.target_sizes] if args.target_sizes else
                    [{"hidden": args.model_size, "vocab": args.vocab, "batch": args.batch, "length": args.length},
                     {"hidden": 256, "vocab": 8000, "batch": 128, "length": 16}])
    device = measuring_device(args.device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads max)"
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (lambda line: print(line, flush=True))
    log(f"device: {device.type} - {where}; torch {torch.__version__}; B={args.batch}, T={args.length}")
    if "study" in args.skip:
        print("note: --skip study is no longer needed: nmt.bench does not time the study's fixed cost "
              "(python -m study.bench --fixed-cost does)", file=sys.stderr, flush=True)
    report = {"device": device.type, "device_name": where, "torch": torch.__version__, "batch": args.batch,
              "length": args.length}
    if "cells" not in args.skip:
        threads = args.threads if device.type == "cpu" else [torch.get_num_threads()]
        report["cells"] = cell_table(args.hidden, threads, args.batch, args.length, device, args.repeats,
                                     args.cells, log)
    if device.type == "cpu":  # the later parts run at the first thread count
        torch.set_num_threads(args.threads[0])
    if "models" not in args.skip:
        log(f"models: size {args.model_size}, vocabulary {args.vocab}, {torch.get_num_threads()} thread(s)")
        report["models"] = model_table(args.model_size, args.batch, args.length, args.vocab, device, args.repeats,
                                       args.beams, log)
    if "decoding" not in args.skip:
        log(f"decoding: beam 5, {args.decode_sentences} sentences in length-sorted batches, the search vs its "
            f"baseline that kept finished sentences in the batch, {torch.get_num_threads()} thread(s)")
        report["decoding"] = decoding_table(decode_sizes, args.decode_sentences, device, args.repeats, log)
    if "targets" not in args.skip:
        log(f"targets: ratios measured in this run, {torch.get_num_threads()} thread(s)")
        report["targets"] = target_table(target_sizes, report.get("decoding"), device, args.repeats, log)
    if args.json:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
