"""Training progress beside the tables: progress.csv from the trials' epoch histories, and the
learning curves drawn from it (which trial finished, its best epoch, where the lr was lowered).

Modules covered here: ``study.analysis.exports``, ``study.analysis.plots`` and ``nmt.figures``."""

from __future__ import annotations

import csv

import pandas as pd
import pytest

from study.analysis.curves import (
    MAX_PANELS,
    PROGRESS_FILE,
    _draw_trial,
    legend_handles,
    load_progress,
    lr_lowered_after,
    panels_of,
    save_progress,
    whole_epoch_ticks,
)


def epoch(number, lr, bleu, best):
    return {"epoch": float(number), "lr": lr, "train_ppl": 9.0 - number, "valid_ppl": 12.0 - number,
            "valid_bleu": bleu, "best_epoch": float(best), "steps": 10.0 * number}


def trial(label, seed, status="ok", history=None, row=0):
    history = history if history is not None else [epoch(1, 1e-3, 10.0, 1), epoch(2, 1e-3, 12.5, 2),
                                                   epoch(3, 5e-4, 12.0, 2)]
    return {"key": f"{label}-{seed}", "label": label, "row": row, "seed": seed, "status": status, "config": {},
            "params": {}, "error": "", "hyp_path": None, "artifacts": [], "history": history,
            "metrics": {"test_bleu": 11.0 + seed, "valid_bleu": 12.5, "params": 10, "weight_matrices": 6}}


def test_progress_csv_has_one_row_per_trial_and_epoch_in_the_records_order(tmp_path):
    shuffled = [epoch(2, 1e-3, 12.5, 2), epoch(1, 1e-3, 10.0, 1)]
    records = [trial("GRU, small", 2, history=shuffled), trial("ATR", 1, history=[epoch(1, 1e-3, float("nan"), 1)])]
    path = save_progress(records, tmp_path)
    assert path == tmp_path / PROGRESS_FILE
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["label"], r["seed"], r["epoch"]) for r in rows] == [("GRU, small", "2", "1"), ("GRU, small", "2", "2"),
                                                                   ("ATR", "1", "1")]
    assert rows[1]["valid_bleu"] == "12.5" and rows[1]["lr"] == "0.001" and rows[1]["best_epoch"] == "2"
    assert rows[2]["valid_bleu"] == ""  # a diverged epoch's NaN is an empty cell
    frame = load_progress(tmp_path)
    assert list(frame["epoch"]) == [1, 2, 1] and frame["valid_bleu"].isna().tolist() == [False, False, True]


def test_records_without_histories_keep_the_progress_file_they_have(tmp_path):
    save_progress([trial("GRU", 1)], tmp_path)
    before = (tmp_path / PROGRESS_FILE).read_text(encoding="utf-8")
    saved = [{**trial("GRU", 1), "history": None}]  # as read back from trials.jsonl
    assert save_progress(saved, tmp_path) is None
    assert (tmp_path / PROGRESS_FILE).read_text(encoding="utf-8") == before
    assert save_progress(saved, tmp_path / "elsewhere") is None and load_progress(tmp_path / "elsewhere") is None


