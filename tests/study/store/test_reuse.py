"""--reuse-from: a study copies another study's finished trials that are exactly its own trials
(same key: config, seed and data), and trains only the rest."""

from __future__ import annotations

import json

import pytest
from study_helpers import grid_study, mlflow_runs, study, table_rows

from nmt.errors import UserError
from study.spec.expansion import expand
from study.spec.loading import load_study
from study.store.reuse import reuse_finished_trials, reuse_sources
from study.store.trial_store import TrialStore

FIRST = grid_study("units_a", "  - {label: GRU, set: {}}\n  - {label: tanh, set: {model.cell: rnn}}", epochs=1)
SECOND = grid_study("gates_b", "  - {label: GRU (shared), set: {}}\n  - {label: ATR, set: {model.cell: atr}}", epochs=1)


def _finished(results, name):
    return {path.parent.name: json.loads(path.read_text())
            for path in (results / "ray" / name / "finished").glob("*/metrics.json")}


@pytest.mark.slow
def test_a_shared_trial_is_copied_not_trained_and_tabled_like_its_own(tmp_path, cluster_env):
    results = tmp_path / "results"
    (tmp_path / "units_a.yaml").write_text(FIRST)
    (tmp_path / "gates_b.yaml").write_text(SECOND)
    first = study(str(tmp_path / "units_a.yaml"), "--cpus", "2", "--results", str(results), env=cluster_env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    second = study(str(tmp_path / "gates_b.yaml"), "--reuse-from", "units_a", "--cpus", "2", "--results",
                   str(results), env=cluster_env)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "units_a shares 1 trial(s) with this study: 1 copied now\n" in second.stdout

    shared = next(t.key for t in expand(load_study(str(tmp_path / "gates_b.yaml"))) if t.label == "GRU (shared)")
    before, after = _finished(results, "units_a"), _finished(results, "gates_b")
    assert shared in before and shared in after and len(after) == 2
    assert after[shared] == {**before[shared], "reused_from": "units_a"}  # the same run, not a second training
    store_a, store_b = TrialStore(results / "ray" / "units_a"), TrialStore(results / "ray" / "gates_b")
    assert store_b.history(shared) == store_a.history(shared)
    assert (store_b.finished_dir(shared) / "test.hyp").read_text() == (store_a.finished_dir(shared) / "test.hyp").read_text()
    assert store_b.identity(shared)["label"] == "GRU (shared)"

    rows = {row["label"]: row for row in table_rows(results, "gates_b")}
    other = {row["label"]: row for row in table_rows(results, "units_a")}
    assert rows["GRU (shared)"]["bleu_mean"] == other["GRU"]["bleu_mean"] and rows["ATR"]["status"] == "ok"
    _, _, children = mlflow_runs(results, "gates_b")
    assert {c.data.tags["label"]: c.data.tags.get("reused_from") for c in children} == \
        {"GRU (shared)": "units_a", "ATR": None}


def test_reuse_keeps_a_trial_finished_here_and_copies_only_finished_ones(tmp_path):
    spec = load_study("cells", ["seeds=1"])
    trials = expand(spec)[:3]
    source, target = TrialStore(tmp_path / "a"), TrialStore(tmp_path / "b")
    for index, trial in enumerate(trials):
        source.start(trial.key, {"key": trial.key, "label": "theirs", "row": 9, "seed": trial.seed,
                                 "config": trial.config})
        source.progress(trial.key, {"epoch": 1.0, "valid_bleu": float(index)})
        if index < 2:  # the third is still training there
            (source.run_dir(trial.key) / "checkpoint").mkdir(parents=True)
            source.finish(trial.key, {"test_bleu": 10.0 + index})
    target.start(trials[0].key, {"key": trials[0].key, "label": "mine", "row": 0, "seed": trials[0].seed,
                                    "config": trials[0].config})
    (target.run_dir(trials[0].key) / "checkpoint").mkdir(parents=True)
    target.finish(trials[0].key, {"test_bleu": 99.0})
    target.start(trials[1].key, {"key": trials[1].key, "label": "mine", "row": 0, "seed": trials[1].seed,
                                    "config": trials[1].config})  # an unfinished attempt here
    (target.run_dir(trials[1].key) / "checkpoint").mkdir(parents=True)
    lines = []
    assert reuse_finished_trials(target, trials, {"a": source.experiment}, log=lines.append) == 1
    assert lines == ["a shares 3 trial(s) with this study: 1 copied now, 1 finished here already, 1 not finished "
                     "there (they train here)"]
    assert target.finished_metrics(trials[0].key) == {"test_bleu": 99.0}  # its own record stays
    assert target.finished_metrics(trials[1].key) == {"test_bleu": 11.0, "reused_from": "a"}
    assert not target.run_dir(trials[1].key).exists()  # the superseded attempt is gone
    assert target.identity(trials[1].key)["label"] == trials[1].label and target.history(trials[1].key)
    assert target.finished_metrics(trials[2].key) is None and not target.trial_dir(trials[2].key).exists()
    assert not list((tmp_path / "b" / "finished").glob("*.partial"))


@pytest.mark.parametrize(("recorded", "study_setting", "refused"), [
    ({"numerics": "native"}, "portable", "add `numerics: native`"),
    ({}, "portable", "add `numerics: native`"),  # a record from before the setting: the CPU's own kernels
    ({"numerics": "portable", "pinning": 1}, "portable", "leave out --reuse-from (no setting of this version computes"),
    ({"numerics": "portable"}, "native", "leave out --reuse-from (no setting of this version computes portable-1)"),
    ({"numerics": "portable", "pinning": 2}, "native", "add `numerics: portable`"),
    ({"numerics": "native"}, "native", None),
])
def test_a_source_study_that_computed_otherwise_is_refused_before_anything_is_written(tmp_path, recorded, study_setting,
                                                                                    refused):
    spec = load_study("cells", ["seeds=1", f"numerics={study_setting}"])
    trial = expand(spec)[0]
    source = TrialStore(tmp_path / "ray" / "units_a")
    source.start(trial.key, {"key": trial.key, "label": "theirs", "row": 0, "seed": trial.seed, "config": trial.config})
    (source.run_dir(trial.key) / "checkpoint").mkdir(parents=True)
    source.finish(trial.key, {"test_bleu": 10.0, **recorded})
    before = sorted(tmp_path.rglob("*"))
    if refused is None:
        assert reuse_sources(spec, ["units_a"], tmp_path) == {"units_a": source.experiment}
        return
    with pytest.raises(UserError) as refusal:
        reuse_sources(spec, ["units_a"], tmp_path)
    message = str(refusal.value)
    assert message.startswith("--reuse-from units_a: its trials computed with numerics ") and refused in message
    assert "\n" not in message and sorted(tmp_path.rglob("*")) == before
