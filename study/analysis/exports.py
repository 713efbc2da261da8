"""A study's outputs beside its trial records: tables, plots, the HTML report and the command that
produced them."""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nmt.config import config_from_dict, model_option
from nmt.errors import UserError
from nmt.fileio import write_json, write_lines
from nmt.typed_config import read_yaml
from study.analysis import plots
from study.analysis.additivity import ablation_additivity, export_additivity
from study.analysis.claims_table import claims_table, export_claims
from study.analysis.curves import CURVES_FILE, curves_plot, load_progress, save_progress
from study.analysis.html_report import write_html_report
from study.analysis.speed_columns import read_speed
from study.analysis.stored_study import study_table
from study.analysis.tables import StudyTable, export
from study.analysis.tables import warnings as table_warnings
from study.spec.expansion import expand, varied_keys
from study.spec.labels import axis_name, display_value
from study.spec.loading import spec_from_dict, study_path
from study.spec.model import READING_KEYS, StudySpec, checked_study_name
from study.store.claim_declarations import KEY, declared_column, now, with_declarations
from study.store.ownership import check_real_tree, owned_path
from study.store.records import experiment_dir, load_records, load_saved_records, save_records
from study.store.study_state import (
    STATE_FILE,
    command_history,
    left_out_note,
    read_references,
    read_state,
    read_study_state,
    study_trials,
)


def write_command(study_dir: Path, commands: list[str]) -> None:
    """The exact commands that produced the results, beside them, one a line (also in study.json):
    the first started the study, any later ones continued (--resume) or extended (--extend) it."""
    if commands:
        write_lines(study_dir / "command.txt", commands)


def write_exports(spec: StudySpec, records: list[dict], references: list[str] | None,
                  study_dir: Path) -> tuple[list[Path], StudyTable]:
    """Tables (md, csv, tex, trials.csv; an ablation's additivity table), plots (png, pdf), the learning
    curves, the HTML report and the trial records (trials.jsonl, hyps/, and progress.csv when the
    records carry their epochs).
    The speed columns come from the study's timing pass where it has one (``study.speed``)."""
    records, left_out = study_trials(spec, records)  # exactly the study's trials; the rest are named in a note
    save_records(records, study_dir)
    progress_file = save_progress(records, study_dir)
    progress = load_progress(study_dir)  # before any table is written: a damaged file stops the export here
    records = load_saved_records(study_dir)  # the tables read exactly what is kept next to them
    timing_pass = read_speed(study_dir)
    table = study_table(spec, records, references, timing_pass, progress)
    title = table.title
    if left_out:
        table.rows.attrs["left_out_note"] = left_out_note(left_out)
    outputs = export(table, study_dir)
    additivity = ablation_additivity(spec, table, records, references)
    if additivity is not None:
        outputs += export_additivity(additivity, study_dir)
    claims = None
    if spec.fields.claims:
        declared = declared_column(read_state(study_dir), spec.fields.claims, str(study_dir / STATE_FILE))
        claims = claims_table(spec.fields.claims, title, table, records, references, declared, timing_pass)
    if claims is not None:
        outputs += export_claims(claims, study_dir)
    if len(table.rows):
        outputs += plots.bar_plot(table.rows, title, study_dir / "bleu.png", table.trials, table.reference)
        outputs += plots.speed_plot(table.rows, title, study_dir / "bleu_vs_speed.png")
        if spec.fields.table.plot == "line" and spec.kind != "search":
            x_key = spec.fields.table.x
            by_label = {t.label: t for t in expand(spec)}
            configs = [by_label[label].config for label in table.rows["label"]]
            outputs += plots.line_plot(table.rows, [_lookup(config, x_key) for config in configs], x_axis_name(spec, x_key),
                                       title, study_dir / f"bleu_vs_{x_key.split('.')[-1]}.png",
                                       line_series(spec, configs, x_key))
    outputs += [progress_file] if progress_file else []
    if progress is not None:
        status = {record["key"]: record["status"] for record in records}
        outputs += curves_plot(progress, list(table.rows["label"]), status, title, study_dir / CURVES_FILE)
    outputs.append(write_html_report(study_dir, table, additivity, claims))  # last: it embeds the figures above
    return outputs, table


def printed_tables(study_dir: Path, outputs: list[Path]) -> str:
    """What a run or a rebuild prints: table.md, then the additivity and claims tables where it wrote them."""
    shown = [study_dir / "table.md", study_dir / "additivity.md", study_dir / "claims.md"]
    return "\n".join(path.read_text(encoding="utf-8") for path in shown if path in outputs)


def shown_path(path: Path) -> str:
    """A path relative to the working directory when it is inside it."""
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def run_summary(study_dir: Path, outputs: list[Path]) -> list[str]:
    """What a finished run prints of its exports: the tables, then the files written (relative to the
    working directory where they lie inside it)."""
    return [printed_tables(study_dir, outputs), f"wrote {', '.join(shown_path(p) for p in outputs)}"]


def x_axis_name(spec: StudySpec, x_key: str) -> str:
    """The line plot's x axis: a key that a grid axis links with others ("a+b": every row sets
    them alike) is named with them, so a depth axis says that the decoder deepens too."""
    linked = [axis for axis in (spec.fields.grid or {}) if x_key in axis.split("+") and "+" in axis]
    return axis_name(linked[0] if linked else x_key)


