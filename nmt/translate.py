"""Translate text with a trained model:
``python -m nmt.translate --checkpoint DIR [--beam K] < src.txt > hyp.txt``.

Reads one sentence per line from stdin (or --input), writes detokenised
translations in the same order to stdout (or --output).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nmt.cli import run_main
from nmt.errors import UserError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt.translate",
                                     description="Translate stdin with a checkpoint written by nmt.train.")
    parser.add_argument("--checkpoint", type=Path, required=True,
                        help="a run's checkpoint directory (e.g. runs/default/checkpoint) or the run directory")
    parser.add_argument("--beam", type=int, help="beam size (default: the run's decode.beam; 1 = greedy)")
    parser.add_argument("--length-penalty", type=float, help="alpha in log p / length**alpha (default: the run's)")
    parser.add_argument("--batch-size", type=int, help="sentences per batch (default: the run's decode.batch_size)")
    parser.add_argument("--input", type=Path, help="read sentences from this file instead of stdin")
    parser.add_argument("--output", type=Path, help="write translations to this file instead of stdout")
    parser.add_argument("--threads", type=int, help="torch threads")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for bad input")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.beam is not None and args.beam < 1:
        raise UserError(f"--beam {args.beam}: must be >= 1")
    if args.batch_size is not None and args.batch_size < 1:
        raise UserError(f"--batch-size {args.batch_size}: must be >= 1")
    directory = args.checkpoint
    if (directory / "checkpoint").is_dir():
        directory = directory / "checkpoint"
    if args.input is not None and not args.input.is_file():
        raise UserError(f"--input {args.input}: file not found")

    import torch

    from nmt.checkpoint import load_for_inference
    from nmt.translator import translate

    if args.threads:
        torch.set_num_threads(args.threads)
    model, cfg, src_vocab, tgt_vocab = load_for_inference(directory)
    if args.length_penalty is not None:
        cfg.decode.length_penalty = args.length_penalty
    if args.batch_size is not None:
        cfg.decode.batch_size = args.batch_size
    try:
        text = args.input.read_text(encoding="utf-8") if args.input else sys.stdin.read()
    except UnicodeDecodeError as err:
        raise UserError(f"{args.input or 'stdin'}: input is not valid UTF-8 (byte at {err.start}); "
                        "convert it to UTF-8") from None
    lines = text.splitlines()
    sources = src_vocab.encode_many(lines)
    result = translate(model, sources, tgt_vocab, cfg.decode, beam=args.beam)
    out = "".join(line + "\n" for line in result.texts)
    if args.output:
        args.output.write_text(out, encoding="utf-8")
    else:
        sys.stdout.write(out)
    print(f"translated {len(lines)} sentences in {result.seconds:.1f}s "
          f"({result.words_per_second:,.0f} words/s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
