"""Paper-style tables from trial records.

Per configuration (table row): test BLEU over the seeds that finished
(mean, std, n, 95% t-interval), the difference to the reference row, its
95% Welch interval over the two rows' seeds, a
paired bootstrap against the reference on the seeds' test translations
concatenated (sacreBLEU's p-value and the 95% interval of the difference,
``study.analysis.significance``), how long the seeds trained and when they were best
(epochs, best epoch), validation BLEU, chrF, status counts (ok / truncated /
diverged / failed / stopped early), parameters, weight matrices, training
tokens/s and decoding words/s. Diverged and failed seeds are counted in the
status column and left out of the BLEU statistics; truncated seeds (cut short
by the wall-time cap) are kept in them and flagged.

A finding needs converged models, so the tables say where they are not: a
row is marked † when a seed was still improving when its training ended (the
slope of its last validation scores significantly above 0 and by a tenth of a
point or more, ``study.analysis.plateau``; without a validation history, its best score at its
last epoch) and ‡ when its seeds trained for different amounts; the footnotes
under the table name them. Exports:
Markdown (also printed), CSV, LaTeX (booktabs) and the per-trial CSV.
"""

from __future__ import annotations

import math
from collections import Counter
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from nmt.fileio import write_lines
from study.analysis.plateau import MIN_RISE, STILL_IMPROVING, WINDOW
from study.analysis.significance import PairedBootstrap, nan_bootstrap, paired_bootstrap_stats, seed_interval, sentence_stats, t95
from study.spec.metrics import Metric, TableFormat, per_trial_metrics, table_metrics
from study.store.record_validation import read_text

STATUSES = ("ok", "truncated", "diverged", "failed", "stopped", "running")
SCORED = ("ok", "truncated")  # seeds whose test scores enter a row's statistics
UNEVEN = "‡"


@dataclass
class StudyTable:
    title: str
    rows: pd.DataFrame  # one row per configuration (numeric)
    trials: pd.DataFrame  # one row per trial
    reference: str | None

    def markdown(self) -> str:
        return markdown_table(display_frame(self.rows, self.reference), self.title, footnotes(self.rows))

    def latex(self, label: str = "") -> str:
        return latex_table(display_frame(self.rows, self.reference), self.title, footnotes(self.rows), label)

    def latex_compact(self, label: str = "") -> str:
        """The table for one paper column: BLEU ± std, Δ, p, best epoch, params, training speed."""
        columns = ["Model", "BLEU", "± std", "Δ", "p", "best epoch", "params", "train tok/s"]
        frame = display_frame(self.rows, self.reference)[columns].rename(columns={"train tok/s": "tok/s"})
        return latex_table(frame, self.title, footnotes(self.rows), label, compact=True)


def trials_frame(records: list[dict], plateau: dict[str, bool | None] | None = None) -> pd.DataFrame:
    """trials.csv: one row per trial, its metrics (those the registry, study.spec.metrics, shows per
    trial), how long it trained, and its sampled parameters."""
    metrics, rows = per_trial_metrics(), []
    for r in records:
        m = r["metrics"]
        rows.append({"label": r["label"], "row": r["row"], "seed": r["seed"], "status": r["status"],
                     **{metric.name: _trial_value(m, metric) for metric in metrics}, "epochs": epochs_trained(r),
                     "best_epoch": m.get("best_epoch"), "still_improving": still_improving(r, plateau), "steps": m.get("steps"),
                     "train_tokens": m.get("train_tokens"), "stop_reason": m.get("stop_reason", ""), "key": r["key"],
                     "error": r.get("error", ""), **{f"param:{k}": v for k, v in r["params"].items()}})
    return pd.DataFrame(rows)


def _trial_value(metrics: dict, metric: Metric):
    """A trial's value of ``metric``; a record without it shows its ``trials_fallback`` key's value."""
    if metric.name in metrics or not metric.trials_fallback:
        return metrics.get(metric.name)
    return metrics.get(metric.trials_fallback)


