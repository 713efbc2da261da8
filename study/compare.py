"""``python -m study.compare A B [C ...]``: one table and one bar figure across studies (or one
study's rows against another of its rows); the work is ``study.analysis.comparison``."""

from __future__ import annotations

import sys
from pathlib import Path

from nmt.cli import command_parser, run_main


def main(argv: list[str] | None = None) -> int:
    parser = command_parser(
        "study.compare",
        description="One table (Markdown, CSV, LaTeX) and one bar figure over the rows of several studies, with "
                    "the significance columns of a study's own table (Δ, bootstrap interval, p) measured against one "
                    "reference row. One study with --reference measures its rows against another of its own rows. "
                    "Reads stored results only; trains nothing.",
        epilog="examples: python -m study.compare results/reference/ablation_srnmt results/reference/depth_srnmt "
               "(writes results/compare/ablation_srnmt_vs_depth_srnmt/); python -m study.compare ablation_srnmt "
               "--reference '- Highway' (writes results/compare/ablation_srnmt_against_highway/)")
    parser.add_argument("sources", nargs="+", metavar="STUDY",
                        help="a study name (its directory under --results) or a study's result directory; two or "
                             "more, or one with --reference")
    parser.add_argument("--results", type=Path, default=Path("results"),
                        help="results directory: where study names are found and the comparison is written "
                             "(default: ./results)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory, inside --results (default: RESULTS/compare/A_vs_B..., or "
                             "RESULTS/compare/A_against_LABEL for one study)")
    parser.add_argument("--reference", default=None, metavar="LABEL",
                        help="the row every Δ and p-value is measured against, as labelled in the combined table "
                             "(default: the first study's reference row)")
    parser.add_argument("--title", default=None, help="table and figure title")
    parser.add_argument("--storage", metavar="URI", default=None,
                        help="read the studies from the object store their runs used (study.run --storage "
                             "s3://BUCKET/PREFIX); they are copied into --results first")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for bad input")
    args = parser.parse_args(argv)
    # after parsing: --help and a bad argument answer before pandas and matplotlib load
    from study.api import compare_studies

    comparison, outputs = compare_studies(args.sources, args.results, out=args.out, reference=args.reference,
                                          title=args.title, storage=args.storage)
    print(comparison.markdown())
    print("wrote " + ", ".join(str(p) for p in outputs))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
