"""``python -m study.report NAME``: (re)write a study's self-contained ``report.html`` from its
stored results; the work is ``study.analysis.html_report``."""

from __future__ import annotations

import sys
from pathlib import Path

from nmt.cli import command_parser, run_main


def main(argv: list[str] | None = None) -> int:
    parser = command_parser(
        "study.report",
        description="(Re)write results/NAME/report.html from a study's stored results: one self-contained HTML file "
                    "(table, figures, configuration, data, environment) to send to a colleague. Trains nothing.",
        epilog="example: python -m study.report ablation_srnmt --results results/reference")
    parser.add_argument("name", help="the study's name (its directory under --results)")
    parser.add_argument("--results", type=Path, default=Path("results"), help="results directory (default: ./results)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for bad input")
    args = parser.parse_args(argv)

    # after parsing: --help and bad arguments answer before pandas and matplotlib load
    from study.api import write_report

    print(f"wrote {write_report(args.name, args.results)}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
