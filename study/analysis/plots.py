"""Plots of a study table, each as PNG and PDF (vector, for papers): BLEU per configuration
(bar), BLEU against a config value such as depth (line, one series per value of the study's
other axes), and BLEU against training speed with the Pareto front.

They carry the table's marks: † after a row still improving when its training ended, hatched
bars (and a note) for rows cut short by the wall-time cap, intervals clipped to BLEU's range
[0, 100] (a t-interval from two seeds can reach far beyond it)."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pandas as pd

from nmt.fileio import atomic_write
from nmt.figures import literal_text, subplots
from study.analysis.tables import SCORED, STILL_IMPROVING, footnotes, status_counts

BLEU_RANGE = (0.0, 100.0)


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of points no other point beats on both axes (both maximised), by x."""
    front = []
    for i, (x, y) in enumerate(points):
        dominated = any((ox >= x and oy >= y) and (ox > x or oy > y) for j, (ox, oy) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


def _finite(rows: pd.DataFrame, *columns: str) -> pd.DataFrame:
    mask = pd.Series(True, index=rows.index)
    for column in columns:
        mask &= rows[column].apply(lambda v: v is not None and not (isinstance(v, float) and math.isnan(v)))
    return rows[mask]


def marked_label(row: dict) -> str:
    """The row's label with its marks: † still improving, "(truncated)" cut by the wall-time cap."""
    label = f"{row['label']} {STILL_IMPROVING}" if row.get("still_improving") else row["label"]
    return f"{label} (truncated)" if row.get("truncated") else label


def interval_errors(rows: pd.DataFrame) -> list[list[float]]:
    """Error bar lengths below and above each mean: the 95% interval, clipped to BLEU's range."""
    low, high = [], []
    for mean, lo, hi in zip(rows["bleu_mean"], rows["ci_low"], rows["ci_high"]):
        if math.isnan(mean) or math.isnan(lo) or math.isnan(hi):
            low.append(0.0)
            high.append(0.0)
        else:
            low.append(mean - max(lo, BLEU_RANGE[0]))
            high.append(min(hi, BLEU_RANGE[1]) - mean)
    return [low, high]


def _note_lines(rows: pd.DataFrame, width_inches: float, shows_speed: bool) -> list[str]:
    """The table's footnotes, wrapped to the figure's width; the one on the speed columns only
    under a figure that shows speed, and none on the bootstrap, which no figure draws."""
    chars = int(width_inches * 19)  # characters of 6.5 pt text per inch
    notes = [note for note in footnotes(rows) if (shows_speed or note != rows.attrs.get("speed_note"))
             and note != rows.attrs.get("translation_note")]
    # a no-break space keeps ablation labels ("- LayerNorm") in one piece
    return [line for note in notes for line in textwrap.wrap(note.replace("- ", "-\u00a0"), chars)]


def _figure(rows: pd.DataFrame, width: float, height: float, shows_speed: bool = False):
    """A figure with the table's footnotes under the axes; returns (figure, axes, footnote lines)."""
    lines = _note_lines(rows, width, shows_speed)
    fig, ax = subplots(figsize=(width, height + NOTE_LINE * len(lines)))
    if lines:
        fig.text(0.01, 0.01, "\n".join(lines), fontsize=6.5, va="bottom", ha="left", color="#444444")
    return fig, ax, len(lines)


NOTE_LINE = 0.12  # inches per footnote line


@literal_text
def bar_plot(rows: pd.DataFrame, title: str, path: Path, trials: pd.DataFrame | None = None,
             reference: str | None = None) -> list[Path]:
    """Mean test BLEU per row with its 95% interval (clipped to BLEU's range), each seed's score
    as a dot on its bar, and the reference row in its own colour."""
    records = rows.to_dict("records")
    fig, ax, notes = _figure(rows, max(5.0, 0.7 * len(rows) + 2), 4)
    labels = [marked_label(row) for row in records]
    means = [0.0 if math.isnan(m) else m for m in rows["bleu_mean"]]
    colours = ["#dd8452" if row["label"] == reference else "#4c72b0" for row in records]
    bars = ax.bar(range(len(labels)), means, yerr=interval_errors(rows), capsize=3, color=colours)
    for bar, row in zip(bars, records):
        if row["n"] == 0:
            bar.set_color("#bbbbbb")
            why = status_counts(row) + (" (reference)" if row["label"] == reference else "")
            ax.annotate(why, (bar.get_x() + bar.get_width() / 2, 0.5), ha="center", rotation=90, va="bottom",
                        fontsize=8)
        elif row.get("truncated"):
            bar.set_hatch("//")
            bar.set_facecolor("#9fb3d6")
            ax.annotate("truncated", (bar.get_x() + bar.get_width() / 2, 0.5), ha="center", rotation=90,
                        va="bottom", fontsize=7)
    if trials is not None and len(trials):
        scored = trials[trials["status"].isin(SCORED)]
        for index, row in enumerate(records):
            seeds = _finite(scored[scored["label"] == row["label"]], "test_bleu")["test_bleu"]
            offsets = [0.0] if len(seeds) == 1 else [0.25 * (i / (len(seeds) - 1) - 0.5) for i in range(len(seeds))]
            ax.scatter([index + o for o in offsets], list(seeds), s=10, color="black", zorder=3,
                       label="one seed" if index == 0 else None)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.0)  # outside: no bar hidden
    scored_labels = {row["label"] for row in records if row["n"] > 0}
    if reference is not None and reference in scored_labels:  # on its bar; a row without one says it above
        ax.annotate("reference", (list(rows["label"]).index(reference), 0), xytext=(0, 2), textcoords="offset points",
                    ha="center", va="bottom", fontsize=6, color="white")
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("test BLEU (mean, 95% CI over seeds)")
    # at least one BLEU point of height: rows all at 0 (a smoke check) would get a 0-0.05 axis
    ax.set_ylim(bottom=0, top=max(ax.get_ylim()[1], 1.0))
    _title(ax, title, fig.get_size_inches()[0])
    return _save(fig, path, notes)