def epochs_trained(record: dict) -> float | None:
    """Epochs a trial trained (fractional when a step/token budget or the cap ended it mid-epoch)."""
    m = record["metrics"]
    for key in ("epochs", "epochs_trained", "epoch"):  # final metrics, a per-epoch result, older records
        if m.get(key) is not None:
            return float(m[key])
    return None


def still_improving(record: dict, plateau: dict[str, bool | None] | None = None) -> bool:
    """A scored trial that was still getting better when its training ended, so its score is not
    that of a converged model: its validation curve fails the plateau test (``plateau``: trial key
    -> ``study.analysis.plateau.on_plateau``), or, where that cannot be judged, its best validation
    score came at its last evaluation."""
    if record["status"] not in SCORED:
        return False
    judged = (plateau or {}).get(record["key"])
    if judged is not None:
        return not judged
    epochs, best = epochs_trained(record), record["metrics"].get("best_epoch")
    if not epochs or not best:
        return False
    return float(best) >= math.ceil(epochs - 1e-9)


def build_table(records: list[dict], title: str, reference: str | None, references_text: list[str] | None,
                row_order: list[str] | None = None, planned_seeds: dict[str, int] | None = None,
                plateau: dict[str, bool | None] | None = None) -> StudyTable:
    """One row per configuration: BLEU over the finished seeds, its intervals, and Δ, the paired bootstrap
    and the seed interval against ``reference``. ``planned_seeds`` (label -> trials the study will run)
    counts the trials a half-finished study has not started yet in each row's n; ``plateau`` (trial key
    -> on a plateau) marks the rows still improving."""
    trials = trials_frame(records, plateau)
    labels = row_order or list(dict.fromkeys(r["label"] for r in sorted(records, key=lambda r: (r["row"], r["label"]))))
    by_label = {label: [r for r in records if r["label"] == label] for label in labels}
    reference_records = by_label.get(reference, []) if reference else []
    rows = [_aggregate(label, by_label.get(label, []), (planned_seeds or {}).get(label, 0), plateau) for label in labels]
    reference_row = next((row for row in rows if row["label"] == reference), None)
    reference_mean = reference_row["bleu_mean"] if reference_row is not None else math.nan
    stats_cache: dict[str, np.ndarray | None] = {}
    for row, label in zip(rows, labels):
        row["delta"] = row["bleu_mean"] - reference_mean if reference else math.nan
        seeds_low = seeds_high = math.nan
        if reference_row is not None and label != reference:
            seeds_low, seeds_high = seed_interval(row["bleu_mean"], row["bleu_std"], row["n"],
                                                  reference_row["bleu_mean"], reference_row["bleu_std"],
                                                  reference_row["n"])
        test = nan_bootstrap()
        if reference and label != reference and references_text is not None:
            test = paired_test(by_label[label], reference_records, references_text, stats_cache=stats_cache)
        row.update(p_value=test.p_value, delta_ci_low=test.ci_low, delta_ci_high=test.ci_high,
                   delta_seeds_ci_low=seeds_low, delta_seeds_ci_high=seeds_high)
    frame = pd.DataFrame(rows)
    frame.attrs["bleu_note"] = bleu_signature_note(records)
    if references_text is not None and reference:
        unusable = mismatched_translations(records, references_text, stats_cache)
        if unusable:
            frame.attrs["translation_note"] = (
                f"Δ CI (bootstrap) and p are left blank for every row that needs a test translation it lacks or "
                f"without one line per test sentence (the test set has {len(references_text)}): {', '.join(unusable)}. "
                "Restore that seed's test translation or train that trial again.")
    return StudyTable(title, frame, trials, reference)


def scored(record: dict) -> bool:
    """A trial whose test score enters its row's statistics."""
    return record["status"] in SCORED and record["metrics"].get("test_bleu") is not None


def mean_std(values: list[float]) -> tuple[float, float, int]:
    """A row's mean over its seeds, their sample standard deviation (0 for one seed, NaN for none) and
    their count: the table's statistics, which the claims use too."""
    n = len(values)
    mean = sum(values) / n if n else math.nan
    std = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5 if n > 1 else (0.0 if n == 1 else math.nan)
    return mean, std, n


