"""A finished study read back for analysis: its spec, trial records, references, table and the
layout its exports use."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from nmt.errors import UserError
from study.analysis.curves import load_progress
from study.analysis.numerics_note import numerics_note
from study.analysis.plateau import plateau_by_trial, stopping_note
from study.analysis.speed_columns import read_speed, with_speed
from study.analysis.tables import StudyTable, build_table
from study.spec.expansion import expand
from study.spec.loading import spec_from_dict
from study.spec.model import StudySpec
from study.store.ownership import check_real_tree
from study.store.records import TRIALS_FILE, experiment_dir, load_records, load_saved_records
from study.store.study_state import STATE_FILE, read_references, read_study_state, study_trials


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


def study_table(spec: StudySpec, records: list[dict], references: list[str] | None, timing_pass: dict | None,
                progress) -> StudyTable:
    """A study's table as its run writes it and every reader shows it: the records' rows in the layout's
    order against its reference row, the plateau marks from ``progress`` (the epochs' records; None when
    not kept), the speed columns of ``timing_pass`` (``read_speed``; None without one), and the numerics
    and stopping notes."""
    layout = table_layout(spec)
    metric = spec.metrics[0]
    plateau = plateau_by_trial(progress, metric.name, metric.mode)
    table = build_table(records, layout.title, layout.reference, references, layout.row_order, layout.planned_seeds,
                        plateau)
    table.rows = with_speed(table.rows, timing_pass)
    table.rows.attrs["numerics_note"] = numerics_note(records)
    table.rows.attrs["stopping_note"] = stopping_note(spec)
    return table


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
        return study_table(self.spec, self.records, self.references, read_speed(self.directory),
                           load_progress(self.directory))

    def row_labels(self) -> list[str]:
        """The table's rows in order (no significance test is run for this)."""
        layout = self.layout
        return list(build_table(self.records, layout.title, None, None, layout.row_order).rows["label"])


def load_stored_study(study_dir: Path) -> StoredStudy:
    """The study stored in ``study_dir`` (results/NAME/); one-line errors for a directory that
    is not a study's or holds no trial records."""
    study_dir = study_dir.resolve()
    if not study_dir.is_dir():
        raise UserError(f"{study_dir}: no such directory")
    check_real_tree(study_dir, "study directory")
    check_real_tree(experiment_dir(study_dir.parent, study_dir.name), "trial store")
    state = read_study_state(study_dir)
    spec = spec_from_dict(state["spec"], source=str(study_dir / STATE_FILE))
    name = study_dir.name
    store = experiment_dir(study_dir.parent, name)
    records = load_records(study_dir.parent, name) if store.is_dir() else load_saved_records(study_dir)
    records = study_trials(spec, records)[0]
    if not records:
        raise UserError(f"{study_dir}: no trial records (neither {TRIALS_FILE} nor a trial store {store}); "
                        f"python -m study.table {name} writes them once the study has trials")
    references = read_references(study_dir)
    return StoredStudy(name, study_dir, state, spec, records, references)
