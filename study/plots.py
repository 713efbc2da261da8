"""PNG plots of a study table: BLEU per configuration (bar), BLEU against a config value
such as depth (line), and BLEU against training speed with the Pareto front."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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


def bar_plot(rows: pd.DataFrame, title: str, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 0.7 * len(rows) + 2), 4))
    labels = list(rows["label"])
    means = [0.0 if math.isnan(m) else m for m in rows["bleu_mean"]]
    errors = [[0.0 if math.isnan(m) or math.isnan(lo) else m - lo for m, lo in zip(rows["bleu_mean"], rows["ci_low"])],
              [0.0 if math.isnan(m) or math.isnan(hi) else hi - m for m, hi in zip(rows["bleu_mean"], rows["ci_high"])]]
    bars = ax.bar(range(len(labels)), means, yerr=errors, capsize=3, color="#4c72b0")
    for bar, row in zip(bars, rows.to_dict("records")):
        if row["n"] == 0:
            bar.set_color("#bbbbbb")
            ax.annotate(row["status"].split(" (")[0], (bar.get_x() + bar.get_width() / 2, 0.5), ha="center",
                        rotation=90, va="bottom", fontsize=8)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("test BLEU (mean, 95% CI)")
    ax.set_title(title, fontsize=9)
    return _save(plt, fig, path)


def line_plot(rows: pd.DataFrame, x_values: list, x_label: str, title: str, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 4))
    frame = rows.assign(x=x_values)
    ok = _finite(frame, "bleu_mean")
    ax.errorbar(ok["x"], ok["bleu_mean"], yerr=[ok["bleu_mean"] - ok["ci_low"].fillna(ok["bleu_mean"]),
                                                 ok["ci_high"].fillna(ok["bleu_mean"]) - ok["bleu_mean"]],
                marker="o", capsize=3)
    ax.set_xlabel(x_label)
    ax.set_ylabel("test BLEU (mean, 95% CI)")
    ax.set_title(title, fontsize=9)
    return _save(plt, fig, path)


def speed_plot(rows: pd.DataFrame, title: str, path: Path) -> Path:
    """BLEU against training tokens/s; the Pareto front (faster and better) is joined by a line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    ok = _finite(rows, "bleu_mean", "train_tokens_per_s").reset_index(drop=True)
    points = list(zip(ok["train_tokens_per_s"], ok["bleu_mean"]))
    ax.scatter([p[0] for p in points], [p[1] for p in points], color="#4c72b0")
    for (x, y), label in zip(points, ok["label"]):
        ax.annotate(label, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    front = pareto_front(points)
    if len(front) > 1:
        ax.plot([points[i][0] for i in front], [points[i][1] for i in front], color="#dd8452", label="Pareto front")
        ax.legend(fontsize=8)
    ax.set_xlabel("training target tokens/s")
    ax.set_ylabel("test BLEU")
    ax.set_title(title, fontsize=9)
    return _save(plt, fig, path)


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
