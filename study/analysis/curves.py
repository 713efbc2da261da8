"""Training progress of a study's trials, beside its tables: every epoch's validation scores and
learning rate (``progress.csv``) and the learning curves drawn from them (``curves.png``/``.pdf``).

The figure has one panel per row of the table and one line per seed: validation BLEU per epoch,
a dot on the best epoch (the model the test set scores; an open circle while the trial has not
finished and its best so far is not yet tested), a triangle on every epoch after which the
learning rate was lowered, and a dashed line for a trial that has not finished. A curve still
rising at its last epoch is a model that had not converged; the panels share their axes, so rows
compare at a glance. More rows than ``MAX_PANELS`` (a search's trials) share one panel.

``progress.csv`` is written from the trial store's epoch histories; a study rebuilt from its
saved records alone (``trials.jsonl``, as committed) keeps the file it has.
"""

from __future__ import annotations

import csv
import io
import math
import textwrap
from pathlib import Path

import pandas as pd

from nmt.errors import UserError
from nmt.fileio import write_bytes
from nmt.figures import literal_text, subplots
from study.analysis.plots import save_figure, wrapped_title
from study.store.record_validation import regular_file

PROGRESS_FILE = "progress.csv"
CURVES_FILE = "curves.png"
COLUMNS = ("label", "seed", "key", "epoch", "lr", "train_ppl", "valid_ppl", "valid_bleu", "best_epoch")
MAX_PANELS = 16  # more rows than this (a search's trials) share one panel
LEGEND_ENTRY_INCHES = 1.35  # the widest legend entry ("best epoch (tested)") at 7 pt, with its marker


def progress_rows(records: list[dict]) -> list[dict]:
    """One row per trial and epoch, in the records' order, epochs ascending."""
    rows = []
    for record in records:
        for entry in sorted(record.get("history") or [], key=lambda e: e.get("epoch", 0)):
            if entry.get("epoch") is None:
                continue
            row = {column: entry.get(column) for column in COLUMNS}
            row.update(label=record["label"], seed=record["seed"], key=record["key"], epoch=int(entry["epoch"]))
            if row["best_epoch"] is not None:
                row["best_epoch"] = int(row["best_epoch"])
            rows.append(row)
    return rows


def save_progress(records: list[dict], study_dir: Path) -> Path | None:
    """Write ``progress.csv`` from the records' epoch histories; None (and the file left as it is)
    when the records carry none, as records read back from ``trials.jsonl`` do."""
    if not any(record.get("history") for record in records):
        return None
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows([_cell(row[column]) for column in COLUMNS] for row in progress_rows(records))
    path = study_dir / PROGRESS_FILE
    write_bytes(path, buffer.getvalue().encode("utf-8"))
    return path


def _cell(value):
    """Empty for a missing or non-finite number (a diverged epoch), full precision otherwise."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return repr(value) if isinstance(value, float) else value


def load_progress(study_dir: Path) -> pd.DataFrame | None:
    path = study_dir / PROGRESS_FILE
    if not regular_file(path, "restore it from git, or delete it: the curves are drawn again from the trial store"):
        return None
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [column for column in COLUMNS if column not in (reader.fieldnames or [])]
        if missing:
            raise UserError(f"{path}: not a progress file (no column {', '.join(missing)}); restore it from git, "
                            f"or delete it and the curves are drawn again only where the trial store is kept")
        rows = list(reader)
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    for column in COLUMNS:
        if column not in ("label", "key"):
            values = pd.to_numeric(frame[column], errors="coerce")  # a damaged cell is no point, never inf
            frame[column] = values.where(values.abs() != float("inf"))
    return frame


def lr_lowered_after(epochs: pd.DataFrame) -> list[int]:
    """The epochs after which the learning rate was lowered: each row's ``lr`` is the rate the
    epoch trained with, so a drop shows in the next epoch's row."""
    ordered = epochs.sort_values("epoch")
    lrs, numbers = list(ordered["lr"]), list(ordered["epoch"])
    return [int(numbers[i]) for i in range(len(lrs) - 1) if lrs[i + 1] < lrs[i]]


def panels_of(progress: pd.DataFrame, row_order: list[str]) -> list[list[str]]:
    """The labels each panel shows: one row each in the table's order (rows the table lacks
    after it), or all in one panel when there are more than ``MAX_PANELS``."""
    present = set(progress["label"])
    labels = [label for label in row_order if label in present]
    labels += [label for label in dict.fromkeys(progress["label"]) if label not in labels]
    return [[label] for label in labels] if len(labels) <= MAX_PANELS else [labels]


