"""What ``python -m study.list`` shows: the built-in studies with their size, budget and which
results of each exist (and whether a driver is still running them), and for one study where
each of its trials stands (``study.analysis.progress``)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from study.analysis.progress import require_stored, study_name, trial_progress
from study.spec.expansion import count_trials
from study.spec.loading import builtin_studies, load_study, spec_from_dict
from study.spec.model import SPACES_DIR
from study.spec.summary import budget, shape
from study.store.record_validation import BadRecord, check_mapping, read_json, read_text
from study.store.records import experiment_dir
from study.store.study_state import STATE_FILE, is_smoke_run

# where results are looked for when no --results is given: a user's runs, their smoke checks,
# the committed reference results
DEFAULT_PLACES = (Path("results"), Path("results") / "smoke", Path("results") / "reference")


REFERENCE_FOLDER = "multi30k"  # search_spaces/multi30k/: the study files of the reference runs


def show_trials(places: list[Path] | None, argument: str) -> list[str]:
    """Where each trial of one study stands, in every results directory that holds it."""
    name = study_name(argument)
    lines = []
    for number, place in enumerate(require_stored(places or list(DEFAULT_PLACES), name)):
        progress = trial_progress(place, name, running=driver_alive(place, name))  # a bad record stops before output
        lines += ([""] if number else []) + [f"{name} in {place}: {results_state(place, name)}"] + progress
    return lines


def list_studies(places: list[Path] | None = None) -> list[str]:
    """The built-in studies (and the Multi30k reference study files): kind, trials, budget, which
    results exist in ``places`` and what each reproduces, as printed lines."""
    places = places or list(DEFAULT_PLACES)
    studies = [(name, name) for name in builtin_studies()]
    # the reference studies ship as files run by path; listed by it, after the built-ins
    studies += [(f"{REFERENCE_FOLDER}/{path.stem}", str(path))
                for path in sorted((SPACES_DIR / REFERENCE_FOLDER).glob("*.yaml"))]
    rows = [("study", "kind", "trials", "budget per trial", "results", "description")]
    for shown, argument in studies:
        spec = load_study(argument)
        found = [f"{state} in {place}" for place in places if (state := results_state(place, spec.name))]
        rows.append((shown, spec.kind, f"{count_trials(spec)} ({shape(spec)})", budget(spec),
                     "; ".join(found) or "none", spec.fields.description))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(f"{cell:<{width}}" for cell, width in zip(row, widths)) + "  " + row[5] for row in rows]
    return lines + [f"\nrun one with: python -m study.run NAME  (--dry-run estimates its time first; --smoke is a "
                    f"2-minute check)\n{REFERENCE_FOLDER}/NAME: the reference runs on Multi30k, from the "
                    f"repository root: python -m study.run search_spaces/{REFERENCE_FOLDER}/NAME.yaml --results "
                    f"results/reference (hours each; --resume continues one; study.table and --reuse-from take the "
                    f"bare NAME)\nrebuild a table with: python -m study.table NAME [--results DIR]\n"
                    f"where each trial of one stands: python -m study.list NAME [--results DIR]"]


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
