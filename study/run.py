"""``python -m study.run NAME``: run a whole study (ablation, grid or Optuna search) on Ray Tune,
track it in MLflow and export paper-style tables to results/NAME/."""

from __future__ import annotations

import argparse
import shlex
import sys

from nmt.cli import command_parser, exit_without_teardown, run_main
from study.spec.options import add_arguments, from_arguments


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "study.run",
        description="Run a named study from search_spaces/ (or a study .yaml file): every configuration and "
                    "seed is a Ray Tune trial of the nmt core, tracked in MLflow; the tables and plots go to "
                    "results/NAME/. python -m study.list shows the built-in studies.",
        epilog="Examples: python -m study.run ablation_srnmt | python -m study.run cells --smoke | "
               "python -m study.run depth_srnmt --data-dir ../shared/data/multi30k --langs en-de --seeds 2")
    add_arguments(parser)  # every option of a run, from its one declaration (study.spec.options)
    # what the command does with those options, not options of the run: check and estimate, or run
    command = parser.add_argument_group("This command")
    command.add_argument("--dry-run", action="store_true",
                         help="show the rows, trials, budget per trial and an estimate of the total time (from a few "
                              "timed training steps of each row's model on this machine; with --resume or --extend, of "
                              "what a grid or ablation study has left to train); train and write nothing")
    command.add_argument("--debug", action="store_true", help="show tracebacks for bad input")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # after parsing: --help and a bad argument answer before Ray, torch and the study load
    from study.api import run_request

    typed = argv if argv is not None else sys.argv[1:]
    options = from_arguments(args, command="python -m study.run " + " ".join(shlex.quote(a) for a in typed))
    return run_request(options, dry_run=args.dry_run)


if __name__ == "__main__":
    exit_without_teardown(run_main(main))