def line_series(spec: StudySpec, configs: list[dict], x_key: str) -> list[str]:
    """The line each row belongs to in a plot over ``x_key``: the values of the study's keys that
    vary independently of x ("GRU", "ATR" in a depth x unit grid; one line, "", when none do,
    e.g. a depth axis that links encoder and decoder layers)."""
    others = [key for key in varied_keys(spec) if key != x_key and _varies_beside(configs, x_key, key)]
    return [" ".join(display_value(key, _lookup(config, key)) for key in others) for config in configs]


def _varies_beside(configs: list[dict], x_key: str, key: str) -> bool:
    """True when two rows share their x value but not their value of ``key``."""
    seen: dict = {}
    for config in configs:
        seen.setdefault(repr(_lookup(config, x_key)), set()).add(repr(_lookup(config, key)))
    return any(len(values) > 1 for values in seen.values())


def _lookup(tree: dict, dotted: str):
    """The value of a dotted key in a trial config; a unit option named in the old flat form
    (model.order) is found under its unit (model.fsmn.order)."""
    node = tree
    try:
        for part in dotted.split("."):
            node = node[part]
        return node
    except (KeyError, TypeError):
        found = model_option(config_from_dict(tree, source="trial config").model, dotted)
        if found is None:
            raise
        return found[1]


def adopt_reading_keys(state: dict, study_file: Path, study_dir: Path, say: Callable[[str], None]) -> dict:
    """The stored study with the claims, description and table title of ``study_file`` (``READING_KEYS``:
    they change how the results are read, never which trials ran), written back to study.json when
    they differ, so that a rebuild by name reads them too; a claim new to the study (or changed) is declared
    now (``study.store.claim_declarations``)."""
    tree = read_yaml(study_file)
    spec_from_dict(tree, str(study_file), expected_name=study_dir.name)  # the file must be a valid study, claims included
    stored = copy.deepcopy(state["spec"])
    for dotted in READING_KEYS:
        section, _, key = dotted.partition(".")
        source, target = (tree.get(section), stored.setdefault(section, {})) if key else (tree, stored)
        name = key or section
        if isinstance(source, dict) and name in source:
            target[name] = source[name]
        elif isinstance(target, dict):
            target.pop(name, None)
    # the claims are judged on the stored study's rows, which the file may have relabelled: checked on those
    # rows before they are stored, so that nothing stored can make a later rebuild fail
    claims = spec_from_dict(stored, f"{study_file} (read on the rows of {study_dir / STATE_FILE})").fields.claims
    declared = with_declarations(state, claims, now(), str(study_dir / STATE_FILE))
    changed = stored != state["spec"]
    if not changed and declared == state.get(KEY, {}):
        return state
    state = {**state, "spec": stored, **({KEY: declared} if declared else {})}
    write_json(study_dir / STATE_FILE, state)
    if changed:
        say(f"took the claims, description and table title from {study_file} into {study_dir / STATE_FILE}")
    return state


@dataclass
class RebuiltExports:
    """What ``rebuild_exports`` wrote: the files, the study's table, and the tables as printed."""

    outputs: list[Path]
    table: StudyTable
    printed: str


def rebuild_exports(results: Path, name: str, say: Callable[[str], None] = print,
                    warn: Callable[[str], None] = lambda line: print(f"warning: {line}", file=sys.stderr)
                    ) -> RebuiltExports:
    """Rebuild a study's folder (tables, plots, report, command.txt) from its stored trials without
    training: from the trial store where it exists (a local run), else from the trial records kept
    beside the tables (committed reference results). ``name`` may be the study's ``.yaml`` file."""
    root = results.resolve()
    study_file = study_path(name) if name.endswith((".yaml", ".yml")) else None
    name = study_file.stem if study_file is not None else name
    checked_study_name(name)
    study_dir = owned_path(root, root / name, "study directory")
    check_real_tree(study_dir, "study directory")
    check_real_tree(experiment_dir(root, name), "trial store")
    if not (study_dir / "study.json").exists():
        if (experiment_dir(root, name) / "trials").is_dir():  # the trial store is the source of truth
            raise UserError(f"study {name}: {study_dir / 'study.json'} is missing, but its trial store "
                            f"{experiment_dir(root, name)} is there; python -m study.run STUDY_FILE --resume "
                            f"--results {results} rebuilds the study's folder and tables without retraining "
                            f"what finished")
        raise UserError(f"study {name}: no stored results in {root}; run python -m study.run {name} first")
    state = read_study_state(study_dir)
    if study_file is not None:
        state = adopt_reading_keys(state, study_file, study_dir, say)
    spec = spec_from_dict(state["spec"], source=f"{study_dir / 'study.json'}")
    if experiment_dir(root, name).is_dir():  # the trial store of a local run is the source of truth
        records = load_records(root, name)
        source = f"the trial store {experiment_dir(root, name)}"
    else:  # committed reference results: the trial records kept next to the tables
        records = load_saved_records(study_dir)
        source = f"the trial records in {study_dir}"
    if not records:
        raise UserError(f"study {name}: {source} holds no trials")
    say(f"rebuilding from {source}")
    references = read_references(study_dir)
    write_command(study_dir, command_history(state))
    outputs, table = write_exports(spec, records, references, study_dir)
    rebuilt = RebuiltExports(outputs, table, printed_tables(study_dir, outputs))
    say(rebuilt.printed)
    say("wrote " + ", ".join(str(p) for p in outputs))
    for line in table_warnings(table.rows):
        warn(line)
    return rebuilt