@literal_text
def line_plot(rows: pd.DataFrame, x_values: list, x_label: str, title: str, path: Path,
              series: list[str] | None = None) -> list[Path]:
    """BLEU against ``x_values``: one line per distinct ``series`` label (the values of the
    study's other axes, e.g. GRU and ATR in a depth x unit grid), integer ticks for integer x."""
    fig, ax, notes = _figure(rows, 5, 4)
    frame = rows.assign(x=x_values, series=series if series is not None else [""] * len(rows))
    ok = _finite(frame, "bleu_mean")
    names = list(dict.fromkeys(ok["series"]))
    for name in names:
        line = ok[ok["series"] == name].sort_values("x")
        ax.errorbar(line["x"], line["bleu_mean"], yerr=interval_errors(line), marker="o", capsize=3,
                    label=name or None)
    improving = ok[ok["still_improving"] > 0]
    if len(improving):
        ax.scatter(improving["x"], improving["bleu_mean"], s=90, facecolors="none", edgecolors="#dd8452",
                   label=f"{STILL_IMPROVING} still improving when training ended", zorder=3)
    if len(improving) or len(names) > 1:
        ax.legend(fontsize=7)
    partial = partial_row_notes(ok)
    if all(isinstance(x, int) and not isinstance(x, bool) for x in ok["x"]):
        ticks = sorted(set(ok["x"]))
        notes_at = {x: text for x, _, text in partial}  # under the tick: clear of the lines and error bars
        ax.set_xticks(ticks, [f"{x}\n{notes_at[x]}" if x in notes_at else str(x) for x in ticks])
    else:
        for x, y, text in partial:
            ax.annotate(text, (x, y), xytext=(0, 6), textcoords="offset points", ha="center", va="bottom",
                        fontsize=7, color="#444444")
    ax.set_xlabel(x_label)
    ax.set_ylabel("test BLEU (mean, 95% CI over seeds)")
    _title(ax, title, fig.get_size_inches()[0])
    return _save(fig, path, notes)


def partial_row_notes(points: pd.DataFrame) -> list[tuple[object, float, str]]:
    """(x, mean BLEU, "1 of 3 seeds") for each point whose row has fewer scored seeds than planned:
    a study still running draws a first seed's score as a point like the others, and without this
    note only the missing error bar would tell it apart."""
    return [(x, mean, f"{int(n)} of {int(seeds)} seeds")
            for x, mean, n, seeds in zip(points["x"], points["bleu_mean"], points["n"], points["seeds"])
            if 0 < n < seeds]


