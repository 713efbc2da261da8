"""``python -m study.list``: the built-in studies, their size and budget, and which results of
each exist."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from nmt.cli import program_name, run_main
from study.stored import STATE_FILE, is_smoke_run

# where results are looked for when no --results is given: a user's runs, their smoke checks,
# the committed reference results
DEFAULT_PLACES = (Path("results"), Path("results") / "smoke", Path("results") / "reference")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=program_name("study.list"),
        description="List the built-in studies (search_spaces/*.yaml): kind, number of trials, budget per "
                    "trial, which results exist (finished or running, and where) and what each reproduces.")
    parser.add_argument("--results", type=Path, action="append", metavar="DIR",
                        help="look for results in DIR (repeatable; default: results, results/smoke, "
                             "results/reference)")
    args = parser.parse_args(argv)
    from study.spec import builtin_studies, count_trials, load_study

    places = args.results or list(DEFAULT_PLACES)
    lines = [("study", "kind", "trials", "budget per trial", "results", "description")]
    for name in builtin_studies():
        spec = load_study(name)
        found = [f"{state} in {place}" for place in places if (state := results_state(place, name))]
        lines.append((name, spec.kind, f"{count_trials(spec)} ({shape(spec)})", budget(spec),
                      "; ".join(found) or "none", spec.fields.description))
    widths = [max(len(line[i]) for line in lines) for i in range(5)]
    for line in lines:
        print("  ".join(f"{cell:<{width}}" for cell, width in zip(line, widths)) + "  " + line[5])
    print("\nrun one with: python -m study.run NAME  (--dry-run estimates its time first; --smoke is a "
          "2-minute check)\nrebuild a table with: python -m study.table NAME [--results DIR]")
    return 0


def shape(spec) -> str:
    """"8 rows x 3 seeds" or "10 samples"."""
    from study.spec import expand

    f = spec.fields
    if f.search is not None:
        return f"{f.search.num_samples} samples"
    return f"{len({t.label for t in expand(spec)})} rows x {f.seeds} seed{'s' if f.seeds > 1 else ''}"


def budget(spec) -> str:
    """"12 epochs, patience 3" and the trial budget's other limits."""
    train = spec.base_tree()["train"]
    limits = [f"{train.get('max_epochs', 10)} epochs"]
    limits += [f"{train[k]} {unit}" for k, unit in (("max_steps", "steps"), ("max_tokens", "tokens")) if train.get(k)]
    if train.get("patience"):
        limits.append(f"patience {train['patience']}")
    return ", ".join(limits)


def results_state(place: Path, name: str) -> str | None:
    """"finished (24 trials)", "running (3/36 trials)", "smoke check" or None: what ``place``
    holds of the study, read from its state file and trial records without loading anything."""
    study_dir = place / name
    path = study_dir / STATE_FILE
    if not path.is_file():
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        if is_smoke_run(state):
            return "smoke check"
        if state.get("status") == "complete":
            saved = study_dir / "trials.jsonl"
            count = len(saved.read_text(encoding="utf-8").splitlines()) if saved.is_file() else 0
            return f"finished ({count} trials)"
    except (OSError, ValueError, AttributeError):  # not JSON, not UTF-8, not the shape a run writes
        return "unreadable study.json"
    from study.results import experiment_dir
    from study.spec import count_trials, spec_from_dict

    done = sum(1 for path in (experiment_dir(place, name) / "finished").glob("*/metrics.json"))
    try:
        total = count_trials(spec_from_dict(state["spec"], source=str(study_dir / "study.json")))
    except Exception:  # a state file of an older version: the count of finished trials still helps
        return f"running ({done} trials done)"
    return f"running ({done}/{total} trials)"


if __name__ == "__main__":
    sys.exit(run_main(main))
