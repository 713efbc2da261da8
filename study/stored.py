"""A finished study read back from its result directory, for what is built after the run
(``study.compare``, ``study.report``): its state (study.json), effective spec, trial records and
test references, and the table its own run made from them.

The records are the ones ``python -m study.table`` reads: the trial store ``<results>/ray/NAME``
when the directory is a local run's, else the copy kept next to the tables (``trials.jsonl`` and
``hyps/``, which is all committed reference results have). Nothing here imports Ray.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from nmt.errors import UserError
from study.results import TRIALS_FILE, experiment_dir, load_records, load_saved_records
from study.spec import StudySpec, expand, spec_from_dict
from study.speed import read_speed, with_speed
from study.tables import StudyTable, build_table

STATE_FILE = "study.json"  # a study's state (study.runner writes it); here because this module needs no Ray
REFERENCES_FILE = "test.ref"


@dataclass(frozen=True)
class TableLayout:
    """What a study's table is made of besides its records."""

    title: str
    reference: str | None  # the label of the row every Δ and p-value is measured against
    row_order: list[str] | None  # None: the order the records' rows give (search studies)
    planned_seeds: dict[str, int] | None = None  # trials each row will have; None for search studies


def table_layout(spec: StudySpec) -> TableLayout:
    """Title, reference row, row order and planned trials per row of a study's table, as its run writes it."""
    title = spec.fields.table.title or spec.fields.description
    reference = spec.fields.table.reference if spec.kind != "search" else None
    if spec.kind == "ablation" and reference is None:
        reference = "full model"
    if spec.kind == "search":
        return TableLayout(title, reference, None)
    trials = sorted(expand(spec), key=lambda t: t.row)
    return TableLayout(title, reference, list(dict.fromkeys(t.label for t in trials)),
                       dict(Counter(t.label for t in trials)))


@dataclass
class StoredStudy:
    name: str
    directory: Path
    state: dict  # study.json
    spec: StudySpec
    records: list[dict]
    references: list[str] | None  # the test set's reference translations (test.ref); None when not kept

    @property
    def layout(self) -> TableLayout:
        return table_layout(self.spec)

    def table(self) -> StudyTable:
        """The study's own table, significance columns included (what its table.md shows)."""
        layout = self.layout
        table = build_table(self.records, layout.title, layout.reference, self.references, layout.row_order,
                            layout.planned_seeds)
        table.rows = with_speed(table.rows, read_speed(self.directory))
        return table

    def row_labels(self) -> list[str]:
        """The table's rows in order (no significance test is run for this)."""
        layout = self.layout
        return list(build_table(self.records, layout.title, None, None, layout.row_order).rows["label"])


def is_smoke_run(state: dict | None) -> bool:
    """Whether stored results come from a --smoke run (a check, which the next run replaces)."""
    return bool(state and (state.get("request") or {}).get("smoke"))


def read_state(study_dir: Path) -> dict | None:
    """study.json of a study's result directory, None where there is none; a one-line error
    when it cannot be read."""
    path = study_dir / STATE_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{path}: unreadable study state ({err}); delete it, or run the study again "
                        f"with --fresh") from None


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
    there is none."""
    state = read_state(study_dir)
    path = study_dir / STATE_FILE
    if state is None:
        raise UserError(f"{study_dir}: no {STATE_FILE}, so not the result directory of a study "
                        f"(python -m study.run NAME writes results/NAME/)")
    if not isinstance(state, dict) or not isinstance(state.get("spec"), dict):
        raise UserError(f"{path}: not a study state (no 'spec' mapping); rerun the study to rewrite it")
    return state


def load_stored_study(study_dir: Path) -> StoredStudy:
    """The study stored in ``study_dir`` (results/NAME/); one-line errors for a directory that
    is not a study's or holds no trial records."""
    study_dir = study_dir.resolve()
    if not study_dir.is_dir():
        raise UserError(f"{study_dir}: no such directory")
    state = read_study_state(study_dir)
    spec = spec_from_dict(state["spec"], source=str(study_dir / STATE_FILE))
    name = study_dir.name
    store = experiment_dir(study_dir.parent, name)
    records = load_records(study_dir.parent, name) if store.is_dir() else load_saved_records(study_dir)
    if not records:
        raise UserError(f"{study_dir}: no trial records (neither {TRIALS_FILE} nor a trial store {store}); "
                        f"python -m study.table {name} writes them once the study has trials")
    references_path = study_dir / REFERENCES_FILE
    references = references_path.read_text(encoding="utf-8").splitlines() if references_path.is_file() else None
    return StoredStudy(name, study_dir, state, spec, records, references)