def whole_epoch_ticks(ax, epochs: pd.Series) -> None:
    """Ticks at whole epochs only. An integer locator alone falls back to fractional ticks
    when the trials span fewer than three epochs (a one-epoch smoke study), so such short
    spans get every epoch as a tick."""
    # matplotlib loads with the first figure: commands that draw none start faster
    from matplotlib.ticker import MaxNLocator

    first, last = int(epochs.min()), int(epochs.max())
    if last - first < 2:
        ax.set_xticks(range(first, last + 1))
        ax.set_xlim(first - 0.5, last + 0.5)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


@literal_text
def curves_plot(progress: pd.DataFrame, row_order: list[str], status: dict[str, str], title: str,
                path: Path) -> list[Path]:
    """The learning curves (see the module's doc); ``status`` maps a trial key to its status."""

    panels = panels_of(progress, row_order)
    per_row = all(len(panel) == 1 for panel in panels)
    columns = min(4, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig, axes = subplots(rows, columns, figsize=(max(3.2 * columns + 0.4, 5.0), 2.3 * rows + 1.2), sharex=True,
                             sharey=True, squeeze=False)
    seeds = sorted(set(progress["seed"].dropna().astype(int)))
    colour = {seed: f"C{index % 10}" for index, seed in enumerate(seeds)} if per_row else {}
    drawn = {"lowered": False, "unfinished": False}  # what the legend needs to explain
    for ax, panel in zip(axes.flat, panels):
        for key, trial in progress[progress["label"].isin(panel)].groupby("key", sort=False):
            trial = trial.sort_values("epoch")
            finished = status.get(key) != "running"
            _draw_trial(ax, trial, colour.get(int(trial["seed"].iloc[0]), "#4c72b0"), finished=finished,
                        thin=not per_row)
            drawn["lowered"] |= bool(lr_lowered_after(trial))
            drawn["unfinished"] |= not finished
        name = panel[0] if per_row else f"every trial ({progress['key'].nunique()})"
        ax.set_title("\n".join(textwrap.wrap(name, 40)), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for index in range(len(panels), rows * columns):  # empty places in the last row
        axes.flat[index].set_visible(False)
        axes.flat[index - columns].xaxis.set_tick_params(labelbottom=True)
        axes.flat[index - columns].set_xlabel("epoch", fontsize=8)
    whole_epoch_ticks(axes[0, 0], progress["epoch"])  # shared by every panel
    for ax in axes[-1]:
        ax.set_xlabel("epoch", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("valid BLEU", fontsize=8)
    handles = legend_handles(colour, **drawn)
    width, height = fig.get_size_inches()
    per_line = max(1, min(len(handles), int(width / LEGEND_ENTRY_INCHES)))
    fig.legend(handles=handles, loc="lower center", ncol=per_line, fontsize=7, frameon=False)
    fig.suptitle(wrapped_title(f"{title}: validation BLEU per epoch", width), fontsize=9)
    legend_inches = 0.1 + 0.2 * math.ceil(len(handles) / per_line)
    fig.tight_layout(rect=(0, legend_inches / height, 1, 1))  # the legend below the panels
    return save_figure(fig, path)


def _draw_trial(ax, trial: pd.DataFrame, colour: str, finished: bool, thin: bool) -> None:
    ax.plot(trial["epoch"], trial["valid_bleu"], color=colour, linewidth=0.7 if thin else 1.2,
            linestyle="-" if finished else "--")
    lowered = trial[trial["epoch"].isin(lr_lowered_after(trial))]
    ax.scatter(lowered["epoch"], lowered["valid_bleu"], marker="v", s=14, color=colour, zorder=3)
    best = trial[trial["epoch"] == trial["best_epoch"].iloc[-1]]
    if finished:
        ax.scatter(best["epoch"], best["valid_bleu"], marker="o", s=22, color=colour, edgecolors="black",
                   linewidths=0.6, zorder=4)
    else:  # its best epoch so far has no test score yet: an open circle
        ax.scatter(best["epoch"], best["valid_bleu"], marker="o", s=22, facecolors="none", edgecolors=colour,
                   linewidths=1.0, zorder=4)


def legend_handles(colour: dict[int, str], lowered: bool, unfinished: bool) -> list:
    """The seeds' colours and the marks the figure shows: the lr mark only where a trial's rate
    was lowered, the dashed line only where a trial is still training."""
    # matplotlib loads with the first figure: commands that draw none start faster
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, label=f"seed {seed}") for seed, c in colour.items()]
    handles += [Line2D([], [], marker="o", linestyle="", color="grey", markeredgecolor="black",
                       label="best epoch (tested)")]
    if lowered:
        handles += [Line2D([], [], marker="v", linestyle="", color="grey", label="lr lowered after it")]
    if unfinished:
        handles += [Line2D([], [], linestyle="--", color="grey", label="not finished"),
                    Line2D([], [], marker="o", linestyle="", markerfacecolor="none", markeredgecolor="grey",
                           label="best so far (not tested)")]
    return handles
