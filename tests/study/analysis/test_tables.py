"""Table statistics: seeds aggregated, diverged and failed seeds counted but left out of BLEU.

Modules covered here: ``study.analysis.exports``, ``study.analysis.numerics_note``, ``study.analysis.plots``
and ``study.analysis.stored_study``."""

from __future__ import annotations

import math

import pytest

from study.analysis.plots import _note_lines, pareto_front
from study.analysis.tables import build_table, paired_test, status_text, t95
from study.analysis.tables import warnings as table_warnings


def record(label, row, seed, status, bleu=None, error="", hyp=None):
    metrics = {"params": 1000, "weight_matrices": 6, "train_tokens_per_s": 50.0}
    if bleu is not None:
        metrics.update(test_bleu=bleu, valid_bleu=bleu - 1, test_chrf=bleu + 10, decode_words_per_s=20.0)
    return {"key": f"{label}{seed}", "label": label, "row": row, "seed": seed, "config": {}, "params": {},
            "status": status, "error": error, "hyp_path": hyp, "artifacts": [], "metrics": metrics}


def markdown_cells(markdown: str) -> tuple[list[str], dict[str, list[str]]]:
    """A table.md's header and each row's cells, keyed by its Model label."""
    lines = markdown.splitlines()
    header = [cell.strip() for cell in lines[2].strip("|").split("|")]
    shown = {line.split("|")[1].strip(): [cell.strip() for cell in line.strip().strip("|").split("|")]
             for line in lines if line.startswith("| ") and "Model" not in line}
    return header, shown


def test_mean_std_ci_and_delta_over_finished_seeds():
    records = [record("base", 0, 1, "ok", 20.0), record("base", 0, 2, "ok", 22.0), record("base", 0, 3, "ok", 24.0),
               record("var", 1, 1, "ok", 10.0), record("var", 1, 2, "diverged", 3.0), record("var", 1, 3, "failed",
                                                                                            error="ValueError: x")]
    rows = build_table(records, "t", "base", None).rows.set_index("label")
    base, var = rows.loc["base"], rows.loc["var"]
    assert base["bleu_mean"] == 22.0 and base["bleu_std"] == 2.0 and base["n"] == 3
    assert base["ci_high"] - base["bleu_mean"] == pytest.approx(4.302653 * 2.0 / math.sqrt(3))
    assert var["bleu_mean"] == 10.0 and var["n"] == 1 and var["delta"] == -12.0  # diverged/failed seeds left out
    assert var["status"] == "1 ok, 1 diverged, 1 failed (ValueError: x)"
    assert (var["ok"], var["diverged"], var["failed"]) == (1, 1, 1)


def test_the_last_note_is_the_sacrebleu_signature_the_trials_recorded():
    signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    records = [record("base", 0, seed, "ok", 20.0 + seed) for seed in (1, 2)]
    for r in records:
        r["metrics"]["bleu_signature"] = signature
    table = build_table(records, "t", "base", None)
    assert table.markdown().rstrip().endswith(f"BLEU: sacreBLEU {signature}.")
    records[1]["metrics"]["bleu_signature"] = signature.replace("2.6.0", "2.5.1")
    records.append(record("base", 0, 3, "ok", 23.0))  # recorded none
    note = build_table(records, "t", "base", None).markdown().rstrip().splitlines()[-1]
    assert note == (f"BLEU: sacreBLEU {signature} (1 trials); {signature.replace('2.6.0', '2.5.1')} (1 trials); "
                    "1 trials recorded none.")
    records = [record("base", 0, 1, "ok", 20.0)]
    assert "sacreBLEU" not in build_table(records, "t", "base", None).markdown()  # nothing recorded, nothing said


def test_a_row_whose_seeds_all_diverged_says_so():
    records = [record("base", 0, 1, "ok", 20.0), record("bad", 1, 1, "diverged", 0.0), record("bad", 1, 2, "diverged")]
    table = build_table(records, "t", "base", None)
    bad = table.rows.set_index("label").loc["bad"]
    assert bad["n"] == 0 and math.isnan(bad["bleu_mean"]) and bad["status"] == "diverged"
    line = next(line for line in table.markdown().splitlines() if line.startswith("| bad"))
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[1] == "diverged" and cells[3] == "-"  # BLEU column, no delta


