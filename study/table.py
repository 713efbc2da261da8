"""``python -m study.table NAME``: rebuild a study's tables and plots from its stored trial
results (Ray Tune's storage) without training anything."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nmt.cli import command_parser, run_main


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "study.table",
        description="Rebuild results/NAME/ (md, csv, tex, png) from the stored "
                    "trial results of a study run, and print the Markdown table "
                    "(and an ablation's additivity table).")
    parser.add_argument("name", help="the study's name (or its .yaml file)")
    parser.add_argument("--results", type=Path, default=Path("results"), help="results directory (default: ./results)")
    parser.add_argument("--storage", metavar="URI", default=None,
                        help="read the study from the object store its run used (study.run --storage "
                             "s3://BUCKET/PREFIX); it is copied into --results first, nothing is written there")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for bad input")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # after parsing: --help and a bad argument answer before pandas, matplotlib and the spec load
    from study.api import rebuild_tables

    rebuild_tables(args.name, args.results, storage=args.storage)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
