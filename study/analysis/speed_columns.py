"""The table's speed columns: the trials' own timings, or those of ``speed.json`` when
``python -m study.speed`` timed every row in one pass; and that pass's rounds, the samples a claim on
a timing is judged from (``study.analysis.claims``)."""

from __future__ import annotations

import math
from pathlib import Path

from nmt.errors import UserError
from study.store.record_validation import read_json

SPEED_FILE = "speed.json"
SPEED_METRICS = ("train_tokens_per_s", "decode_words_per_s")
ROUNDS = "_rounds"  # a row's key for a speed's every round: train_tokens_per_s_rounds, ...


TRIAL_TIMINGS_NOTE = ("train tok/s and decode w/s: the trials' own timings (mean over seeds), taken while they "
                      "trained, so they also measure what else the machine ran then; python -m study.speed NAME "
                      "times every row in one pass.")


def read_speed(study_dir: Path) -> dict | None:
    """The study's timing pass (``speed.json``), or None when it has none."""
    path = study_dir / SPEED_FILE
    speed = read_json(path, f"restore it, or time the study again with python -m study.speed {study_dir.name}")
    if speed is None:
        return None
    try:
        missing = [key for key in ("date", "machine", "threads", "repeats", "rows") if key not in speed]
        if missing:
            raise KeyError(", ".join(missing))
        for key in ("repeats", "threads"):
            if not _count(speed[key]):
                raise ValueError(f"{key} {speed[key]!r}: a whole number, at least 1")
        labels = [row["label"] for row in speed["rows"]]
        if len(set(map(str, labels))) != len(labels):
            raise ValueError("a row is timed twice: " + ", ".join(sorted({str(x) for x in labels if labels.count(x) > 1})))
        for row in speed["rows"]:
            _check_row(row, speed["repeats"])
    except (ValueError, KeyError, TypeError) as err:
        raise UserError(f"{path}: not a timing pass of python -m study.speed ({type(err).__name__}: {err}); "
                        f"delete it or run python -m study.speed {study_dir.name} again") from None
    return speed


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _speed(value) -> bool:
    """A speed as the pass writes it: a positive finite number (not a bool, which JSON's true would read as)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _check_row(row: dict, repeats: int) -> None:
    """A row of the pass: a label, two positive speeds, and, where the pass kept them, each speed's ``repeats``
    rounds, the fastest of which is the speed."""
    if not isinstance(row["label"], str) or not all(_speed(row[key]) for key in SPEED_METRICS):
        raise ValueError(f"row {row!r}: a label and two speeds expected")
    for metric in (metric for metric in SPEED_METRICS if metric + ROUNDS in row):
        rounds = row[metric + ROUNDS]
        if not isinstance(rounds, list) or len(rounds) != repeats or not all(_speed(value) for value in rounds):
            raise ValueError(f"row {row['label']!r}: {metric + ROUNDS} is not {repeats} speeds (its repeats)")
        if not math.isclose(max(rounds), row[metric], rel_tol=1e-9):
            raise ValueError(f"row {row['label']!r}: {metric} {row[metric]} is not the fastest of its rounds")


def speed_note(speed: dict, untimed: list[str]) -> str:
    """The table's note on where its speed columns come from."""
    threads = f"{speed['threads']} thread" + ("s" if speed["threads"] != 1 else "")
    rounds = "one round" if speed["repeats"] == 1 else f"fastest of {speed['repeats']} interleaved rounds"
    note = (f"train tok/s and decode w/s: one timing pass of every row (python -m study.speed, {speed['date']}, "
            f"{speed['machine']}, {threads}, {rounds}), not the trials' own timings.")
    if untimed:
        note += f" Not in that pass (run it again): {', '.join(untimed)}."
    return note


def with_speed(rows, speed: dict | None):
    """The table's rows with the timing pass's speeds (rows it lacks: none) and its note; without a
    pass, the trials' own speeds with a note that says so."""
    rows = rows.copy()
    if speed is None:
        rows.attrs["speed_note"] = TRIAL_TIMINGS_NOTE
        return rows
    timed = {row["label"]: row for row in speed["rows"]}
    rows["train_tokens_per_s"] = [float(timed[label]["train_tokens_per_s"]) if label in timed else math.nan
                                  for label in rows["label"]]
    rows["decode_words_per_s"] = [float(timed[label]["decode_words_per_s"]) if label in timed else math.nan
                                  for label in rows["label"]]
    rows.attrs["speed_note"] = speed_note(speed, [label for label in rows["label"] if label not in timed])
    return rows


def pass_rounds(speed: dict, metric: str) -> dict[str, tuple[list[float], str]]:
    """Row label -> (the pass's speed of ``metric`` in each timed round, the device it ran on); a pass
    written before passes kept their rounds has none for any row."""
    return {row["label"]: ([float(value) for value in row.get(metric + ROUNDS, [])], str(row.get("device", "cpu")))
            for row in speed["rows"]}


def pass_machine(speed: dict) -> str:
    """The CPU (or GPU) the pass timed on, as the trial records name CPUs where the pass recorded it."""
    return str(speed.get("cpu") or speed["machine"])