def test_a_half_finished_study_shows_dashes_where_rows_have_no_trials_yet():
    # study.table on a study stopped between sessions: the reference row and another have no trials yet
    records = [record("tanh", 0, 1, "ok", 30.0), record("tanh", 0, 2, "running")]
    table = build_table(records, "t", "GRU", None, row_order=["tanh", "GRU", "GRU + CG"])
    header, shown = markdown_cells(table.markdown())
    wm, delta = header.index("WM"), header.index("Δ")
    assert shown["tanh"][wm] == "6" and shown["GRU"][wm] == "-" and shown["GRU + CG"][wm] == "-"
    assert shown["GRU"][1] == "not started" and shown["GRU"][delta] == "-"  # no "0" for a reference not yet trained
    # whether its driver still runs is not in the records (study.list tells): unfinished, not "running"
    assert shown["tanh"][header.index("status")] == "1 ok, 1 unfinished"
    alone = build_table([record("GRU", 0, 1, "running")], "t", "GRU", None).rows.iloc[0]
    assert alone["status"] == "unfinished" and alone["running"] == 1  # the CSV's count column keeps its name
    assert "nan" not in table.markdown()


def test_a_half_finished_study_counts_the_seeds_it_has_not_started_and_shows_no_spread_for_one():
    from study.analysis.stored_study import table_layout
    from study.spec.loading import load_study

    layout = table_layout(load_study("ablation_srnmt"))
    assert layout.planned_seeds == {label: 3 for label in layout.row_order} and len(layout.row_order) == 8
    full, other = layout.row_order[:2]
    records = [record(full, 0, 1, "ok", 30.0), record(full, 0, 2, "running")]
    table = build_table(records, "t", layout.reference, None, layout.row_order, layout.planned_seeds)
    header, shown = markdown_cells(table.markdown())
    assert shown[full][header.index("n")] == "1/3" and shown[other][header.index("n")] == "0/3"
    # the seed with no record yet is named: not "1 ok, 1 unfinished" as if the row had two
    assert shown[full][header.index("status")] == "1 ok, 1 unfinished, 1 not started"
    assert shown[other][header.index("status")] == "not started"
    assert shown[full][header.index("± std")] == "-" and shown[full][header.index("BLEU")] == "30.00"
    assert table.rows.set_index("label").loc[full, "bleu_std"] == 0.0  # the CSV keeps its number


def test_t_critical_values():
    assert t95(1) == pytest.approx(12.7062, abs=1e-4) and t95(4) == pytest.approx(2.7764, abs=1e-4)
    assert t95(100) == pytest.approx(1.9840, abs=1e-4)
    assert 3.182 < t95(2.9) < 4.303  # a fractional df is not rounded: between its neighbours
    assert math.isnan(t95(0))


def test_the_seed_interval_of_each_difference_is_shown_beside_the_bootstrap():
    records = [record("base", 0, 1, "ok", 20.0), record("base", 0, 2, "ok", 22.0), record("base", 0, 3, "ok", 24.0),
               record("wide", 1, 1, "ok", 28.0), record("wide", 1, 2, "ok", 30.0), record("wide", 1, 3, "ok", 32.0),
               record("one", 2, 1, "ok", 25.0), record("one", 2, 2, "failed", error="ValueError: x")]
    table = build_table(records, "t", "base", None)
    rows = table.rows.set_index("label")
    half = 2.7764451 * math.sqrt(4 / 3 + 4 / 3)  # Welch: equal spreads of 3 seeds each, 4 degrees of freedom
    assert (rows.loc["wide", "delta_seeds_ci_low"], rows.loc["wide", "delta_seeds_ci_high"]) == \
        pytest.approx((8 - half, 8 + half))
    assert math.isnan(rows.loc["one", "delta_seeds_ci_low"]) and math.isnan(rows.loc["base", "delta_seeds_ci_low"])
    header, shown = markdown_cells(table.markdown())
    assert header.index("Δ CI (seeds)") + 1 == header.index("Δ CI (bootstrap)")
    column = header.index("Δ CI (seeds)")
    assert shown["wide"][column] == f"[+{8 - half:.2f}, +{8 + half:.2f}]" == "[+3.47, +12.53]"
    assert shown["base"][column] == "-" and shown["one"][column] == "-"  # the reference; a single seed
    assert r"$\Delta$ CI (seeds)" in table.latex()