@literal_text
def speed_plot(rows: pd.DataFrame, title: str, path: Path) -> list[Path]:
    """BLEU against training tokens/s; the Pareto front (faster and better) is joined by a line."""
    fig, ax, notes = _figure(rows, 6, 4.5, shows_speed=True)
    ok = _finite(rows, "bleu_mean", "train_tokens_per_s").reset_index(drop=True)
    points = list(zip(ok["train_tokens_per_s"], ok["bleu_mean"]))
    ax.scatter([p[0] for p in points], [p[1] for p in points], color="#4c72b0")
    front = pareto_front(points)
    if len(front) > 1:
        ax.plot([points[i][0] for i in front], [points[i][1] for i in front], color="#dd8452", label="Pareto front")
        ax.legend(fontsize=8, loc="best")
    ax.set_xlabel("training target tokens/s")
    ax.set_ylabel("test BLEU")
    _title(ax, title, fig.get_size_inches()[0])
    _layout(fig, notes)  # the axes' final place, where the labels are measured
    place_labels(fig, ax, points, [marked_label(row) for row in ok.to_dict("records")])
    return _save(fig, path, notes)


# label offsets in points, tried in this order: right-up, left-up, right-down, left-down, further out
_OFFSETS = [(3, 3), (-3, 3), (3, -9), (-3, -9), (3, 10), (-3, 10), (3, -16), (-3, -16), (3, 17), (-3, 17),
            (3, -23), (-3, -23)]
LABEL_GAP_POINTS = 2.0  # the least space between two labels, so that two never read as one
MARKER_RADIUS_POINTS = 3.5  # a scatter marker of the default size (36 square points), with a rim


def place_labels(fig, ax, points: list[tuple[float, float]], labels: list[str]) -> list:
    """Annotate each point with its label at the first offset where the label stays inside the
    axes, keeps a gap from every label placed before it and covers no other point's marker
    (measured with the figure's renderer); a label with no such place goes where it collides
    with nothing if it can, leaving the frame least. Returns the labels' boxes."""
    # matplotlib loads with the first figure: commands that draw none start faster
    from matplotlib.transforms import Bbox

    fig.canvas.draw()  # fixes the axes limits and the transform the boxes are measured in
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    gap = LABEL_GAP_POINTS * fig.dpi / 72
    radius = MARKER_RADIUS_POINTS * fig.dpi / 72
    markers = [Bbox.from_extents(px - radius, py - radius, px + radius, py + radius)
               for px, py in ax.transData.transform(points)] if points else []
    placed = []
    for index, ((x, y), label) in enumerate(zip(points, labels)):
        best = None
        for dx, dy in _OFFSETS:
            text = ax.annotate(label, (x, y), fontsize=7, xytext=(dx, dy), textcoords="offset points",
                               ha="left" if dx > 0 else "right")
            box = text.get_window_extent(renderer)
            outside = max(0.0, frame.x0 - box.x0) + max(0.0, box.x1 - frame.x1) + \
                max(0.0, frame.y0 - box.y0) + max(0.0, box.y1 - frame.y1)
            spaced = Bbox.from_extents(box.x0 - gap, box.y0 - gap, box.x1 + gap, box.y1 + gap)
            collides = any(spaced.overlaps(other) for other in placed) or \
                any(box.overlaps(marker) for other, marker in enumerate(markers) if other != index)
            score = (collides, outside)
            if best is None or score < best[0]:
                if best is not None:
                    best[1].remove()
                best = (score, text, box)
            else:
                text.remove()
            if score == (False, 0.0):
                break
        placed.append(best[2])
    return placed


def _title(ax, title: str, width_inches: float) -> None:
    ax.set_title(wrapped_title(title, width_inches), fontsize=9)


def wrapped_title(title: str, width_inches: float) -> str:
    """The title, wrapped to the figure's width instead of cut at both ends."""
    return "\n".join(textwrap.wrap(title, max(30, int(width_inches * 13))))


def _layout(fig, note_lines: int) -> None:
    bottom = (NOTE_LINE * note_lines + 0.1) / fig.get_size_inches()[1] if note_lines else 0.0
    fig.tight_layout(rect=(0, bottom, 1, 1))


def _save(fig, path: Path, note_lines: int) -> list[Path]:
    _layout(fig, note_lines)
    return save_figure(fig, path)


def save_figure(fig, path: Path) -> list[Path]:
    """The PNG and, beside it, the same figure as PDF (no creation date: the same figure gives the
    same file)."""
    vector = path.with_suffix(".pdf")
    # whole files or none, like every file the tool writes (nmt.fileio.atomic_write)
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    atomic_write(vector, lambda tmp: fig.savefig(tmp, format="pdf", metadata={"CreationDate": None}))
    return [path, vector]
