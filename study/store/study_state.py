"""A study's folder: its state (``study.json``, written by ``write_state`` alone), command history and
test references read back, and which stored trial records are the study's own trials. Nothing here
imports Ray."""

from __future__ import annotations

from pathlib import Path

from nmt.errors import ConfigError, UserError
from nmt.fileio import write_json
from study.spec.expansion import expand
from study.spec.model import StudySpec
from study.store.migration import comparable
from study.store.record_validation import BadRecord, check_mapping, check_state, read_json, read_text

STATE_FILE = "study.json"  # a study's state (study.execution.driver writes it); here because this module needs no Ray


REFERENCES_FILE = "test.ref"


def study_trials(spec: StudySpec, records: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the records that are trials of the study, the stored records that are not). A trial
    store can hold trials of another config under a row's label and seed (one that migration
    left where it was, one copied in by hand); a table holds exactly the study's trials: one
    record per label and seed, with that trial's key or a config this version reads as the
    same (study.store.migration.comparable). A search's trials are its own samples: all are kept."""
    if spec.fields.search is not None:
        return records, []
    expected = {(trial.label, trial.seed): trial for trial in expand(spec)}
    kept, left_out, taken = [], [], set()
    # records under their trial's own key first: a stale copy of the same trial never displaces one
    for record in sorted(records, key=lambda r: r["key"] != getattr(expected.get((r["label"], r["seed"])), "key", None)):
        slot = (record["label"], record["seed"])
        trial = expected.get(slot)
        if trial is not None and slot not in taken and (record["key"] == trial.key or _same_trial(record, trial)):
            kept.append(record)
            taken.add(slot)
        else:
            left_out.append(record)
    order = {id(record): index for index, record in enumerate(records)}
    return sorted(kept, key=lambda r: order[id(r)]), sorted(left_out, key=lambda r: order[id(r)])


def _same_trial(record: dict, trial) -> bool:
    try:
        return comparable(record["config"]) == comparable(trial.config)
    except (ConfigError, KeyError, TypeError, ValueError):
        return False


def left_out_note(left_out: list[dict]) -> str:
    """The table's note on the stored trials it does not show."""
    shown = ", ".join(f"{r['key']} ({r['label']} seed {r['seed']})" for r in left_out[:5])
    more = f" and {len(left_out) - 5} more" if len(left_out) > 5 else ""
    return (f"Left out: {len(left_out)} stored trial(s) that are not trials of this study (another config, or a "
            f"second copy of a row's seed): {shown}{more}.")


def is_smoke_run(state: dict | None) -> bool:
    """Whether stored results come from a --smoke run (a check, which the next run replaces)."""
    return bool(state and (state.get("request") or {}).get("smoke"))


def write_state(study_dir: Path, state: dict) -> None:
    study_dir.mkdir(parents=True, exist_ok=True)
    write_json(study_dir / STATE_FILE, state)


def read_state(study_dir: Path) -> dict | None:
    """study.json of a study's result directory, None where there is none; a one-line error
    when it is not a JSON mapping (study.store.record_validation)."""
    path = study_dir / STATE_FILE
    fix = ("move it away and continue with --resume (the trial store is the source of truth), or start over "
           "with --fresh")
    try:
        state = read_json(path)
    except BadRecord as err:
        problem = str(err).removeprefix(f"{path}: ")
        raise BadRecord(f"{path}: unreadable study state ({problem}); {fix}") from None
    return None if state is None else check_mapping(state, str(path), fix)


def command_history(state: dict | None) -> list[str]:
    """The commands that ran a study, oldest first (study.json's ``commands``; a study stored before
    they were kept has its last command only)."""
    state = state or {}
    if isinstance(state.get("commands"), list):
        return [str(command) for command in state["commands"]]
    return [state["command"]] if state.get("command") else []


def with_command(history: list[str], command: str) -> list[str]:
    """The history with this run's command after it; a repeat of the last one (another --resume) is
    not listed twice."""
    return history + [command] if command and (not history or history[-1] != command) else history


def read_study_state(study_dir: Path) -> dict:
    """study.json of a study's result directory, with the study's spec; a one-line error when
    there is none or it is not a study's state."""
    state = read_state(study_dir)
    path = study_dir / STATE_FILE
    if state is None:
        raise UserError(f"{study_dir}: no {STATE_FILE}, so not the result directory of a study "
                        f"(python -m study.run NAME writes results/NAME/)")
    return check_state(state, str(path), "rerun the study with --resume to rewrite it")


def read_references(study_dir: Path) -> list[str] | None:
    """The test set's references kept beside the tables (test.ref), None when not kept."""
    text = read_text(study_dir / REFERENCES_FILE, "restore it, or run the study again with --resume")
    return None if text is None else text.splitlines()