def test_a_difference_too_small_for_two_decimals_keeps_its_sign_and_size():
    # rows all near 0 BLEU (a smoke run): "+0.00" beside a significant p would read as a contradiction
    records = [record("base", 0, seed, "ok", bleu) for seed, bleu in ((1, 0.0100), (2, 0.0101), (3, 0.0102))] + \
              [record("tiny", 1, seed, "ok", bleu) for seed, bleu in ((1, 0.0130), (2, 0.0131), (3, 0.0132))] + \
              [record("big", 2, seed, "ok", bleu) for seed, bleu in ((1, 1.0), (2, 1.5), (3, 2.0))]
    header, shown = markdown_cells(build_table(records, "t", "base", None).markdown())
    assert shown["tiny"][header.index("Δ")] == "+0.003"
    assert shown["tiny"][header.index("Δ CI (seeds)")] == "[+0.0028, +0.0032]"  # Welch: 0.003 ± 0.00023
    # as formatted: tabulate on its own would print "1.49" and "1.5"
    assert shown["big"][header.index("Δ")] == "+1.49" and shown["big"][header.index("BLEU")] == "1.50"
    assert shown["tiny"][header.index("BLEU")] == "0.01"  # unsigned columns keep two decimals


def test_equal_systems_are_not_called_significant(tmp_path):
    refs = [f"sentence number {i} is here" for i in range(30)]
    hyps = [f"sentence number {i} was here" for i in range(30)]
    paths = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.hyp"
        path.write_text("\n".join(hyps) + "\n")
        paths.append(str(path))
    ours = [record("x", 1, 1, "ok", 10.0, hyp=paths[0])]
    theirs = [record("ref", 0, 1, "ok", 10.0, hyp=paths[1])]
    same = paired_test(ours, theirs, refs, samples=200)
    assert same.p_value == 1.0 and same.ci_low == same.ci_high == 0.0
    better = tmp_path / "c.hyp"
    better.write_text("\n".join(refs) + "\n")
    test = paired_test([record("x", 1, 1, "ok", 90.0, hyp=str(better))], theirs, refs, samples=200)
    assert test.p_value < 0.05 and 0 < test.ci_low <= test.delta <= test.ci_high


def test_a_translation_of_another_length_leaves_the_bootstrap_blank_and_says_which(tmp_path):
    refs = [f"sentence number {i} is here" for i in range(30)]
    good, short = tmp_path / "good.hyp", tmp_path / "short.hyp"
    good.write_text("\n".join(refs) + "\n")
    short.write_text("\n".join(refs[:27]) + "\n")
    records = [record("ref", 0, 1, "ok", 90.0, hyp=str(good)), record("x", 1, 1, "ok", 80.0, hyp=str(short)),
               record("y", 2, 1, "ok", 85.0, hyp=str(good))]
    table = build_table(records, "T", "ref", refs)
    rows = table.rows.set_index("label")
    assert math.isnan(rows.loc["x", "p_value"]) and not math.isnan(rows.loc["y", "p_value"])
    note = "x seed 1 has 27 lines"
    assert note in table.markdown() and note in table.latex()
    assert any(note in line and "test set has 30" in line for line in table_warnings(table.rows))
    assert not any("lines" in line for line in _note_lines(table.rows, 20.0, shows_speed=True))  # no plot draws it
    assert not any("lines" in line for line in table_warnings(build_table(records[::2], "T", "ref", refs).rows))


def test_status_text_and_pareto_front():
    assert status_text({"ok": 2, "diverged": 0}, []) == "ok"
    assert status_text({"ok": 0, "stopped": 3}, []) == "stopped"
    assert status_text({"ok": 1}, [], not_started=2) == "1 ok, 2 not started"
    assert status_text({"failed": 1}, ["ValueError: x"], not_started=1) == "1 failed (ValueError: x), 1 not started"
    assert pareto_front([(1, 5), (2, 4), (3, 1), (1, 1), (2, 2)]) == [0, 1, 2]