def _aggregate(label: str, group: list[dict], planned: int = 0, plateau: dict[str, bool | None] | None = None) -> dict:
    counts = {status: sum(r["status"] == status for r in group) for status in STATUSES}
    ok = [r for r in group if scored(r)]
    mean, std, n = mean_std([float(r["metrics"]["test_bleu"]) for r in ok])
    half = t95(n - 1) * std / math.sqrt(n) if n > 1 else math.nan
    measured = [r for r in group if r["status"] in ("ok", "truncated", "diverged", "stopped")]
    errors = sorted({r["error"] for r in group if r.get("error")})
    epochs = [e for e in (epochs_trained(r) for r in ok) if e is not None]
    best = [float(r["metrics"]["best_epoch"]) for r in ok if r["metrics"].get("best_epoch") is not None]
    return {
        "label": label, "bleu_mean": mean, "bleu_std": std, "n": n, "ci_low": mean - half, "ci_high": mean + half,
        "epochs_min": min(epochs, default=math.nan), "epochs_max": max(epochs, default=math.nan),
        "best_epoch_min": min(best, default=math.nan), "best_epoch_max": max(best, default=math.nan),
        "still_improving": sum(still_improving(r, plateau) for r in ok), "uneven_epochs": len(set(epochs)) > 1,
        **_metric_columns(group, ok, measured),
        **counts, "status": status_text(counts, errors, not_started=max(planned - len(group), 0)),
        "seeds": max(len(group), planned),
    }


def _metric_columns(group: list[dict], scored: list[dict], measured: list[dict]) -> dict:
    """The row's value of each metric with a table column (study.spec.metrics), summarised over
    the trials its ``column.summary`` names."""
    # a trial records its parameter count once it has built its model
    first_built = next((r for r in group if r["metrics"].get("params")), None)
    trials = {"scored": scored, "measured": measured, "scored, else measured": scored or measured}
    values = {}
    for metric in table_metrics():
        column = metric.column
        if column.summary == "first built":
            value = first_built["metrics"].get(metric.name) if first_built else None
            values[column.key] = int(value) if value else None
        else:
            values[column.key] = _mean_of(metric.name, trials[column.summary])
    return values


def _mean_of(key: str, records: list[dict]) -> float:
    values = [float(r["metrics"][key]) for r in records if r["metrics"].get(key) is not None]
    return sum(values) / len(values) if values else math.nan


# a table rebuilt between sessions cannot tell a trial in training from one a stopped driver left
SHOWN_STATUS = {"running": "unfinished"}


def status_text(counts: dict, errors: list[str], not_started: int = 0) -> str:
    """The row's trials by status ("ok", or "2 ok, 1 diverged"); ``not_started`` counts the trials of a
    half-finished study that have no record yet, named only beside those that have one."""
    present = {SHOWN_STATUS.get(k, k): v for k, v in counts.items() if v}
    if not present:
        return "not started"
    if not_started:
        present["not started"] = not_started
    reason = f" ({errors[0]})" if errors else ""
    if len(present) == 1:
        status = next(iter(present))
        return status + (reason if status == "failed" else "")
    return ", ".join(f"{v} {k}" + (reason if k == "failed" else "") for k, v in present.items())


def status_counts(row: dict) -> str:
    """A table row's status without its failed trials' error messages ("1 failed, 1 not started"):
    every count, short enough for a bar's label."""
    counts = {status: int(row[status]) for status in STATUSES}
    return status_text(counts, [], not_started=max(int(row["seeds"]) - sum(counts.values()), 0))