def test_a_progress_file_without_its_columns_is_refused_in_one_line(tmp_path):
    from nmt.errors import UserError

    (tmp_path / PROGRESS_FILE).write_text("label,seed\nGRU,1\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"progress.csv: not a progress file \(no column key, epoch, lr"):
        load_progress(tmp_path)


def test_the_lr_is_lowered_after_the_epoch_before_its_row_shows_the_lower_rate():
    epochs = pd.DataFrame({"epoch": [5, 1, 2, 3, 4], "lr": [2.5e-4, 1e-3, 1e-3, 5e-4, 5e-4]})
    assert lr_lowered_after(epochs) == [2, 4]
    assert lr_lowered_after(pd.DataFrame({"epoch": [1, 2], "lr": [1e-3, 1e-3]})) == []


def test_one_panel_per_row_in_the_tables_order_and_one_for_a_search():
    progress = pd.DataFrame({"label": ["b", "b", "a", "c"]})
    assert panels_of(progress, ["a", "b"]) == [["a"], ["b"], ["c"]]
    many = pd.DataFrame({"label": [f"#{i}" for i in range(MAX_PANELS + 1)]})
    assert panels_of(many, []) == [[f"#{i}" for i in range(MAX_PANELS + 1)]]


@pytest.mark.parametrize("finished", [True, False])
def test_a_trial_is_drawn_with_its_best_epoch_and_lr_drops_dashed_until_it_finishes(finished):
    from nmt.figures import subplots

    fig, ax = subplots(figsize=(6, 4))
    epochs = pd.DataFrame([epoch(1, 1e-3, 10.0, 1), epoch(2, 1e-3, 12.5, 2), epoch(3, 5e-4, 12.0, 2),
                           epoch(4, 5e-4, 12.2, 2)])
    _draw_trial(ax, epochs, "C0", finished=finished, thin=False)
    line, = ax.lines
    assert list(line.get_xdata()) == [1, 2, 3, 4] and line.get_linestyle() == ("-" if finished else "--")
    lowered, best = ax.collections
    assert lowered.get_offsets().tolist() == [[2.0, 12.5]]  # the lr fell after epoch 2
    assert best.get_offsets().tolist() == [[2.0, 12.5]]  # the last row's best epoch
    # filled once the trial is tested; an open circle while it trains on
    assert (len(best.get_facecolors()) > 0 and best.get_facecolors()[0][3] > 0) == finished


@pytest.mark.parametrize("lowered, unfinished", [(False, False), (True, False), (True, True)])
def test_the_legend_explains_only_the_marks_the_figure_shows(lowered, unfinished):
    labels = [h.get_label() for h in legend_handles({1: "C0", 2: "C1"}, lowered=lowered, unfinished=unfinished)]
    assert labels[:3] == ["seed 1", "seed 2", "best epoch (tested)"]
    assert ("lr lowered after it" in labels) == lowered and ("not finished" in labels) == unfinished
    assert ("best so far (not tested)" in labels) == unfinished


@pytest.mark.parametrize("epochs", [[1], [1, 2], [3, 4, 5], list(range(1, 41))])
def test_the_epoch_axis_has_whole_epochs_only_however_short_the_training(epochs):
    from nmt.figures import subplots

    fig, ax = subplots(figsize=(6, 4))
    ax.plot(epochs, [float(e) for e in epochs])
    whole_epoch_ticks(ax, pd.Series(epochs))
    low, high = ax.get_xlim()
    shown = [tick for tick in ax.get_xticks() if low <= tick <= high]
    assert len(shown) >= min(len(epochs), 2) and all(tick == int(tick) for tick in shown)
    assert low < epochs[0] and high > epochs[-1] - 1e-9


def test_exports_write_the_curves_and_a_rebuild_from_saved_records_draws_them_again(tmp_path):
    from study.analysis.exports import write_exports
    from study.store.study_state import write_state
    from study.spec.expansion import expand
    from study.spec.loading import load_study, spec_to_dict
    from study.store.records import load_saved_records

    spec = load_study("cells", ["seeds=2"])
    slots = {(t.label, t.seed): t for t in expand(spec)}

    def study_trial(label, seed, **options):  # a trial of the study: its key and config (tables hold only those)
        planned = slots[(label, seed)]
        return {**trial(label, seed, row=planned.row, **options), "key": planned.key, "config": planned.config}

    records = [study_trial("LSTM", 1), study_trial("LSTM", 2), study_trial("GRU", 1),
               study_trial("GRU", 2, status="running", history=[epoch(1, 1e-3, 9.0, 1)])]
    write_state(tmp_path, {"study": spec.name, "spec": spec_to_dict(spec), "request": spec.tree})
    outputs, _ = write_exports(spec, records, None, tmp_path)
    names = {p.name for p in outputs}
    assert {PROGRESS_FILE, "curves.png", "curves.pdf"} <= names
    assert len(load_progress(tmp_path)) == 3 + 3 + 3 + 1
    assert (tmp_path / "report.html").read_text().count("data:image/png;base64,") == 3  # bleu, speed, curves
    progress, pdf = ((tmp_path / name).read_bytes() for name in (PROGRESS_FILE, "curves.pdf"))
    # a committed study rebuilds from trials.jsonl, whose records carry no epochs
    outputs, _ = write_exports(spec, load_saved_records(tmp_path), None, tmp_path)
    assert PROGRESS_FILE not in {p.name for p in outputs} and "curves.png" in {p.name for p in outputs}
    assert (tmp_path / PROGRESS_FILE).read_bytes() == progress
    assert (tmp_path / "curves.pdf").read_bytes() == pdf  # the same figure, byte for byte


def test_drawing_a_study_s_figures_leaves_matplotlib_s_backend_and_settings_as_they_were(tmp_path):
    """A notebook that imports the API keeps its backend, its open figures and its math parsing."""
    import matplotlib
    import matplotlib.pyplot as plt

    from study.analysis import plots

    before = (matplotlib.get_backend(), matplotlib.rcParams["text.parse_math"], plt.get_fignums())
    rows = pd.DataFrame({"label": ["$\\textbf{GRU}$"], "bleu_mean": [30.0], "bleu_std": [1.0], "n": [2], "seeds": [2],
                         "ci_low": [28.0], "ci_high": [32.0], "still_improving": [0], "uneven_epochs": [False],
                         "train_tokens_per_s": [100.0], "status": ["ok"],
                         **{status: [0] for status in ("truncated", "diverged", "failed", "stopped", "running", "ok")}})
    written = plots.bar_plot(rows, "$x^{2", tmp_path / "bleu.png")  # text drawn as written, not parsed as math
    assert all(path.stat().st_size > 0 for path in written)
    assert (matplotlib.get_backend(), matplotlib.rcParams["text.parse_math"], plt.get_fignums()) == before
