"""Translate text with a trained model:
``python -m nmt.translate --checkpoint DIR [--beam K] < src.txt > hyp.txt``.

Reads one sentence per line from stdin (or --input), writes detokenised
translations in the same order to stdout (or --output): exactly one output
line per input line, where only ``\\n`` ends a line (a trailing ``\\r`` of
Windows line ends is dropped; other line-breaking characters such as form
feeds or U+2028 inside a line are read as spaces).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nmt.cli import command_parser, run_main
from nmt.errors import UserError
from nmt.numerics import NUMERICS, apply_numerics
from nmt.fileio import write_lines

MAX_BEAM = 1000  # decode.beam's bound (nmt.config)
MAX_LENGTH_PENALTY = 10.0  # decode.length_penalty's bound
DEFAULT_MAX_LEN = 512  # subwords per source line; longer lines are cut (with a warning)
# characters that str.splitlines() would break a line at, other than \n and \r\n
INLINE_BREAKS = str.maketrans({c: " " for c in "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"})


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "nmt.translate",
        description="Translate stdin with a checkpoint written by nmt.train: one "
                    "output line per input line.")
    parser.add_argument("--checkpoint", type=Path, required=True,
                        help="a run's checkpoint directory (e.g. runs/default/checkpoint) or the run directory")
    parser.add_argument("--beam", type=int, help="beam size (default: the run's decode.beam; 1 = greedy)")
    parser.add_argument("--length-penalty", type=float, help="alpha in log p / length**alpha (default: the run's)")
    parser.add_argument("--batch-size", type=int, help="sentences per batch (default: the run's decode.batch_size)")
    parser.add_argument("--max-len", type=int, default=DEFAULT_MAX_LEN,
                        help=f"translate at most this many subwords of a line; longer lines are cut with a "
                             f"warning (default: {DEFAULT_MAX_LEN})")
    parser.add_argument("--input", type=Path, help="read sentences from this file instead of stdin")
    parser.add_argument("--output", type=Path, help="write translations to this file instead of stdout")
    parser.add_argument("--threads", type=int, help="torch threads")
    parser.add_argument("--numerics", choices=NUMERICS,
                        help="portable: the same translations on Intel and AMD CPUs with AVX2; native: the CPU's own "
                             "kernels (default: the run's train.numerics)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for bad input")
    return parser


def read_lines(data: bytes, source: str) -> list[str]:
    """The lines of UTF-8 ``data``: split at ``\\n`` only (see the module docstring)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise UserError(f"{source}: line {line} is not valid UTF-8 (byte {data[err.start]:#04x}); convert the "
                        f"input to UTF-8") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r").translate(INLINE_BREAKS) for line in lines]


def cut_long(sources: list[list[int]], max_len: int) -> list[int]:
    """Cut every source to ``max_len`` subwords in place; the 1-based numbers of the lines cut."""
    cut = []
    for number, ids in enumerate(sources, start=1):
        if len(ids) > max_len:
            del ids[max_len:]
            cut.append(number)
    return cut


def run_numerics(directory: Path) -> str:
    """The run's train.numerics; portable when its config cannot be read (loading it says why)."""
    from nmt.checkpoint import read_config  # loads torch (not yet computing): after the argument checks

    try:
        return read_config(directory).train.numerics
    except UserError:
        return "portable"


def check_output(output: Path) -> None:
    """``--output`` names a regular file to create or replace, in a folder that exists; else one UserError line.
    The translations replace the entry by rename: a link, a FIFO or a device node would be replaced by a
    regular file (as root, /dev/null itself), never written through."""
    if output.is_dir():
        raise UserError(f"--output {output}: is a directory; give a file name")
    if output.is_symlink() or (output.exists() and not output.is_file()):
        kind = "a symbolic link" if output.is_symlink() else "not a regular file (a FIFO, socket or device)"
        raise UserError(f"--output {output}: is {kind}; give the name of a regular file (leave out --output to print "
                        f"the translations)")
    if not output.absolute().parent.is_dir():
        raise UserError(f"--output {output}: folder {output.absolute().parent} does not exist; create it first")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for flag, value in (("--beam", args.beam), ("--batch-size", args.batch_size), ("--threads", args.threads),
                        ("--max-len", args.max_len)):
        if value is not None and value < 1:
            raise UserError(f"{flag} {value}: must be >= 1")
    if args.beam is not None and args.beam > MAX_BEAM:
        raise UserError(f"--beam {args.beam}: at most {MAX_BEAM} (a beam keeps beam x vocabulary scores per sentence; "
                        f"5-10 is usual)")
    if args.length_penalty is not None and not 0.0 <= args.length_penalty <= MAX_LENGTH_PENALTY:
        raise UserError(f"--length-penalty {args.length_penalty}: must be a number from 0 to {MAX_LENGTH_PENALTY:g} "
                        f"(0: no normalisation; 0.6-1.0 is usual)")
    directory = args.checkpoint
    if (directory / "checkpoint").is_dir():
        directory = directory / "checkpoint"
    if args.input is not None and not args.input.is_file():
        raise UserError(f"--input {args.input}: file not found")
    if args.output is not None:
        check_output(args.output)

    numerics = args.numerics or run_numerics(directory)
    applied = apply_numerics(numerics, "--numerics", strict=False)  # False only where torch ran in this process before
    import torch  # torch and the model only after the checks above: --help and bad arguments answer at once

    from nmt.checkpoint import load_for_inference  # the model code (torch): after the checks, as torch
    from nmt.translator import translate  # the search (torch): after the checks, as torch

    if args.threads:
        torch.set_num_threads(args.threads)
    model, cfg, src_vocab, tgt_vocab = load_for_inference(directory)
    if args.length_penalty is not None:
        cfg.decode.length_penalty = args.length_penalty
    if args.batch_size is not None:
        cfg.decode.batch_size = args.batch_size
    data = args.input.read_bytes() if args.input else sys.stdin.buffer.read()
    lines = read_lines(data, str(args.input or "stdin"))
    sources = src_vocab.encode_many(lines)
    cut = cut_long(sources, args.max_len)
    if cut:
        shown = ", ".join(str(n) for n in cut[:5]) + (", ..." if len(cut) > 5 else "")
        print(f"warning: {len(cut)} line(s) longer than {args.max_len} subwords were cut to their first "
              f"{args.max_len} (line {shown}); --max-len raises the limit", file=sys.stderr)
    result = translate(model, sources, tgt_vocab, cfg.decode, beam=args.beam)
    texts = [text.replace("\n", " ") for text in result.texts]
    if args.output:
        write_lines(args.output, texts)
    else:
        sys.stdout.write("".join(text + "\n" for text in texts))
    kernels = "" if applied else f"; with the CPU's own kernels, as this process computed before numerics {numerics} could be set"
    print(f"translated {len(lines)} sentences in {result.seconds:.1f}s "
          f"({result.words_per_second:,.0f} words/s{kernels})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