def paired_test(system: list[dict], reference: list[dict], references_text: list[str], samples: int = 1000,
                stats_cache: dict[str, np.ndarray] | None = None) -> PairedBootstrap:
    """Paired bootstrap of this row against the reference row over the seeds both finished,
    their test translations concatenated (seed by seed, so sentence i meets sentence i).
    ``stats_cache`` keeps each translation file's sentence statistics between rows."""
    cache = {} if stats_cache is None else stats_cache
    paired = paired_seeds([system, reference])
    if paired is None or not paired[0]:
        return nan_bootstrap()
    seeds, (ours, theirs) = paired
    parts = [(translation_stats(ours[seed], references_text, cache),
              translation_stats(theirs[seed], references_text, cache)) for seed in seeds]
    if any(a is None or b is None for a, b in parts):
        return nan_bootstrap()
    return paired_bootstrap_stats(np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts]),
                                  samples=samples)


def paired_seeds(groups: list[list[dict]]) -> tuple[list[int], list[dict[int, str]]] | None:
    """The seeds every group (a row's records) finished with a test score, and each group's test translation
    by seed; None when one of those seeds lost its translation: pairing only the others would narrow the
    bootstrap interval without a word (``mismatched_translations`` names it under the table)."""
    seeds = sorted(set.intersection(*(_tested_seeds(group) for group in groups)))
    paths = [finished_translations(group) for group in groups]
    if any(seed not in found for found in paths for seed in seeds):
        return None
    return seeds, paths


def _tested_seeds(records: list[dict]) -> set[int]:
    """The seeds that finished (status ok) with a test score: each needs its test translation."""
    return {r["seed"] for r in records if r["status"] == "ok" and r["metrics"].get("test_bleu") is not None}


def finished_translations(records: list[dict]) -> dict[int, str]:
    """Seed -> test translation file, for the seeds that finished (status ok) and kept one."""
    return {r["seed"]: r["hyp_path"] for r in records if r["status"] == "ok" and r.get("hyp_path")}


def mismatched_translations(records: list[dict], references_text: list[str],
                            cache: dict[str, np.ndarray | None]) -> list[str]:
    """The finished seeds whose test translation the bootstrap cannot pair with the test set
    ("label seed 2 has 997 lines", "label seed 3 has none (its file is missing)"), in row order. ``cache`` is the
    one the paired tests filled, so only a translation of the wrong length is read again, for its line count."""
    out = []
    for record in sorted(records, key=lambda r: (r["row"], r["label"], r["seed"])):
        path = finished_translations([record]).get(record["seed"])
        if path is None and _tested_seeds([record]):
            out.append(f"{record['label']} seed {record['seed']} has none (its file is missing)")
        elif path is not None and translation_stats(path, references_text, cache) is None:
            lines = len((read_text(Path(path)) or "").splitlines())
            out.append(f"{record['label']} seed {record['seed']} has {lines} lines")
    return out


def translation_stats(path: str, references_text: list[str], cache: dict[str, np.ndarray | None]) -> np.ndarray | None:
    """A translation file's sentence statistics, kept in ``cache`` by path; None when the file has
    not one line per test sentence."""
    if path not in cache:
        lines = (read_text(Path(path)) or "").splitlines()  # a stored file: checked as input
        cache[path] = sentence_stats(lines, references_text) if len(lines) == len(references_text) else None
    return cache[path]


# ---------------------------------------------------------------------------
# display and exports


