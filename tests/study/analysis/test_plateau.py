"""The plateau test on a validation curve, against scipy's regression, and the tables' † mark from it.

Modules covered here: ``nmt.plateau`` (the test itself) and ``study.analysis.plateau``.
"""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest
from scipy import stats

from study.analysis.plateau import MIN_RISE, WINDOW, on_plateau, plateau_by_trial, rule_text, slope_test
from study.analysis.tables import build_table, footnotes


def test_slope_test_is_the_one_sided_regression_t_test():
    rng = random.Random(1)
    for _ in range(20):
        scores = [30 + 0.1 * i + rng.gauss(0, 0.5) for i in range(25)]
        slope, p_value = slope_test(scores)
        fit = stats.linregress(range(WINDOW), scores[-WINDOW:])
        one_sided = fit.pvalue / 2 if fit.slope > 0 else 1 - fit.pvalue / 2
        assert slope == pytest.approx(fit.slope, abs=1e-12) and p_value == pytest.approx(one_sided, abs=1e-9)


def test_a_rising_curve_is_not_on_a_plateau_and_a_flat_one_is():
    rising = [10 + 0.5 * i + 0.1 * (-1) ** i for i in range(20)]
    flat = [30 + 0.3 * (-1) ** i for i in range(20)]
    falling = [30 - 0.2 * i for i in range(20)]
    assert on_plateau(rising) is False and on_plateau(flat) is True and on_plateau(falling) is True
    # only the last WINDOW scores count: a long climb that levelled off is on a plateau
    assert on_plateau([float(i) for i in range(30)] + [30.0 + 0.2 * (-1) ** i for i in range(WINDOW)]) is True
    assert on_plateau([1.0, 2.0, 3.0]) is None  # too few epochs to judge
    assert slope_test([1.0, 2.0, 3.0, 4.0, 5.0]) == (pytest.approx(1.0), 0.0)  # exactly a rising line
    assert on_plateau([1.0, math.nan, 2.0, 3.0, 4.0, 5.0]) is False  # a diverged epoch is no point


def test_a_rise_under_a_tenth_of_a_point_over_the_window_is_no_rise():
    # a run annealed to its minimum learning rate: its scores creep in the third decimal, with almost no
    # noise, so the slope is significant; a rise of 0.009 points over ten epochs is still no improvement
    annealed = [60.0 + i for i in range(20)] + [78.0 + 0.001 * i + 0.0005 * (-1) ** i for i in range(WINDOW)]
    slope, p_value = slope_test(annealed)
    assert p_value < 0.001 and slope * (WINDOW - 1) < MIN_RISE and on_plateau(annealed) is True
    # the same shape climbing two tenths of a point over the window is still improving
    creeping = [78.0 + 0.2 / (WINDOW - 1) * i + 0.0005 * (-1) ** i for i in range(WINDOW)]
    assert on_plateau(creeping) is False
    assert "under 0.1 points" in rule_text()


def progress(key: str, scores: list[float], label: str = "a") -> pd.DataFrame:
    return pd.DataFrame({"label": label, "seed": 1, "key": key, "epoch": range(1, len(scores) + 1),
                         "valid_bleu": scores, "valid_ppl": [100 - s for s in scores]})


def test_plateau_by_trial_reads_the_metric_in_its_direction():
    curves = pd.concat([progress("up", [float(i) for i in range(12)]), progress("flat", [5.0, 5.2] * 6)])
    assert plateau_by_trial(curves) == {"up": False, "flat": True}
    # valid_ppl falls as BLEU rises here: with mode min, falling is improving
    assert plateau_by_trial(curves, "valid_ppl", "min") == {"up": False, "flat": True}
    assert plateau_by_trial(None) == {} and plateau_by_trial(curves, "no_such_metric") == {}


def record(key: str, label: str, best: int, epochs: int) -> dict:
    return {"key": key, "label": label, "row": 0, "seed": int(key[-1]), "config": {}, "params": {}, "status": "ok",
            "hyp_path": None, "artifacts": [], "metrics": {"test_bleu": 30.0 + int(key[-1]), "best_epoch": best,
                                                           "epochs": epochs}}


def test_the_table_marks_rows_still_improving_by_the_plateau_test():
    # both seeds stopped 3 epochs after their best (early stopping): the best-epoch rule calls both converged
    records = [record("a1", "a", 17, 20), record("a2", "a", 17, 20)]
    assert build_table(records, "t", None, None).rows.loc[0, "still_improving"] == 0
    plateau = {"a1": False, "a2": True}  # seed 1's curve still rose
    rows = build_table(records, "t", None, None, plateau=plateau).rows
    assert rows.loc[0, "still_improving"] == 1
    assert any("still improving when its training ended" in note and "a (1/2 seeds)" in note for note in footnotes(rows))
    # a seed the test cannot judge falls back to the best-epoch rule
    unjudged = build_table([record("a1", "a", 20, 20)], "t", None, None, plateau={"a1": None}).rows
    assert unjudged.loc[0, "still_improving"] == 1


def test_a_table_of_plateau_stopped_trials_states_its_stopping_rule():
    from study.analysis.plateau import stopping_note
    from study.spec.loading import load_study

    # the patience rule: no note, committed tables unchanged
    assert stopping_note(load_study("cells", ["budget.stop=patience"])) is None
    note = stopping_note(load_study("cells", ["budget.min_epochs=6", "budget.epochs=40"]))
    assert note.startswith("Stopping rule (budget.stop: plateau): each trial trained until its valid BLEU was on a "
                           "plateau") and "after at least 6 epochs, at most 40 epochs" in note and rule_text() in note
    rows = pd.DataFrame({"label": ["a"], "still_improving": [0], "uneven_epochs": [False], "n": [1]})
    rows.attrs["stopping_note"] = note
    assert note in footnotes(rows)
    # a row still rising at the cap: under the plateau rule only the cap ends it, so the advice names the cap
    rising = pd.DataFrame({"label": ["a"], "still_improving": [1], "uneven_epochs": [False], "n": [1]})
    assert "train it longer (budget.epochs, budget.patience)" in footnotes(rising)[0]
    rising.attrs["stopping_note"] = note
    assert "raise the epoch cap (budget.epochs) and --extend" in footnotes(rising)[0]
    assert "budget.patience" not in footnotes(rising)[0]
