"""The analysis scripts behind results/REPORT.md (scripts/; their outputs and commands in
results/reference/analysis/): what they compute is what they say, and their committed outputs measure
the studies' own models."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ANALYSIS = ROOT / "results" / "reference" / "analysis"
RESULTS = ANALYSIS.parent
SCRIPTS = ROOT / "scripts"  # plain scripts, run as `python scripts/NAME.py` from the repository root


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_commands_and_usage_lines_name_the_scripts_where_they_are():
    """Every command in commands.txt runs a script that is there and writes beside commands.txt, and each
    script's usage lines run it by its own path; scripts/ is a folder of plain scripts, not a package."""
    commands = (ANALYSIS / "commands.txt").read_text(encoding="utf-8")
    run = re.findall(r"^python (\S+\.py) .*> (\S+)$", commands, re.M)
    assert len(run) == len(re.findall(r"^python ", commands, re.M)) >= 5
    for script, output in run:
        assert (ROOT / script).parent == SCRIPTS and (ROOT / script).is_file(), script
        assert (ROOT / output).parent == ANALYSIS and (ROOT / output).is_file(), output
    # report_tables.py writes results/REPORT.md's generated tables, not an analysis file (tested below); gpu_check.py
    # measures a GPU machine into its --out folder (tests/study/test_gpu_check.py)
    assert ({Path(script).stem for script, _ in run}
            == {path.stem for path in SCRIPTS.glob("*.py")} - {"report_tables", "gpu_check"})
    assert not (SCRIPTS / "__init__.py").exists()
    for path in SCRIPTS.glob("*.py"):
        usage = re.findall(r"^ +python (\S+\.py)", path.read_text(encoding="utf-8"), re.M)
        assert usage and set(usage) == {f"scripts/{path.name}"}, path.name
    assert not list(ANALYSIS.glob("*.py")), "the scripts live in scripts/, their outputs in results/reference/analysis/"


SPEED_TABLES = {  # the committed table, its study file and the extra rows its command in commands.txt adds
    "row_speed_depth_srnmt_m30k.txt": ("search_spaces/multi30k/depth_srnmt_m30k.yaml", [
        "LSTM 2L: {model.cell: lstm, model.enc_layers: 2, model.dec_layers: 2, model.attention: mlp, "
        "model.srnmt: null, model.plain_output: false}"]),
    "row_speed_cells_m30k.txt": ("search_spaces/multi30k/cells_m30k.yaml", []),
    "row_speed_fsmn_m30k.txt": ("search_spaces/multi30k/fsmn_m30k.yaml", []),
}


def _speed_rows(table: str) -> dict[str, tuple[int, int]]:
    """{row label: (params, weight matrices)} of a committed speed table."""
    rows = re.findall(r"^\| ([^|]+?) \| ([\d,]+) \| (\d+) \|", (ANALYSIS / table).read_text(encoding="utf-8"), re.M)
    return {label: (int(params.replace(",", "")), int(matrices)) for label, params, matrices in rows}


@pytest.mark.parametrize("table", sorted(SPEED_TABLES))
def test_speed_tables_time_the_studies_own_models(table):
    """Every committed speed table (the speed halves of findings 1, 5 and 7) times the models its study
    builds: row_speed.py still builds every row, the extra ones included, with the parameters and
    weight matrices in the table, and the command in commands.txt is the one these rows came from."""
    from nmt.benchmarks.models import model_config
    from nmt.model import build_model

    row_speed = _script("row_speed")
    study_file, extras = SPEED_TABLES[table]
    committed = _speed_rows(table)
    models, vocab = row_speed.row_models(str(ROOT / study_file), extras)
    assert list(committed) == list(models)
    for label, section in models.items():
        model = build_model(model_config(section), vocab, vocab)
        assert (model.parameter_count, model.weight_matrices) == committed[label], label
    commands = (ANALYSIS / "commands.txt").read_text(encoding="utf-8")
    assert f"python scripts/row_speed.py {study_file}" in commands and f"> results/reference/analysis/{table}" in commands
    for extra in extras:
        assert f"--extra '{extra}'" in commands


def test_depth_speed_rows_have_the_parameters_the_depth_trials_recorded():
    """The depth study's speed table measures the models its trials trained."""
    committed = _speed_rows("row_speed_depth_srnmt_m30k.txt")
    trained = {}
    for metrics in (RESULTS / "ray" / "depth_srnmt_m30k" / "finished").glob("*/metrics.json"):
        layers = yaml.safe_load((metrics.parent / "config.yaml").read_text(encoding="utf-8"))["model"]["enc_layers"]
        trained[f"SR-NMT {layers}L"] = json.loads(metrics.read_text(encoding="utf-8"))["params"]
    assert len(trained) >= 5
    for label, params in trained.items():
        assert committed[label][0] == params, label