def test_exports_of_a_depth_study_include_the_line_plot(tmp_path):
    from study.analysis.exports import write_exports
    from study.store.study_state import write_state
    from study.spec.expansion import expand
    from study.spec.loading import load_study, spec_to_dict

    spec = load_study("depth_srnmt")
    records = [record(t.label, t.row, t.seed, "ok", 10.0 + t.row) | {"key": t.key, "config": t.config}
               for t in expand(spec)]
    write_state(tmp_path, {"study": spec.name, "spec": spec_to_dict(spec), "request": spec.tree})  # as a run has
    outputs, _ = write_exports(spec, records, None, tmp_path)
    names = {p.name for p in outputs}
    assert {"table.md", "table.csv", "table.tex", "trials.csv", "bleu.png", "bleu_vs_speed.png",
            "bleu_vs_enc_layers.png", "bleu.pdf", "bleu_vs_speed.pdf", "bleu_vs_enc_layers.pdf", "report.html"} <= names
    assert (tmp_path / "report.html").read_text().count("data:image/png;base64,") == 3
    assert all(p.stat().st_size > 0 for p in outputs)
    assert "| SR-NMT 6L" in (tmp_path / "table.md").read_text()
    assert (tmp_path / "table.tex").read_text().endswith(f"\\label{{tab:{tmp_path.name}}}\n\\end{{table}}\n")
    compact = (tmp_path / "table_compact.tex").read_text()  # one paper column: eight columns, small type
    assert r"\begin{tabular}{lrrrrrrr}" in compact and r"\small" in compact
    assert "Model & BLEU & $\\pm$ std & $\\Delta$ & p & best epoch & params & tok/s" in compact
    assert f"\\label{{tab:{tmp_path.name}-compact}}" in compact
    pdf = (tmp_path / "bleu.pdf").read_bytes()
    write_exports(spec, records, None, tmp_path)
    assert (tmp_path / "bleu.pdf").read_bytes() == pdf  # vector output without a creation date: reproducible


def test_a_line_plot_draws_one_line_per_value_of_the_other_axes(tmp_path):
    from study.analysis.exports import line_series
    from study.spec.expansion import expand
    from study.spec.loading import load_study

    path = tmp_path / "two_axes.yaml"
    path.write_text("""name: two_axes
description: depth x unit
data: {preset: synthetic, size: 300}
grid:
  model.cell: [gru, atr]
  model.enc_layers+model.dec_layers: [1, 2]
table: {plot: line, x: model.enc_layers}
""")
    configs = [t.config for t in expand(load_study(str(path)))]
    assert line_series(load_study(str(path)), configs, "model.enc_layers") == ["GRU", "GRU", "ATR", "ATR"]
    depth = load_study("depth_srnmt")  # encoder and decoder depth linked: one line
    assert set(line_series(depth, [t.config for t in expand(depth)], "model.enc_layers")) == {""}


def test_a_line_plot_names_every_key_its_x_axis_links(tmp_path):
    from study.analysis.exports import x_axis_name
    from study.spec.loading import load_study

    assert x_axis_name(load_study("depth_srnmt"), "model.enc_layers") == "encoder and decoder layers (each)"
    path = tmp_path / "widths.yaml"
    path.write_text("""name: widths
description: width x depth
data: {preset: synthetic, size: 300}
grid:
  model.hidden+model.emb: [32, 64]
  model.enc_layers: [1, 2]
table: {plot: line, x: model.hidden}
""")
    spec = load_study(str(path))
    assert x_axis_name(spec, "model.hidden") == "hidden size = embedding size"
    assert x_axis_name(spec, "model.enc_layers") == "encoder layers"  # an axis of its own


def test_a_line_plot_says_which_points_have_fewer_seeds_than_planned():
    from study.analysis.plots import partial_row_notes

    records = [record("SR-NMT 1L", 0, seed, "ok", 30.0 + seed) for seed in (1, 2, 3)]
    records += [record("SR-NMT 2L", 1, 1, "ok", 33.0), record("SR-NMT 2L", 1, 2, "running", 0.0)]
    rows = build_table(records, "t", "SR-NMT 1L", None).rows.set_index("label")
    rows.loc["SR-NMT 2L", "seeds"] = 3  # seed 3 not started: the planned count comes from the study
    points = rows.reset_index().assign(x=[1, 2])
    assert partial_row_notes(points) == [(2, 33.0, "1 of 3 seeds")]
    assert partial_row_notes(points.assign(seeds=[3, 1])) == []  # every planned seed scored


def trained(label, row, seed, epochs, best, status="ok", bleu=30.0, stop_reason="max epochs"):
    r = record(label, row, seed, status, bleu)
    r["metrics"].update(epochs=float(epochs), best_epoch=float(best), stop_reason=stop_reason)
    return r