def format_number(value, digits: int = 2, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if signed and value and abs(value) < 0.5 * 10 ** -digits:
        # a difference that rounds to +0.00 would print "[+0.00, +0.00]" beside p < 0.001 (rows all
        # near 0 BLEU): two significant digits keep its sign and size readable
        return f"{value:+.2g}"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def format_interval(low: float, high: float, digits: int = 2) -> str:
    """A signed interval of a difference, "[-1.20, +0.35]"; "-" where there is none (NaN)."""
    if low is None or math.isnan(low):
        return "-"
    return f"[{format_number(low, digits, signed=True)}, {format_number(high, digits, signed=True)}]"


def format_p(value: float) -> str:
    if value is None or math.isnan(value):
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def format_column(value, shown_as: TableFormat) -> str:
    """A cell of a metric's column, as its registry entry (study.spec.metrics) says."""
    if shown_as == "count":
        return _count(value)
    return format_number(value, 0 if shown_as == "0 decimals" else 2)


def _count(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.0f}k" if value >= 1e4 else f"{value:.0f}"


def _span(low: float, high: float) -> str:
    """"10", "4.5" or "8-10": a value, or the range of the seeds' values."""
    if low is None or (isinstance(low, float) and math.isnan(low)):
        return "-"

    def short(value: float) -> str:
        return f"{value:.2f}".rstrip("0").rstrip(".")

    return short(low) if low == high else f"{short(low)}-{short(high)}"


def marked_rows(rows: pd.DataFrame) -> dict[str, list[dict]]:
    """The rows behind each mark: still improving (†), uneven epochs (‡), truncated."""
    records = rows.to_dict("records")
    return {"improving": [r for r in records if r["still_improving"]],
            "uneven": [r for r in records if r["uneven_epochs"]],
            "truncated": [r for r in records if r.get("truncated")]}


def _longer(rows: pd.DataFrame) -> str:
    """How to train the marked rows longer: under the plateau rule only its epoch cap ends a rising trial."""
    if rows.attrs.get("stopping_note"):
        return "raise the epoch cap (budget.epochs) and --extend"
    return "train it longer (budget.epochs, budget.patience)"


def _labels(records: list[dict]) -> str:
    return ", ".join(r["label"] for r in records)


def footnotes(rows: pd.DataFrame) -> list[str]:
    """The notes under a table for its marks, naming the rows they concern."""
    marked = marked_rows(rows)
    notes = []
    if marked["improving"]:
        seeds = ", ".join(f"{r['label']} ({r['still_improving']}/{r['n']} seeds)" for r in marked["improving"])
        notes.append(f"{STILL_IMPROVING} still improving when its training ended (the slope of its last {WINDOW} "
                     f"validation scores significantly above 0 and rising {MIN_RISE} points or more over them, or "
                     f"without them its best score at its last epoch): "
                     f"{seeds}. Not a converged result: {_longer(rows)}.")
    if marked["uneven"]:  # a scored seed is ok (its budget or early stopping ended it) or truncated
        cause = "early stopping or the wall-time cap" if any(r["truncated"] for r in marked["uneven"]) else "early stopping"
        notes.append(f"{UNEVEN} seeds trained for different numbers of epochs ({cause}): {_labels(marked['uneven'])}.")
    if marked["truncated"]:
        notes.append("truncated: stopped by the wall-time cap (budget.minutes) before its budget ended, so how far "
                     f"it trained depends on the machine's speed, not only on the config: "
                     f"{_labels(marked['truncated'])}.")
    if rows.attrs.get("translation_note"):
        notes.append(rows.attrs["translation_note"])
    if rows.attrs.get("speed_note"):  # where the speed columns come from (study.analysis.speed_columns.with_speed)
        notes.append(rows.attrs["speed_note"])
    if rows.attrs.get("left_out_note"):  # stored trials that are not the study's (study.store.study_state.study_trials)
        notes.append(rows.attrs["left_out_note"])
    if rows.attrs.get("stopping_note"):  # the plateau rule the trials stopped by (study.analysis.plateau)
        notes.append(rows.attrs["stopping_note"])
    if rows.attrs.get("numerics_note"):  # where the numbers hold (study.analysis.numerics_note)
        notes.append(rows.attrs["numerics_note"])
    if rows.attrs.get("bleu_note"):  # which BLEU (build_table)
        notes.append(rows.attrs["bleu_note"])
    return notes


def bleu_signature_note(records: list[dict]) -> str | None:
    """The sacreBLEU signature of the scored trials' test BLEU, as a note ("BLEU: sacreBLEU nrefs:1|...");
    several signatures are each counted; None when no scored trial recorded one."""
    signatures = Counter(str(r["metrics"].get("bleu_signature") or "") for r in records if scored(r))
    recorded = {signature: count for signature, count in signatures.items() if signature}
    if not recorded:
        return None
    if len(recorded) == 1 and not signatures.get(""):
        return f"BLEU: sacreBLEU {next(iter(recorded))}."
    listed = "; ".join(f"{signature} ({count} trials)" for signature, count in recorded.items())
    missing = f"; {signatures['']} trials recorded none" if signatures.get("") else ""
    return f"BLEU: sacreBLEU {listed}{missing}."


def warnings(rows: pd.DataFrame) -> list[str]:
    """What the end of a study run must say about its table: rows that were still improving, or
    cut short by the wall-time cap (and so trained for different amounts), and translations the
    bootstrap could not use."""
    marked = marked_rows(rows)
    lines = []
    if marked["improving"]:
        lines.append(f"{len(marked['improving'])} of {len(rows)} rows were still improving when their training ended "
                     f"(the slope of the last {WINDOW} validation scores significantly above 0 and rising {MIN_RISE} points or "
                     f"more over them, or the best score at the "
                     f"last epoch): {_labels(marked['improving'])}. Their scores are not those of converged models; "
                     f"{_longer(rows)}.")
    if marked["truncated"]:
        lines.append(f"cut short by the wall-time cap (budget.minutes), status truncated: "
                     f"{_labels(marked['truncated'])}. How far they trained depends on the machine's speed; rerun "
                     "without the cap to compare them.")
    # early stopping ends seeds at different epochs by design (the ‡ note says so); only a cut short
    # by the wall-time cap needs the user's attention
    capped_unevenly = [r for r in marked["uneven"] if r["truncated"]]
    if capped_unevenly:
        lines.append(f"seeds trained for different numbers of epochs (the wall-time cap): {_labels(capped_unevenly)}.")
    if rows.attrs.get("translation_note"):
        lines.append(rows.attrs["translation_note"])
    return lines


# right-aligned in Markdown, as every metric's column is; every other column reads as text
NUMBER_COLUMNS = frozenset({"BLEU", "± std", "Δ", "p", "sum of single Δ", "departure"})


def markdown_table(frame: pd.DataFrame, title: str, notes: list[str]) -> str:
    """A shown table (``display_frame``) as Markdown: bold title, the table, its notes. The cells are
    written as ``display_frame`` formatted them: left to itself, tabulate would read "+0.30" as a
    number and print "0.3"."""
    numbers = NUMBER_COLUMNS | {metric.column.header for metric in table_metrics()}
    align = ["right" if column in numbers else "left" for column in frame.columns]
    body = frame.apply(lambda column: column.map(markdown_cell)).to_markdown(index=False, disable_numparse=True, colalign=align)
    return f"**{markdown_text(title)}**\n\n" + body + "\n" + "".join(f"\n{markdown_text(note)}\n" for note in notes)


def display_frame(rows: pd.DataFrame, reference: str | None) -> pd.DataFrame:
    """The table as shown (formatted cells, one row per configuration); markdown, LaTeX, the HTML
    report and study.compare all show this frame."""
    out, metrics = [], table_metrics()
    for row in rows.to_dict("records"):
        no_bleu = row["n"] == 0
        bleu = row["status"].split(" (")[0] if no_bleu else format_number(row["bleu_mean"])
        is_reference = row["label"] == reference
        out.append({
            "Model": row["label"],
            "BLEU": bleu,
            "± std": "-" if row["n"] < 2 else format_number(row["bleu_std"]),  # one seed has no spread to show
            "Δ": "-" if no_bleu or not reference else "0" if is_reference else format_number(row["delta"], signed=True),
            "95% CI": "-" if row["n"] < 2 else f"[{format_number(row['ci_low'])}, {format_number(row['ci_high'])}]",
            "Δ CI (seeds)": "-" if is_reference else format_interval(row["delta_seeds_ci_low"], row["delta_seeds_ci_high"]),
            "Δ CI (bootstrap)": "-" if is_reference else format_interval(row["delta_ci_low"], row["delta_ci_high"]),
            "p": "-" if is_reference else format_p(row["p_value"]),
            "n": f"{row['n']}/{row['seeds']}",
            "epochs": _span(row["epochs_min"], row["epochs_max"]) + (f" {UNEVEN}" if row["uneven_epochs"] else ""),
            "best epoch": _span(row["best_epoch_min"], row["best_epoch_max"])
            + (f" {STILL_IMPROVING}" if row["still_improving"] else ""),
            **{metric.column.header: format_column(row[metric.column.key], metric.column.shown_as) for metric in metrics},
            "status": row["status"],
        })
    return pd.DataFrame(out)


# every character LaTeX reads as a command in text, as the character it shows (one pass: the
# replacements hold braces and backslashes themselves); a line break in a label is a space
LATEX_TEXT = str.maketrans({"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#",
                            "{": r"\{", "}": r"\}", "$": r"\$", "^": r"\textasciicircum{}", "~": r"\textasciitilde{}",
                            "±": r"$\pm$", "Δ": r"$\Delta$", "<": r"$<$", STILL_IMPROVING: r"\textdagger{}",
                            UNEVEN: r"\textdaggerdbl{}", "\n": " ", "\r": " "})


def latex_text(text: str) -> str:
    return text.translate(LATEX_TEXT)


# what a Markdown reader takes for raw HTML: a '<' that opens a tag, comment or declaration, and a character
# reference; any other '<' or '&' (p < 0.001) is shown as it is
MARKUP = re.compile(r"<(?=[A-Za-z/!?])|&(?=#?[A-Za-z0-9]+;)")


def markdown_text(text: str) -> str:
    """Text (a title, a note, a cell) as Markdown shows it literally: whitespace runs, line and paragraph
    separators included, as one space (a study's text holds none: ``nmt.typed_config.check_text``; a stored one
    might), and what would be read as HTML escaped."""
    return MARKUP.sub(lambda match: "&lt;" if match.group() == "<" else "&amp;", " ".join(str(text).split()))


def markdown_cell(text: str) -> str:
    """A cell of a Markdown table: as ``markdown_text``, and a '|' would end the cell."""
    return markdown_text(text).replace("|", r"\|")


def latex_table(frame: pd.DataFrame, title: str, notes: list[str], label: str = "", compact: bool = False) -> str:
    escape = latex_text

    columns = list(frame.columns)
    lines = [r"\begin{table}[t]", r"\centering"]
    if compact:  # one column of a two-column paper
        lines += [r"\small", r"\setlength{\tabcolsep}{3pt}"]
    lines += [r"\begin{tabular}{l" + "r" * (len(columns) - 1) + "}",
             r"\toprule", " & ".join(escape(c) for c in columns) + r" \\", r"\midrule"]
    for row in frame.itertuples(index=False):
        lines.append(" & ".join(escape(str(v)) for v in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if notes:
        lines += [r"\par\smallskip", r"\begin{minipage}{\linewidth}\footnotesize"]
        lines += [escape(note) + r"\par" for note in notes]
        lines += [r"\end{minipage}"]
    lines += [rf"\caption{{{escape(title)}}}"]
    if label:
        lines += [rf"\label{{{label}}}"]
    lines += [r"\end{table}"]
    return "\n".join(lines) + "\n"


def export(table: StudyTable, directory: Path) -> list[Path]:
    """table.md, table.csv, table.tex (with \\label{tab:<study>}), table_compact.tex (one paper column,
    label tab:<study>-compact) and trials.csv in ``directory`` (the study's directory)."""
    directory.mkdir(parents=True, exist_ok=True)
    names = ("table.md", "table.csv", "table.tex", "table_compact.tex", "trials.csv")
    paths = {name: directory / name for name in names}
    label = f"tab:{directory.name}"
    write_lines(paths["table.md"], table.markdown().splitlines())
    write_lines(paths["table.csv"], table.rows.to_csv(index=False).splitlines())
    write_lines(paths["table.tex"], table.latex(label).splitlines())
    write_lines(paths["table_compact.tex"], table.latex_compact(f"{label}-compact").splitlines())
    write_lines(paths["trials.csv"], table.trials.to_csv(index=False).splitlines())
    return list(paths.values())
