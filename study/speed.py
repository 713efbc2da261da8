"""``python -m study.speed NAME``: time every row of a stored study in one pass and rebuild its
tables with those speed columns; the work is ``study.execution.row_timing``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nmt.cli import command_parser, run_main


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give a whole number of at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "study.speed",
        description="Time every row of a stored study on this machine in one pass (training tokens/s and "
                    "beam-search words/s, interleaved rounds), write speed.json beside its tables and rebuild "
                    "them: the table's speed columns and the speed plot then show these numbers instead of "
                    "the timings each trial took under whatever load it met.")
    parser.add_argument("name", help="the study's name (its directory under --results)")
    parser.add_argument("--results", type=Path, default=Path("results"), help="results directory (default: ./results)")
    parser.add_argument("--batches", type=positive, default=8,
                        help="training batches timed per row and round (default 8)")
    parser.add_argument("--sentences", type=positive, default=64,
                        help="test sentences translated per row and round (default 64)")
    parser.add_argument("--repeats", type=positive, default=3,
                        help="timed rounds after one warm-up; the fastest counts (default 3)")
    parser.add_argument("--threads", type=positive, default=1,
                        help="torch threads (default 1, as a trial of a study run with one CPU per trial)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for bad input")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # after parsing: --help and a bad argument answer before torch loads
    from study.api import time_study

    time_study(args.name, args.results, threads=args.threads, batches=args.batches, sentences=args.sentences,
               repeats=args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