def test_a_row_still_improving_at_its_last_epoch_is_marked_and_a_converged_one_is_not():
    from study.analysis.tables import footnotes, still_improving, warnings

    records = [trained("plateaued", 0, 1, 10, 7, stop_reason="early stopping"), trained("plateaued", 0, 2, 10, 8),
               trained("improving", 1, 1, 10, 10), trained("improving", 1, 2, 10, 9)]
    assert [still_improving(r) for r in records] == [False, False, True, False]
    table = build_table(records, "t", "plateaued", None)
    rows = table.rows.set_index("label")
    assert rows.loc["plateaued", "still_improving"] == 0 and rows.loc["improving", "still_improving"] == 1
    header, cells = markdown_cells(table.markdown())
    assert cells["plateaued"][header.index("epochs")] == "10" and cells["plateaued"][header.index("best epoch")] == "7-8"
    assert cells["improving"][header.index("best epoch")] == "9-10 †"
    notes = footnotes(table.rows)
    assert len(notes) == 1 and notes[0].startswith("† still improving") and "improving (1/2 seeds)" in notes[0]
    assert "plateaued" not in notes[0] and notes[0] in table.markdown()
    assert r"\textdagger{}" in table.latex() and "†" not in table.latex()
    assert len(warnings(table.rows)) == 1 and "improving" in warnings(table.rows)[0]
    plateaued_only = build_table(records[:2], "t", "plateaued", None)
    assert footnotes(plateaued_only.rows) == [] and warnings(plateaued_only.rows) == []
    assert "†" not in plateaued_only.markdown()


def test_seeds_that_trained_for_different_amounts_are_marked():
    from study.analysis.tables import warnings

    records = [trained("a", 0, 1, 6, 3, stop_reason="early stopping"), trained("a", 0, 2, 10, 8)]
    table = build_table(records, "t", "a", None)
    row = table.rows.iloc[0]
    assert row["uneven_epochs"] and (row["epochs_min"], row["epochs_max"]) == (6.0, 10.0)
    assert "| 6-10 ‡" in table.markdown()
    assert "‡ seeds trained for different numbers of epochs (early stopping): a." in table.markdown()
    assert warnings(table.rows) == []  # expected under early stopping: a note, not a warning


def test_a_truncated_seed_is_scored_but_never_shown_as_ok(tmp_path):
    from study.analysis.plots import bar_plot
    from study.analysis.tables import warnings

    records = [trained("full", 0, 1, 10, 8), trained("full", 0, 2, 10, 8),
               trained("capped", 1, 1, 3.5, 4, status="truncated", bleu=12.0), trained("capped", 1, 2, 10, 9)]
    table = build_table(records, "t", "full", None)
    capped = table.rows.set_index("label").loc["capped"]
    assert capped["status"] == "1 ok, 1 truncated" and capped["truncated"] == 1 and capped["n"] == 2
    assert capped["bleu_mean"] == 21.0 and capped["uneven_epochs"]
    assert "truncated: stopped by the wall-time cap" in table.markdown()
    assert "‡ seeds trained for different numbers of epochs (early stopping or the wall-time cap): capped." in table.markdown()
    assert any("capped" in line and "wall-time cap" in line for line in warnings(table.rows))
    assert "seeds trained for different numbers of epochs (the wall-time cap): capped." in warnings(table.rows)
    assert all(path.stat().st_size > 0 for path in bar_plot(table.rows, "t", tmp_path / "bleu.png"))
    from study.analysis.plots import marked_label

    assert marked_label(capped.to_dict() | {"label": "capped"}) == "capped † (truncated)"


def test_plot_intervals_are_clipped_to_the_bleu_range():
    from study.analysis.plots import interval_errors

    records = [record("wide", 0, 1, "ok", 2.0), record("wide", 0, 2, "ok", 98.0)]  # t-interval far beyond [0, 100]
    rows = build_table(records, "t", None, None).rows
    assert rows.iloc[0]["ci_low"] < 0 and rows.iloc[0]["ci_high"] > 100
    low, high = interval_errors(rows)
    assert (low[0], high[0]) == (50.0, 50.0)


