"""``python -m study.list``: the built-in studies and what each reproduces."""

from __future__ import annotations

import argparse
import sys

from nmt.cli import run_main


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m study.list",
                            description="List the built-in studies (search_spaces/*.yaml) with their "
                                        "descriptions.").parse_args(argv)
    from study.spec import builtin_studies, load_study

    names = builtin_studies()
    width = max(len(n) for n in names)
    for name in names:
        spec = load_study(name)
        print(f"{name:<{width}}  {spec.kind:<8}  {spec.fields.description}")
    print("\nrun one with: python -m study.run NAME  (add --smoke for a 2-minute check)")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
