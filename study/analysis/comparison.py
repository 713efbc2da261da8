"""``python -m study.compare A B [C ...]``: one table and one bar figure across studies.

``python -m study.compare A --reference LABEL`` does the same for one study: its rows measured
against a row other than its own reference (is one ablation's drop larger than another's?).

Each source is a study name (its result directory ``<results>/NAME``) or the path of a study's
result directory (``results/reference/ablation_srnmt``). The rows of all sources go in one
table, in the sources' order; a label found in more than one source is prefixed with its source
(``ablation_srnmt: SR-NMT 4L``). Δ, its seed and bootstrap intervals and the p-value are measured against
one reference row (``--reference``, default the first source's own) by ``study.analysis.tables`` itself,
exactly as in a study's own table: rows are paired seed by seed on the test set.

A paired bootstrap needs both systems to have translated the same sentences. Rows of a source
whose test set (``test.ref``) differs from the reference row's get no bootstrap and no seed
interval: their Δ CIs and p say ``n/a`` and a note says why, rather than a number computed against
the wrong references.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from nmt.errors import UserError
from nmt.fileio import write_lines
from study.analysis import plots
from study.analysis.speed_columns import with_speed
from study.analysis.stored_study import StoredStudy, load_stored_study
from study.analysis.tables import StudyTable, build_table, display_frame, footnotes, latex_table, markdown_table
from study.spec.model import STUDY_NAME
from study.store.ownership import owned_path

UNPAIRED = "n/a"  # shown in the Δ CI and p cells of rows that cannot be tested against the reference


@dataclass
class Comparison:
    table: StudyTable  # labels made unique across sources
    sources: list[str]  # each row's source name, in the table's row order
    unpaired: dict[str, str]  # source name -> why its rows have no paired bootstrap

    def unpaired_reason(self, row_index: int) -> str:
        label = self.table.rows["label"].iloc[row_index]
        return "" if label == self.table.reference else self.unpaired.get(self.sources[row_index], "")

    def frame(self) -> pd.DataFrame:
        """The shown table: a study's own columns, with each row's source after its label."""
        frame = display_frame(self.table.rows, self.table.reference)
        frame.insert(1, "Source", self.sources)
        for index in range(len(frame)):
            if self.unpaired_reason(index):
                frame.loc[index, ["Δ CI (seeds)", "Δ CI (bootstrap)", "p"]] = UNPAIRED
        return frame

    def notes(self) -> list[str]:
        notes = footnotes(self.table.rows)
        if self.table.reference is None:
            notes.append("No reference row (the first study has none, e.g. a search): no Δ and no p-values; "
                         "choose one with --reference.")
        for source, reason in self.unpaired.items():
            notes.append(f"{UNPAIRED}: no paired bootstrap and no seed interval for the rows of {source}: {reason}.")
        return notes

    def markdown(self) -> str:
        return markdown_table(self.frame(), self.table.title, self.notes())

    def latex(self, label: str) -> str:
        return latex_table(self.frame(), self.table.title, self.notes(), label)

    def csv(self) -> str:
        """The rows' raw numbers, with their source and, where there is no p-value, why."""
        rows = self.table.rows.copy()
        rows.insert(1, "source", self.sources)
        rows["p_value_note"] = [self.unpaired_reason(i) for i in range(len(rows))]
        return rows.to_csv(index=False)


def source_names(directories: list[Path]) -> list[str]:
    """How the table names each source: its directory's name, with its parent's name as well
    when two sources share a name (results/ablation_srnmt and results/reference/ablation_srnmt)."""
    counts = Counter(d.name for d in directories)
    names = [f"{d.parent.name}/{d.name}" if counts[d.name] > 1 else d.name for d in directories]
    for directory, name in zip(directories, names):
        if names.count(name) > 1:
            raise UserError(f"{directory} is given twice; name each study once")
    return names


def combined_labels(names: list[str], labels: list[list[str]]) -> list[list[str]]:
    """Each source's row labels, prefixed with the source's name where a label is in several sources."""
    seen = Counter(label for source_labels in labels for label in set(source_labels))
    combined = [[f"{name}: {label}" if seen[label] > 1 else label for label in source_labels]
                for name, source_labels in zip(names, labels)]
    flat = [label for source_labels in combined for label in source_labels]
    if len(set(flat)) < len(flat):
        clash = next(label for label in flat if flat.count(label) > 1)
        raise UserError(f"two rows would both be labelled {clash!r}; rename one of the studies' rows")
    return combined


def pick_reference(requested: str | None, first: StoredStudy, first_labels: dict[str, str],
                   all_labels: list[str], original: dict[str, list[str]]) -> str | None:
    """The combined label of the reference row: ``requested`` (a combined label, or an original
    one found in a single source), else the first source's own reference row."""
    if requested is None:
        return first_labels.get(first.layout.reference) if first.layout.reference else None
    if requested in all_labels:
        return requested
    candidates = original.get(requested, [])
    if len(candidates) > 1:
        raise UserError(f"--reference {requested!r} is a row of several sources; name one of: "
                        + ", ".join(repr(c) for c in candidates))
    raise UserError(f"--reference {requested!r}: no such row; the rows are: " + ", ".join(repr(c) for c in all_labels))


def why_unpaired(study: StoredStudy, name: str, reference: StoredStudy, reference_name: str) -> str:
    """Why ``study``'s rows cannot be tested against a row of ``reference`` ("" when they can)."""
    if reference.references is None:
        return f"the reference row's study {reference_name} kept no test references (test.ref)"
    if study.references is None:
        return f"{name} kept no test references (test.ref), so its test set is unknown"
    if study.references != reference.references:
        sizes = f"{len(study.references)} vs {len(reference.references)} sentences"
        return (f"it was tested on a different test set than {reference_name} (their test.ref files differ, "
                f"{sizes}); its Δ compares scores on different test sets")
    return ""