def test_scatter_labels_neither_collide_nor_leave_the_frame():
    from nmt.figures import subplots
    from study.analysis.plots import place_labels

    fig, ax = subplots(figsize=(6, 4.5))
    # the committed context-gates plot's crowded corner: two labels at almost the same point, and
    # long labels at the right edge
    points = [(12100, 17.48), (12360, 17.51), (13350, 16.70), (13520, 16.91), (13480, 18.11), (9300, 16.6)]
    labels = ["tanh RNN \u2020", "GRU + gating scalar (t) \u2020", "tanh RNN + CG (target) \u2020",
              "tanh RNN + CG (source) \u2020", "GRU \u2020", "GRU + CG (both; t) \u2020"]
    ax.scatter(*zip(*points))
    fig.tight_layout()
    boxes = place_labels(fig, ax, points, labels)
    frame = ax.get_window_extent(fig.canvas.get_renderer())
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1 for b in boxes)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_scatter_labels_keep_apart_and_off_the_other_points():
    """The smoke ablation's speed plot: eight rows at BLEU 0, spread only along the speed axis. A
    label that ended where the next began read as one ("- LN & highway †Multi Attention †")."""
    from nmt.figures import subplots
    from study.analysis.plots import LABEL_GAP_POINTS, MARKER_RADIUS_POINTS, place_labels

    fig, ax = subplots(figsize=(6, 4.5))
    points = [(1255, 0.0), (1320, 0.0), (1475, 0.0), (1505, 0.0), (1635, 0.0), (1860, 0.0), (1975, 0.0), (2165, 0.0)]
    labels = ["SR-NMT 4L \u2020", "- LN & highway \u2020", "- Highway \u2020", "- Multi Attention \u2020",
              "- LayerNorm \u2020", "- LN & MA \u2020", "- MA & highway \u2020", "- LN, MA & highway \u2020"]
    ax.scatter(*zip(*points))
    fig.tight_layout()
    boxes = place_labels(fig, ax, points, labels)
    gap = LABEL_GAP_POINTS * fig.dpi / 72
    radius = MARKER_RADIUS_POINTS * fig.dpi / 72
    frame = ax.get_window_extent(fig.canvas.get_renderer())
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1 for b in boxes)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            apart = max(b.x0 - a.x1, a.x0 - b.x1, b.y0 - a.y1, a.y0 - b.y1)
            assert apart >= gap, (labels[i], apart)
    centres = ax.transData.transform(points)
    for i, box in enumerate(boxes):
        for j, (px, py) in enumerate(centres):
            if j != i:
                assert not (box.x0 < px + radius and px - radius < box.x1 and box.y0 < py + radius
                            and py - radius < box.y1), (labels[i], labels[j])


def keep_plot_texts(plots, monkeypatch) -> dict:
    """Instead of saving a figure, keep the texts written on its axes in the returned dict's "texts"."""
    shown = {}

    def keep_texts(fig, path, notes):
        shown["texts"] = [text.get_text() for ax in fig.axes for text in ax.texts]
        return [path]

    monkeypatch.setattr(plots, "_save", keep_texts)
    return shown


def test_bar_plot_of_a_reference_row_without_trials_says_so_once(tmp_path, monkeypatch):
    from study.analysis import plots

    shown = keep_plot_texts(plots, monkeypatch)
    records = [record("tanh", 0, 1, "ok", 30.0), record("tanh", 0, 2, "ok", 31.0)]
    rows = build_table(records, "t", "GRU", None, row_order=["tanh", "GRU"]).rows
    plots.bar_plot(rows, "t", tmp_path / "bleu.png", reference="GRU")
    # the white "reference" marker belongs on a bar; without one it would be written over the grey label
    assert shown["texts"] == ["not started (reference)"]
    rows = build_table(records, "t", "tanh", None, row_order=["tanh", "GRU"]).rows
    plots.bar_plot(rows, "t", tmp_path / "bleu.png", reference="tanh")
    assert sorted(shown["texts"]) == ["not started", "reference"]


def test_bar_plot_label_of_a_row_without_a_score_keeps_every_count_but_drops_error_messages(tmp_path, monkeypatch):
    from study.analysis import plots
    from study.analysis.tables import STATUSES, status_counts

    def row(seeds, **counts):
        return {**dict.fromkeys(STATUSES, 0), **counts, "seeds": seeds}

    assert status_counts(row(2, failed=1)) == "1 failed, 1 not started"
    assert status_counts(row(3, diverged=2, failed=1)) == "2 diverged, 1 failed"
    assert status_counts(row(3)) == "not started"
    shown = keep_plot_texts(plots, monkeypatch)
    records = [record("base", 0, 1, "ok", 30.0), record("broken", 1, 1, "failed", error="ValueError: f(x)")]
    rows = build_table(records, "t", "base", None, ["base", "broken"], {"base": 1, "broken": 2}).rows
    assert rows.set_index("label").loc["broken", "status"] == "1 failed (ValueError: f(x)), 1 not started"
    plots.bar_plot(rows, "t", tmp_path / "bleu.png", reference="base")
    assert "1 failed, 1 not started" in shown["texts"]


