"""``python -m study.list NAME``: where every trial of one study stands - finished, part-way
(and at which epoch), failed or not started - with its best epoch, best validation BLEU, test
BLEU and training time so far. It reads the trial store and the study's state file only, so it
can watch a study while it runs, or show what a stopped or copied study has left to do."""

from __future__ import annotations

import math
from pathlib import Path

from nmt.durations import clock
from nmt.errors import UserError
from study.analysis.tables import STILL_IMPROVING, still_improving
from study.spec.expansion import expand
from study.spec.loading import spec_from_dict
from study.spec.summary import budget
from study.store.ownership import check_real_tree
from study.store.records import experiment_dir, load_records, load_saved_records
from study.store.study_state import read_study_state, study_trials
from study.store.trial_store import TrialStore

HEADER = ("row", "seed", "state", "epochs", "best epoch", "best valid BLEU", "test BLEU", "trial time")


def study_name(argument: str) -> str:
    """The result directory name of a study given by name, ``multi30k/NAME`` or file path (a
    study's name is its file's stem)."""
    path = Path(argument)
    return path.stem if path.suffix in (".yaml", ".yml") else path.name


def trial_progress(place: Path, name: str, running: bool) -> list[str]:
    """The lines that show each trial of study ``name`` stored under ``place``; ``running``:
    whether its driver is alive (an unfinished trial is then in progress, else paused)."""
    check_real_tree(place / name, "study directory")  # read as input: no link is followed out of the results
    check_real_tree(experiment_dir(place, name), "trial store")
    state = read_study_state(place / name)
    spec = spec_from_dict(state["spec"], source=str(place / name / "study.json"))
    # the trial store of the machine that ran it, else the records kept next to its tables (a clone)
    records = (load_records(place, name) if experiment_dir(place, name).is_dir()
               else load_saved_records(place / name))
    records = study_trials(spec, records)[0]  # a stray trial of another config is not one of the study's
    stored = {(r["label"], r["seed"]) for r in records}
    # trials are matched by row and seed, not key: a store written by another code version may
    # hold a trial under an older key that the next run adopts
    waiting = [] if spec.kind == "search" else [t for t in expand(spec) if (t.label, t.seed) not in stored]
    store = TrialStore(experiment_dir(place, name))
    resumable = {r["key"] for r in records if store.resume_point(r["key"]) is not None}
    # a running driver trains a few trials at a time; the other unfinished ones wait their turn
    training = {r["key"] for r in records if running and r["status"] == "running" and store.training(r["key"])}
    lines = [((r["row"], r["seed"]), _line(r, running, r["key"] in resumable, r["key"] in training))
             for r in records]
    not_started: dict[str, list] = {}
    for trial in waiting:
        not_started.setdefault(trial.label, []).append(trial)
    # one line per row for the seeds still to come: a long study's queue is not read seed by seed
    lines += [((group[0].row, group[0].seed), (label, _seeds([t.seed for t in group]), "not started",
                                               *["-"] * (len(HEADER) - 3)))
              for label, group in not_started.items()]
    rows = [line for _, line in sorted(lines, key=lambda pair: pair[0])]
    widths = [max(len(line[i]) for line in [HEADER, *rows]) for i in range(len(HEADER))]
    out = ["  ".join(cell.ljust(width) if i in (0, 2) else cell.rjust(width) for i, (cell, width)
                     in enumerate(zip(line, widths))).rstrip() for line in [HEADER, *rows]]
    return out + _summary(records, waiting, spec, running, resumable, training)


def _seeds(seeds: list[int]) -> str:
    """"1-3" for a run of seeds, else "1, 3"."""
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(str(seed) for seed in seeds)


def _line(record: dict, running: bool, has_checkpoint: bool, training: bool) -> tuple[str, ...]:
    m = record["metrics"]
    status = record["status"]
    epochs = m.get("epochs", m.get("epochs_trained", m.get("epoch")))
    best = m.get("best_epoch")
    if status == "running":
        if training:
            state = "in progress"
        elif running:  # queued by the driver: it continues from its checkpoint, or starts again
            state = "waiting its turn" if has_checkpoint else "waiting, no checkpoint here"
        else:  # committed records carry no checkpoints: on a clone such a trial starts again
            state = "paused (--resume continues it)" if has_checkpoint else "paused, no checkpoint here"
    elif status == "failed":
        state = f"failed: {record.get('error') or 'see trials/<key>/error.txt'}"[:60]
    elif status == "stopped":
        state = "stopped early by the scheduler"
    else:
        state = "finished" + (f" ({m['stop_reason']})" if m.get("stop_reason") else "")
        if status != "ok":
            state += f", {status}"
    best_text = _number(best, "{:.0f}") + (f" {STILL_IMPROVING}" if still_improving(record) else "")
    seconds = _trained_seconds(m)
    return (record["label"], str(record["seed"]), state, _number(epochs, "{:g}"), best_text,
            _number(m.get("best_valid_bleu", m.get("valid_bleu")), "{:.2f}"), _number(m.get("test_bleu"), "{:.2f}"),
            clock(seconds) if seconds is not None else "-")


def _trained_seconds(metrics: dict) -> float | None:
    """A finished trial's time (elapsed_seconds), else the time up to its last epoch (elapsed_s)."""
    seconds = metrics.get("elapsed_seconds", metrics.get("elapsed_s"))
    return float(seconds) if isinstance(seconds, (int, float)) else None


def _number(value, form: str) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        return "-"
    return form.format(value)


def _summary(records: list[dict], waiting: list, spec, running: bool, resumable: set[str],
             training: set[str]) -> list[str]:
    unfinished = [r for r in records if r["status"] == "running"]
    counts = {"finished": sum(r["status"] not in ("running", "failed", "stopped") for r in records),
              "in progress": len(training),
              "waiting" if running else "paused": len(unfinished) - len(training),
              "failed": sum(r["status"] == "failed" for r in records),
              "stopped early": sum(r["status"] == "stopped" for r in records)}
    parts = [f"{count} {what}" for what, count in counts.items() if count or what == "finished"]
    if spec.kind == "search":
        left = max(0, spec.fields.search.num_samples - len(records))
        parts.append(f"{left} sample{'s' if left != 1 else ''} not drawn yet")
    else:
        parts.append(f"{len(waiting)} not started")
    seconds = sum(_trained_seconds(r["metrics"]) or 0.0 for r in records)
    lines = [f"{', '.join(parts)}; trial time so far {clock(seconds)}; budget per trial: {budget(spec)}"]
    if improving := sum(still_improving(r) for r in records):
        lines.append(f"{STILL_IMPROVING} best epoch = last epoch ({improving} trial{'s' if improving > 1 else ''}): "
                     f"still improving when its budget ended, so not converged")
    if any(r["key"] not in resumable | training for r in unfinished):
        lines.append(f"{'waiting' if running else 'paused'}, no checkpoint here: committed records carry none, "
                     f"so {'the driver' if running else '--resume'} trains such a trial from its start")
    return lines


def require_stored(places: list[Path], name: str) -> list[Path]:
    """The places that hold a result directory of study ``name``; a one-line error when none does."""
    found = [place for place in places if (place / name / "study.json").is_file()]
    if not found:
        where = ", ".join(str(place) for place in places)
        raise UserError(f"no results of study {name!r} in {where}: run it first (python -m study.run {name}), "
                        f"or name where it ran with --results DIR")
    return found
