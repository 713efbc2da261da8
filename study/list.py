"""``python -m study.list``: the built-in studies, their size and budget, and which results of
each exist; ``python -m study.list NAME``: where each trial of one study stands
(``study.trial_progress``)."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from nmt.cli import program_name, run_main
from study.record_validation import BadRecord, check_mapping, read_json, read_text
from study.stored import STATE_FILE, is_smoke_run

# where results are looked for when no --results is given: a user's runs, their smoke checks,
# the committed reference results
DEFAULT_PLACES = (Path("results"), Path("results") / "smoke", Path("results") / "reference")
REFERENCE_FOLDER = "multi30k"  # search_spaces/multi30k/: the study files of the converged reference runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=program_name("study.list"),
        description="List the built-in studies (search_spaces/*.yaml): kind, number of trials, budget per "
                    "trial, which results exist (finished or running, and where) and what each reproduces. "
                    "With a study's NAME: where each of its trials stands (finished, part-way at which epoch, "
                    "not started), its best epoch, best validation BLEU, test BLEU and time so far.")
    parser.add_argument("study", nargs="?", metavar="NAME",
                        help="a study's name, multi30k/NAME or study file: show its trials instead")
    parser.add_argument("--results", type=Path, action="append", metavar="DIR",
                        help="look for results in DIR (repeatable; default: results, results/smoke, "
                             "results/reference)")
    args = parser.parse_args(argv)
    from study.spec import SPACES_DIR, builtin_studies, count_trials, load_study

    places = args.results or list(DEFAULT_PLACES)
    if args.study:
        return show_trials(places, args.study)
    studies = [(name, name) for name in builtin_studies()]
    # the converged reference studies ship as files run by path; listed by it, after the built-ins
    studies += [(f"{REFERENCE_FOLDER}/{path.stem}", str(path))
                for path in sorted((SPACES_DIR / REFERENCE_FOLDER).glob("*.yaml"))]
    lines = [("study", "kind", "trials", "budget per trial", "results", "description")]
    for shown, argument in studies:
        spec = load_study(argument)
        found = [f"{state} in {place}" for place in places if (state := results_state(place, spec.name))]
        lines.append((shown, spec.kind, f"{count_trials(spec)} ({shape(spec)})", budget(spec),
                      "; ".join(found) or "none", spec.fields.description))
    widths = [max(len(line[i]) for line in lines) for i in range(5)]
    for line in lines:
        print("  ".join(f"{cell:<{width}}" for cell, width in zip(line, widths)) + "  " + line[5])
    print(f"\nrun one with: python -m study.run NAME  (--dry-run estimates its time first; --smoke is a "
          f"2-minute check)\n{REFERENCE_FOLDER}/NAME: the converged reference runs on Multi30k, from the repository "
          f"root: python -m study.run search_spaces/{REFERENCE_FOLDER}/NAME.yaml --results results/reference "
          f"(hours each; --resume continues one; study.table and --reuse-from take the bare NAME)\n"
          f"rebuild a table with: python -m study.table NAME [--results DIR]\n"
          f"where each trial of one stands: python -m study.list NAME [--results DIR]")
    return 0


def show_trials(places: list[Path], argument: str) -> int:
    from study.trial_progress import require_stored, study_name, trial_progress

    name = study_name(argument)
    for number, place in enumerate(require_stored(places, name)):
        lines = trial_progress(place, name, running=driver_alive(place, name))  # a bad record stops before output
        print(("\n" if number else "") + f"{name} in {place}: {results_state(place, name)}")
        print("\n".join(lines))
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
        if train.get("min_epochs"):
            limits.append(f"not before epoch {train['min_epochs']}")
    return ", ".join(limits)


def results_state(place: Path, name: str) -> str | None:
    """"finished (24 trials)", "running (3/36 trials done)", "stopped (3/36 trials done)", "smoke
    check" or None: what ``place`` holds of the study, read from its state file, trial records and
    lock file without loading or locking anything."""
    study_dir = place / name
    path = study_dir / STATE_FILE
    if not path.is_file():
        return None
    try:  # read as input: a link, a FIFO or a damaged record is said, never followed, waited on or trusted
        state = check_mapping(read_json(path), str(path))
        if is_smoke_run(state):
            return "smoke check"
    except BadRecord:
        return "unreadable study.json"
    if state.get("status") == "complete":
        try:
            return f"finished ({len((read_text(study_dir / 'trials.jsonl') or '').splitlines())} trials)"
        except BadRecord:
            return "finished (unreadable trials.jsonl)"
    from study.results import experiment_dir
    from study.spec import count_trials, spec_from_dict

    # finished/<key>/ only: staged copies (<key>.partial) hold a metrics.json before they are complete
    done = sum(1 for path in (experiment_dir(place, name) / "finished").glob("*/metrics.json")
               if "." not in path.parent.name)
    activity = "running" if driver_alive(place, name) else "stopped"
    try:
        total = count_trials(spec_from_dict(state["spec"], source=str(study_dir / "study.json")))
    except Exception:  # a state file of an older version: the count of finished trials still helps
        return f"{activity} ({done} trials done)"
    return f"{activity} ({done}/{total} trials done)"


def driver_alive(place: Path, name: str) -> bool:
    """Whether the driver named in the study's lock file is a live process of this machine. The
    lock file is only read: taking the lock, even for a moment, could refuse a driver starting."""
    try:
        holder = check_mapping(read_json(place / f".{name}.lock"), "lock file")
        pid = int(holder["pid"])
    except (BadRecord, ValueError, TypeError, KeyError):
        return False
    if pid <= 0:  # os.kill would signal a process group, not a driver
        return False
    if holder.get("host") not in (None, socket.gethostname()):
        return True  # a driver on another machine of a shared file system: its word is all there is
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


if __name__ == "__main__":
    sys.exit(run_main(main))