def test_bar_plot_of_rows_all_at_zero_bleu_keeps_a_readable_axis(tmp_path, monkeypatch):
    from study.analysis import plots

    shown = {}

    def keep_axis(fig, path, notes):
        shown["ylim"] = fig.axes[0].get_ylim()
        return [path]

    monkeypatch.setattr(plots, "_save", keep_axis)
    rows = build_table([record("a", 0, 1, "ok", 0.0), record("b", 1, 1, "ok", 0.0)], "t", "a", None).rows
    plots.bar_plot(rows, "t", tmp_path / "bleu.png", reference="a")
    assert shown["ylim"] == (0.0, 1.0)  # not matplotlib's 0-0.05 around bars of height 0


def test_the_numerics_note_says_where_the_numbers_hold():
    from study.analysis.numerics_note import numerics_note, records_numerics

    portable = [{"metrics": {"numerics": "portable", "pinning": 2}}] * 2
    legacy = [{"metrics": {}, "cpu": "AMD EPYC (family 25)"}]
    assert numerics_note(portable) == (
        "numerics: portable, pinning 2 (ATen pinned to AVX2, MKL to its COMPATIBLE branch, oneDNN off, Adam fused), one "
        "thread per trial: verified to give the same numbers from the same seeds on Intel Xeon; AMD EPYC (emulated by "
        "QEMU: the golden smoke table).")
    assert records_numerics(portable) == "portable"
    # pinning 1 (a portable record without a pinning) says where it held and where it did not
    pinning_1 = [{"metrics": {"numerics": "portable"}}]
    assert numerics_note(pinning_1) == (
        "numerics: portable, pinning 1 (ATen and MKL pinned to AVX2), one thread per trial: verified to give the same "
        "numbers from the same seeds on Intel Xeon; AMD EPYC computed other numbers under it.")
    assert numerics_note(pinning_1 + portable).startswith("numerics: mixed (1 portable-1, 2 portable-2 trials)")
    assert "does not know" in numerics_note([{"metrics": {"numerics": "portable", "pinning": 9}}])
    assert numerics_note(legacy) == ("numerics: native, each CPU's own kernels (AMD EPYC (family 25)): another CPU type "
                                     "can train the same seeds to other numbers.")
    assert numerics_note(portable + legacy).startswith("numerics: mixed (1 native, 2 portable-2 trials)")
    assert records_numerics(portable + legacy) is None and numerics_note([]) == ""
    # a trial still running (or failed) has only its progress, which names no setting: it is not a legacy record
    progress = [{"status": "running", "metrics": {"epoch": 8}, "cpu": "Intel Xeon"},
                {"status": "failed", "metrics": {}}, {"status": "stopped", "metrics": {"epoch": 3}}]
    assert records_numerics(portable + progress) == "portable" and numerics_note(portable + progress) == \
        numerics_note(portable)
    assert records_numerics(progress) is None and numerics_note(progress) == ""
    # trials on the opt-in Triton kernels (nmt.ops.kernels) are named; the default adds nothing
    triton = [{"metrics": {"numerics": "portable", "pinning": 2, "kernels": "triton"}}]
    assert numerics_note(portable + [{"metrics": {"numerics": "portable", "pinning": 2, "kernels": "torch"}}]) == \
        numerics_note(portable)
    assert numerics_note(triton + portable).endswith("kernels: Triton (1 of 3 trials, NMT_KERNELS=triton): their "
                                                     "recurrences equal the default torch paths to rounding, not bit "
                                                     "for bit.")
    assert "(all trials," in numerics_note(triton)


def test_markdown_shows_markup_in_a_label_or_title_as_text():
    from study.analysis.tables import markdown_cell, markdown_text

    assert markdown_text("<script>alert(1)</script> &amp; p < 0.001 & more") == \
        "&lt;script>alert(1)&lt;/script> &amp;amp; p < 0.001 & more"
    assert markdown_text("a\u2028b\x85c\n d") == "a b c d" and markdown_cell("x|<!-- y -->") == r"x\|&lt;!-- y -->"
