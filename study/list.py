"""``python -m study.list``: the built-in studies and what each reproduces."""

from __future__ import annotations

import argparse
import sys

from nmt.cli import run_main


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m study.list",
                            description="List the built-in studies (search_spaces/*.yaml) with their "
                                        "size, budget per trial and descriptions.").parse_args(argv)
    from study.spec import builtin_studies, load_study

    names = builtin_studies()
    width = max(len(n) for n in names)
    for name in names:
        spec = load_study(name)
        print(f"{name:<{width}}  {spec.kind:<8}  {size(spec):<28}  {spec.fields.description}")
    print("\nrun one with: python -m study.run NAME  (add --smoke for a 2-minute check)")
    return 0


def size(spec) -> str:
    """"8 rows x 3 seeds, 12 epochs" (or "10 samples, ...") and the trial budget's other limits."""
    from study.spec import expand

    f = spec.fields
    if f.search is not None:
        what = f"{f.search.num_samples} samples"
    else:
        what = f"{len({t.label for t in expand(spec)})} rows x {f.seeds} seed{'s' if f.seeds > 1 else ''}"
    train = spec.base_tree()["train"]
    budget = [f"{train.get('max_epochs', 10)} epochs"]
    budget += [f"{train[k]} {unit}" for k, unit in (("max_steps", "steps"), ("max_tokens", "tokens")) if train.get(k)]
    if train.get("patience"):
        budget.append(f"patience {train['patience']}")
    return f"{what}, {', '.join(budget)}"


if __name__ == "__main__":
    sys.exit(run_main(main))
