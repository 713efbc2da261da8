"""The analysis scripts behind results/REPORT.md (results/reference/analysis/): what they compute
is what they say, and their committed outputs measure the studies' own models."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

ANALYSIS = Path(__file__).resolve().parent.parent / "results" / "reference" / "analysis"
RESULTS = ANALYSIS.parent


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ANALYSIS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_depth_speed_table_times_the_depth_study_s_own_models():
    """Finding 5's speed table (depth_speed.txt) times the models depth_srnmt_m30k trains: every
    SR-NMT row has the parameters that study's finished trials recorded, and the script still builds
    the models of every row, the LSTM 2L baseline included, with the parameters in the table."""
    from nmt.bench import model_config
    from nmt.model import build_model

    depth_speed = _script("depth_speed")
    rows = dict(re.findall(r"^\| ((?:SR-NMT \d+|LSTM 2)L) \| ([\d,]+) \|",
                           (ANALYSIS / "depth_speed.txt").read_text(encoding="utf-8"), re.M))
    assert len(rows) == 9
    study_file = RESULTS.parent.parent / depth_speed.STUDY_FILE
    vocab = depth_speed.vocabulary(study_file)
    for name, section in depth_speed.model_sections(study_file, 8).items():
        assert build_model(model_config(section), vocab, vocab).parameter_count == int(rows[name].replace(",", "")), name
    trained = {}
    for metrics in (RESULTS / "ray" / "depth_srnmt_m30k" / "finished").glob("*/metrics.json"):
        layers = yaml.safe_load((metrics.parent / "config.yaml").read_text(encoding="utf-8"))["model"]["enc_layers"]
        trained[f"SR-NMT {layers}L"] = json.loads(metrics.read_text(encoding="utf-8"))["params"]
    assert len(trained) >= 5
    for name, params in trained.items():
        assert int(rows[name].replace(",", "")) == params, name


@pytest.mark.parametrize("depths", [[1, 2, 3, 4, 5, 6, 7, 8], [2, 3, 4, 5], [1, 3, 4, 8]])
def test_depth_trend_slope_and_pooled_interval_are_least_squares(depths):
    """The slope is the least-squares line through every trial (equal seeds per row), and the
    pooled-variance interval is that slope's t interval with the seeds' spread around their row means."""
    from scipy import stats

    depth_trend = _script("depth_trend")
    rng = np.random.default_rng(len(depths))
    seeds = 3
    trials = {d: 30 + 0.4 * d + rng.normal(0, 0.2 + 0.1 * d, seeds) for d in depths}
    weights = depth_trend.slope_weights(depths)
    terms = [(weights[d], trials[d].mean(), trials[d].std(ddof=1), seeds) for d in depths]
    slope = sum(w * mean for w, mean, _, _ in terms)
    x = np.repeat(depths, seeds)
    y = np.concatenate([trials[d] for d in depths])
    assert slope == pytest.approx(np.polyfit(x, y, 1)[0], abs=1e-12)
    low, high = depth_trend.pooled_variance_interval(terms)
    residuals = np.concatenate([trials[d] - trials[d].mean() for d in depths])
    df = len(y) - len(depths)
    half = stats.t.ppf(0.975, df) * math.sqrt(residuals @ residuals / df * sum(w * w for w in weights.values()) / seeds)
    # t95 rounds the degrees of freedom down to a tabled value (quantiles to 3 decimals): never
    # narrower than the exact interval but by that rounding, at most a little wider
    assert slope - low == pytest.approx(high - slope)
    assert 0.9995 < (high - low) / (2 * half) < 1.02


@pytest.mark.parametrize("low, high, paper, expected", [
    (0.2, 0.5, 1.3, "disagree"), (0.2, 1.5, 1.3, "agree"), (-0.2, 1.5, 1.3, "inconclusive"),
    (-1.0, -0.1, 0.8, "disagree"), (math.nan, math.nan, 0.8, "no interval")])
def test_depth_trend_verdicts_follow_the_report_s_rule(low, high, paper, expected):
    assert _script("depth_trend").verdict(low, high, paper) == expected


@pytest.mark.parametrize("bad", ["2", "3-2", "0-4", "1-9", "a-b"])
def test_depth_trend_rejects_a_bad_range_in_one_line(bad, capsys):
    from nmt.cli import run_main

    assert run_main(_script("depth_trend").main, ["--ranges", bad]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --ranges {bad}:") and err.count("\n") == 1
