"""A finished study read back from its result directory, for what is built after the run
(``study.compare``, ``study.report``): its state (study.json), effective spec, trial records and
test references, and the table its own run made from them.

The records are the ones ``python -m study.table`` reads: the trial store ``<results>/ray/NAME``
when the directory is a local run's, else the copy kept next to the tables (``trials.jsonl`` and
``hyps/``, which is all committed reference results have). Nothing here imports Ray.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from nmt.errors import ConfigError, UserError
from study.migration import comparable
from study.ownership import check_real_tree
from study.record_validation import BadRecord, check_mapping, check_state, read_json, read_text
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


def study_trials(spec: StudySpec, records: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the records that are trials of the study, the stored records that are not). A trial
    store can hold trials of another config under a row's label and seed (one that migration
    left where it was, one copied in by hand); a table holds exactly the study's trials: one
    record per label and seed, with that trial's key or a config this version reads as the
    same (study.migration.comparable). A search's trials are its own samples: all are kept."""
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
    when it is not a JSON mapping (study.record_validation)."""
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


def read_references(study_dir: Path) -> list[str] | None:
    """The test set's references kept beside the tables (test.ref), None when not kept."""
    text = read_text(study_dir / REFERENCES_FILE, "restore it, or run the study again with --resume")
    return None if text is None else text.splitlines()
