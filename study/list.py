"""``python -m study.list``: the built-in studies, their size and budget, and which results of
each exist; ``python -m study.list NAME``: where each trial of one study stands."""

from __future__ import annotations

import sys
from pathlib import Path

from nmt.cli import command_parser, run_main


def main(argv: list[str] | None = None) -> int:
    parser = command_parser(
        "study.list",
        description="List the built-in studies (search_spaces/*.yaml): kind, number of trials, budget per "
                    "trial, which results exist (finished or running, and where) and what each reproduces. "
                    "With a study's NAME: where each of its trials stands (finished, part-way at which epoch, "
                    "not started), its best epoch, best validation BLEU, test BLEU and time so far.")
    parser.add_argument("study", nargs="?", metavar="NAME",
                        help="a study's name, multi30k/NAME or study file: show its trials instead")
    parser.add_argument("--results", type=Path, action="append", metavar="DIR",
                        help="look for results in DIR (repeatable; default: results, results/smoke, "
                             "results/reference)")
    parser.add_argument("--storage", metavar="URI", default=None,
                        help="also list what an object store holds (study.run --storage s3://BUCKET/PREFIX): its "
                             "studies (or NAME) are copied into the first --results directory first")
    args = parser.parse_args(argv)
    # after parsing: --help answers before the study files load
    from study.api import study_listing

    print("\n".join(study_listing(args.study, args.results, storage=args.storage)))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