@pytest.mark.parametrize("args, message", [
    (["--extra", "LSTM 2L"], "--extra 'LSTM 2L': give one row as"),
    (["--extra", "SR-NMT 1L: {model.cell: lstm}"], "--extra 'SR-NMT 1L': the study has a row of that name"),
    (["--against", "LSTM 9L"], "--against 'LSTM 9L': no such row"),
    (["--runs", "0"], "--runs 0: give a whole number"),
    (["--batch", "128"], "--batch 128: give sentences x pieces")])
def test_row_speed_rejects_bad_input_in_one_line(args, message, capsys):
    from nmt.cli import run_main

    study_file = str(ROOT / "search_spaces/multi30k/depth_srnmt_m30k.yaml")
    assert run_main(_script("row_speed").main, [study_file, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1


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
    # t95 is the exact quantile of the pooled degrees of freedom: scipy's interval
    assert slope - low == pytest.approx(high - slope)
    assert (high - low) / (2 * half) == pytest.approx(1.0, abs=1e-9)


def test_joint_bootstrap_resamples_the_report_s_contrasts_of_more_than_two_rows():
    """joint_bootstrap.py's contrasts: an ablation's departures from additivity with the additivity
    table's weights, and the depth slopes from 1L and from 2L over the rows whose 3 seeds finished."""
    from study.analysis.significance import slope_weights
    from study.analysis.stored_study import load_stored_study

    joint = _script("joint_bootstrap")
    ablation = dict(joint.contrasts(load_stored_study(RESULTS / "ablation_srnmt_m30k")))
    assert list(ablation) == ["departure of - LN & MA", "departure of - LN & highway", "departure of - MA & highway",
                              "departure of - LN, MA & highway"]
    assert ablation["departure of - LN, MA & highway"] == {
        "- LN, MA & highway": 1.0, "- LayerNorm": -1.0, "- Multi Attention": -1.0, "- Highway": -1.0, "SR-NMT 4L": 2.0}
    depth = load_stored_study(RESULTS / "depth_srnmt_m30k")
    finished = {}
    for record in depth.records:
        finished.setdefault(record["config"]["model"]["enc_layers"], []).append(record["status"] == "ok")
    complete = sorted(d for d, ok in finished.items() if sum(ok) == 3)
    slopes = joint.contrasts(depth)
    assert [what for what, _ in slopes] == [f"slope over {', '.join(f'{d}L' for d in complete if d >= first)}"
                                            for first in (1, 2)]
    assert list(slopes[1][1].values()) == pytest.approx(list(slope_weights([d for d in complete if d >= 2]).values()))
    assert joint.contrasts(load_stored_study(RESULTS / "cells")) == []


def test_slope_weights_need_two_distinct_depths():
    from study.analysis.significance import slope_weights

    assert slope_weights([1, 2]) == {1: -1.0, 2: 1.0}
    with pytest.raises(ValueError, match="two or more distinct"):
        slope_weights([3, 3])


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


def test_the_report_s_claims_tables_are_the_ones_study_table_wrote():
    """Every claims table in REPORT.md is its study's claims.md as committed, so a verdict cannot go stale;
    an edited verdict or a claims file that changed is caught."""
    report_tables = _script("report_tables")
    report = (ROOT / "results" / "REPORT.md").read_text(encoding="utf-8")
    assert report_tables.refresh(report) == report, "run python scripts/report_tables.py"
    assert len(report.splitlines()) <= 400
    blocks = report_tables.BLOCK.findall(report)
    studies = [match[2] for match in blocks if match[1] == "claims"]
    assert {"ablation_srnmt_m30k", "context_gates_m30k", "depth_srnmt_m30k", "fsmn_m30k"} <= set(studies)
    for study in studies:
        claims = (RESULTS / study / "claims.md").read_text(encoding="utf-8")
        table = [line for line in claims.splitlines() if line.startswith("|")]
        assert "\n".join(table) in report
        signature = next(line for line in claims.splitlines() if line.startswith("BLEU: sacreBLEU"))
        assert f"- {signature}" in report  # the BLEU the verdicts are computed in, under each claims table
    edited = report.replace("| not reproduced ", "| reproduced     ", 1)
    assert edited != report and report_tables.refresh(edited) == report


def test_the_report_script_checks_without_writing(capsys):
    report_tables = _script("report_tables")
    before = (ROOT / "results" / "REPORT.md").read_bytes()
    assert report_tables.main(["--check"]) == 0
    assert (ROOT / "results" / "REPORT.md").read_bytes() == before
    assert "up to date" in capsys.readouterr().out
