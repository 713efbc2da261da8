"""Studies end to end with real Ray (2 CPUs), real MLflow (SQLite in a temp dir) and real Optuna.

These tests start Ray clusters, so they run one after another in one xdist worker
(group "ray"); each cleans up its Ray processes and temporary state.

Modules covered here: ``study.execution.driver``, ``study.execution.ray_setup`` and ``study.execution.tuner``.
"""

from __future__ import annotations

import json

import subprocess
import sys

import pytest
from study_helpers import ROOT, LoopbackCluster, mlflow_runs, study, table_rows

pytestmark = pytest.mark.slow


TINY = ["data.size=300", "data.valid_size=20", "data.test_size=20", "data.spm.vocab_size=200",
        "model.hidden=16", "model.emb=16", "train.batch_tokens=600", "decode.beam=2"]


def test_ablation_study_table_deltas_and_mlflow_tree(tmp_path, ray_env):
    results = tmp_path / "results"
    result = study("ablation_srnmt", "--smoke", "--cpus", "2", "--results", str(results), env=ray_env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "| SR-NMT 4L" in result.stdout and "trials:" in result.stdout  # table printed, progress shown
    rows = table_rows(results, "ablation_srnmt")
    assert [r["label"] for r in rows] == ["SR-NMT 4L", "- LayerNorm", "- Multi Attention", "- Highway", "- LN & MA",
                                         "- LN & highway", "- MA & highway", "- LN, MA & highway"]
    reference = float(rows[0]["bleu_mean"])
    for row in rows:
        if row["n"] != "0":
            assert abs(float(row["delta"]) - (float(row["bleu_mean"]) - reference)) < 1e-9
    assert float(rows[0]["delta"]) == 0.0
    for name in ("table.md", "table.tex", "trials.csv", "bleu.png", "bleu_vs_speed.png", "curves.png", "study.json"):
        assert (results / "ablation_srnmt" / name).is_file(), name
    progress = table_rows(results, "ablation_srnmt", "progress.csv")  # every trial's one epoch
    assert sorted((r["label"], r["epoch"]) for r in progress) == sorted((r["label"], "1") for r in rows)
    assert all(float(r["valid_ppl"]) > 0 and float(r["lr"]) > 0 for r in progress)
    assert r"\toprule" in (results / "ablation_srnmt" / "table.tex").read_text()
    # the combined ablations against the sum of their single ones, printed after the table
    additivity = table_rows(results, "ablation_srnmt", "additivity.csv")
    assert [r["label"] for r in additivity] == [r["label"] for r in rows[4:]]
    assert result.stdout.index("| - LN, MA & highway |") < result.stdout.index("**Are the drops additive?")
    command = (results / "ablation_srnmt" / "command.txt").read_text().strip()
    assert command == f"python -m study.run ablation_srnmt --smoke --cpus 2 --results {results}"
    # the trial workers computed with portable numerics (nmt.numerics), and the table says so; the claims
    # the study file declares are judged (not tested: one epoch is no plateau)
    trials = [json.loads(line) for line in (results / "ablation_srnmt" / "trials.jsonl").read_text().splitlines()]
    assert {(t["metrics"]["numerics"], t["metrics"]["cpu_capability"]) for t in trials} == {("portable", "AVX2")}
    assert "numerics: portable, pinning 2 (ATen pinned to AVX2, MKL to its COMPATIBLE branch" in (
        results / "ablation_srnmt" / "table.md").read_text()
    claims = table_rows(results, "ablation_srnmt", "claims.csv")
    assert [c["claim"] for c in claims][:3] == ["layer-norm", "multi-attention", "highway"]
    assert {c["verdict"] for c in claims if c["kind"] != "diverges"} == {"not tested"}
    assert "**Claims: SR-NMT 4L ablation" in result.stdout

    client, parents, children = mlflow_runs(results, "ablation_srnmt")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(children) == 8 and {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    assert all(c.info.status == "FINISHED" for c in children)
    # each child run ends with its trial: the first ended before the last one started, none after the parent
    assert min(c.info.end_time for c in children) < max(c.info.start_time for c in children)
    assert max(c.info.end_time for c in children) <= parents[0].info.end_time
    assert "done: - Highway seed 1: ok, 1 epoch (best 1), valid BLEU" in result.stdout  # one line per trial
    assert {c.data.tags["label"] for c in children} == {r["label"] for r in rows}
    child = children[0]
    assert {"study", "config_hash", "seed", "status", "git_commit", "version.torch"} <= set(child.data.tags)
    assert child.data.tags["smoke"] == "true" and child.data.tags["varied"].startswith("model.layer_norm=")
    assert "None" not in child.data.params.values()
    parent = parents[0].data
    assert parent.metrics[f"bleu/{rows[0]['label']}"] == pytest.approx(float(rows[0]["bleu_mean"]))
    artifacts = {a.path for a in client.list_artifacts(parents[0].info.run_id)}
    assert parent.tags["smoke"] == "true" and {"table.json", "additivity.md"} <= artifacts
    assert client.get_experiment(parents[0].info.experiment_id).tags["mlflow.note.content"].startswith("SR-NMT 4 layers")
    assert child.data.params["model.cell"] == "srnmt" and "test_bleu" in child.data.metrics
    for key in ("valid_bleu", "grad_norm_mean", "clipped_share"):  # per-epoch metrics
        assert client.get_metric_history(child.info.run_id, key), key
    assert {a.path for a in client.list_artifacts(child.info.run_id)} >= {"test.hyp", "config.yaml"}

    # the stored results rebuild the same table without training
    before = (results / "ablation_srnmt" / "table.md").read_text()
    (results / "ablation_srnmt" / "table.md").unlink()
    (results / "ablation_srnmt" / "command.txt").unlink()
    rebuilt = subprocess.run([sys.executable, "-m", "study.table", "ablation_srnmt", "--results", str(results)],
                             capture_output=True, text=True, cwd=ROOT, env=ray_env, timeout=300)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert (results / "ablation_srnmt" / "table.md").read_text() == before
    assert (results / "ablation_srnmt" / "command.txt").read_text().strip() == command
    assert table_rows(results, "ablation_srnmt", "progress.csv") == progress


DIVERGENT = """
name: divergent
description: one stable and one exploding configuration
data: {{preset: synthetic, size: 300, valid_size: 20, test_size: 20, max_len: 60, spm: {{vocab_size: 200}}}}
base:
  model: {{cell: srnmt, enc_layers: 2, dec_layers: 2, hidden: 16, emb: 16}}
  train: {{batch_tokens: 600}}
  decode: {{beam: 2}}
variants:
  - {{label: stable, set: {{}}}}
  - {{label: exploding, set: {{train.lr: 1.0e+30, train.clip: 0, model.layer_norm: false, model.highway: false}}}}
  - {{label: capped, set: {{train.max_minutes: 1.0e-6}}}}
seeds: {seeds}
budget: {{epochs: 2}}
table: {{reference: stable}}
"""


def test_grid_study_with_a_divergent_and_a_wall_time_capped_configuration_finishes(tmp_path, ray_env):
    path = tmp_path / "divergent.yaml"
    path.write_text(DIVERGENT.format(seeds=1))
    results = tmp_path / "results"
    result = study(str(path), "--cpus", "2", "--results", str(results), env=ray_env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = {r["label"]: r for r in table_rows(results, "divergent")}
    assert rows["stable"]["status"] == "ok" and rows["stable"]["n"] == "1"
    assert rows["exploding"]["status"] == "diverged" and rows["exploding"]["n"] == "0"
    assert "| exploding | diverged" in (results / "divergent" / "table.md").read_text()
    # the wall-time cap fired: the row is scored but says truncated, and the run's end names it
    assert rows["capped"]["status"] == "truncated" and rows["capped"]["truncated"] == "1"
    assert 0 < float(rows["capped"]["epochs_max"]) < 1
    assert "truncated: stopped by the wall-time cap" in (results / "divergent" / "table.md").read_text()
    assert "wall-time cap (budget.minutes), status truncated: capped" in result.stderr
    _, _, children = mlflow_runs(results, "divergent")
    assert sorted(c.data.tags["status"] for c in children) == ["diverged", "ok", "truncated"]


def test_optuna_search_with_asha_persists_its_optuna_study(tmp_path, cluster_env):
    results = tmp_path / "results"
    result = study("optuna_atr", "--smoke", "--cpus", "2", "--results", str(results), "--set", "budget.epochs=2",
                   env=cluster_env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "[I " not in result.stdout + result.stderr and "Warning" not in result.stderr  # no Optuna chatter
    rows = table_rows(results, "optuna_atr")
    assert len(rows) == 3 and all(r["label"].split(": ")[1].count("=") == 5 for r in rows)
    import optuna

    stored = optuna.load_study(study_name="optuna_atr", storage=f"sqlite:///{results / 'optuna.db'}")
    assert len(stored.trials) == 3
    assert {p for t in stored.trials for p in t.params} == {"train.lr", "model.dropout", "model.hidden",
                                                            "model.enc_layers", "model.dec_layers"}
    _, parents, children = mlflow_runs(results, "optuna_atr")
    assert len(parents) == 1 and len(children) == 3
    # optuna-dashboard: the objective by name, each trial linked to its table row and MLflow run
    assert stored.metric_names == ["valid_bleu"] and stored.user_attrs["description"].startswith("Optuna TPE search")
    runs = {c.info.run_id: c.data.tags["label"] for c in children}
    links = {t.user_attrs["mlflow_run_id"]: t.user_attrs["table_row"] for t in stored.trials}
    assert links == runs and set(links.values()) == {r["label"] for r in rows}
    assert all(t.user_attrs["table_row"].startswith(f"#{t.number}: ") for t in stored.trials)
    assert {c.data.tags["varied"].count("=") for c in children} == {5}  # the searched parameters


def test_study_on_a_two_node_loopback_cluster_uses_both_nodes(tmp_path, ray_env):
    """Token authentication as documented: the same RAY_AUTH_TOKEN on both nodes and the driver."""
    import secrets

    ray_env = dict(ray_env, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16))
    with LoopbackCluster(ray_env, nodes=2) as cluster:
        results = tmp_path / "results"
        # a trial larger than every node would wait in Ray's queue forever: refused at once
        too_big = study("cells", "--smoke", "--results", str(results), "--address", cluster.address,
                        "--set", "resources.cpu=2", env=ray_env, timeout=120)
        assert too_big.returncode == 2, too_big.stdout[-2000:] + too_big.stderr[-2000:]
        assert f"no node of the Ray cluster at {cluster.address} has 2 CPU(s)" in too_big.stderr
        assert not (results / "cells").exists() and not (results / "ray").exists()
        result = study("cells", "--smoke", "--results", str(results), "--address", cluster.address,
                       "--set", "grid={model.cell: [gru, atr, sru, rnn]}", env=ray_env)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        from study.store.records import load_records

        records = load_records(results, "cells")
        assert len(records) == 4 and all(r["status"] == "ok" for r in records)
        nodes = {r["metrics"]["node_id"] for r in records}
        assert len(nodes) == 2, nodes