def compare(studies: list[StoredStudy], names: list[str], reference: str | None = None,
            title: str | None = None) -> Comparison:
    """One table over the rows of all ``studies``, its significance columns built by
    ``study.analysis.tables.build_table`` against one reference row."""
    own_labels = [study.row_labels() for study in studies]
    labels = combined_labels(names, own_labels)
    all_labels = [label for source_labels in labels for label in source_labels]
    original: dict[str, list[str]] = {}
    for own, combined in zip(own_labels, labels):
        for label, new in zip(own, combined):
            original.setdefault(label, []).append(new)
    reference_label = pick_reference(reference, studies[0], dict(zip(own_labels[0], labels[0])), all_labels, original)
    owner = next((i for i, source_labels in enumerate(labels) if reference_label in source_labels), 0)
    unpaired = {}
    for study, name in zip(studies, names):
        reason = why_unpaired(study, name, studies[owner], names[owner]) if reference_label else ""
        if reason:
            unpaired[name] = reason
    records = []
    planned: dict[str, int] = {}  # so that a half-finished study's rows count their trials not started
    for study, name, own, combined in zip(studies, names, own_labels, labels):
        relabel = dict(zip(own, combined))
        planned.update({relabel[label]: n for label, n in (study.layout.planned_seeds or {}).items()
                        if label in relabel})
        for record in study.records:
            copy = {**record, "label": relabel[record["label"]]}
            if name in unpaired:
                # without translations build_table runs no bootstrap for this row, instead of scoring
                # them against references of another test set
                copy["hyp_path"] = None
            records.append(copy)
    if title is None:
        title = (f"{names[0]} against its row {reference_label}: test BLEU" if len(names) == 1
                 else "Comparison of " + ", ".join(names) + ": test BLEU")
    table = build_table(records, title, reference_label, studies[owner].references, all_labels, planned)
    table.rows = with_speed(table.rows, None)  # each trial's own timing, from runs at other times
    sources = [name for name, source_labels in zip(names, labels) for _ in source_labels]
    # an interval of the difference would read as a test of scores on different test sets
    other_test_set = [source in unpaired for source in sources]
    table.rows.loc[other_test_set, ["delta_seeds_ci_low", "delta_seeds_ci_high"]] = float("nan")
    return Comparison(table, sources, unpaired)


def resolve_source(argument: str, results_root: Path) -> Path:
    """The result directory an argument names: ``<results>/NAME`` for a study name, else a path."""
    if STUDY_NAME.fullmatch(argument) and (results_root / argument).is_dir():
        return results_root / argument
    path = Path(argument)
    if path.is_dir():
        return path
    if STUDY_NAME.fullmatch(argument):
        raise UserError(f"unknown study {argument!r}: no directory {results_root / argument} and no directory "
                        f"{argument}; give a study name under --results or a study's result directory")
    raise UserError(f"{argument}: no such directory; give a study name under --results or a study's result directory")


def write_comparison(comparison: Comparison, out: Path) -> list[Path]:
    """table.md, table.csv, table.tex and the bar figure (bleu.png, bleu.pdf) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "table.md", out / "table.csv", out / "table.tex"]
    write_lines(paths[0], comparison.markdown().splitlines())
    write_lines(paths[1], comparison.csv().splitlines())
    write_lines(paths[2], comparison.latex(f"tab:compare-{out.name}").splitlines())
    table = comparison.table
    paths += plots.bar_plot(table.rows, table.title, out / "bleu.png", table.trials, table.reference)
    return paths


MAX_STEM_BYTES = 120  # a comparison's default directory name; with its files' names well under 255 bytes


def output_dir(requested: Path | None, names: list[str], results_root: Path, reference: str | None = None) -> Path:
    """Where the comparison goes: inside the results directory only, never a study's own directory.
    By default ``compare/A_vs_B``, or ``compare/A_against_LABEL`` for one study and its ``reference`` row."""
    stem = "_vs_".join(name.replace("/", "-") for name in names)
    if len(names) == 1:
        stem += "_against_" + (re.sub(r"[^a-z0-9]+", "-", (reference or "").lower()).strip("-") or "row")
    if len(stem.encode()) > MAX_STEM_BYTES:  # file systems refuse names over 255 bytes: shortened, still unique
        digest = hashlib.sha256(stem.encode()).hexdigest()[:10]
        stem = stem.encode()[:MAX_STEM_BYTES - 11].decode(errors="ignore") + "-" + digest
    default = results_root / "compare" / stem
    out = owned_path(results_root, requested or default, "output directory")
    if (out / "study.json").exists():
        raise UserError(f"output directory {out} holds a study's results; choose another --out")
    return out


def compare_studies(sources: list[str], results: Path, out: Path | None = None, reference: str | None = None,
                    title: str | None = None) -> tuple[Comparison, list[Path]]:
    """Compare stored studies (names under ``results`` or result directories) and write the
    comparison's table and figure to ``out`` (default: under ``results/compare/``)."""
    if len(sources) < 2 and reference is None:
        raise UserError("give at least two studies to compare, or one with --reference LABEL to measure its rows "
                        "against another of its rows (python -m study.table NAME shows its own table)")
    root = results.resolve()
    directories = [resolve_source(argument, root).resolve() for argument in sources]
    names = source_names(directories)
    folder = output_dir(out, names, root, reference)
    studies = [load_stored_study(directory) for directory in directories]
    comparison = compare(studies, names, reference, title)
    return comparison, write_comparison(comparison, folder)
