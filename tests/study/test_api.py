"""The Python API (study.api): run_study runs a study in-process as python -m study.run does and
returns its table as a DataFrame; load_table reads a stored one; bad input raises UserError.

Modules covered here: ``study.spec.options``."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from study_helpers import ROOT, grid_study, skip_if_ray_node_lost

from nmt.errors import UserError
from study.api import load_table, run_study

TABLE = "label,bleu_mean,n,status\nGRU,12.5,1/1,ok\nATR,11.0,1/1,ok\n"


@pytest.fixture
def recorded_runs(monkeypatch):
    """study.api.run_request (the one call that loads and runs a study) replaced by a recorder that
    succeeds without running anything: the options of each request as the command line that
    command.txt records (after "python -m study.run"), one list per call."""
    calls: list[list[str]] = []

    def record(request, dry_run=False):
        request.check()
        calls.append(shlex.split(request.command_line())[3:])
        return 0

    monkeypatch.setattr("study.api.run_request", record)
    return calls


def write_table(results: Path, name: str) -> Path:
    path = results / name / "table.csv"
    path.parent.mkdir(parents=True)
    path.write_text(TABLE)
    return path


def test_keyword_arguments_become_the_command_line_options(tmp_path, recorded_runs):
    write_table(tmp_path / "out", "cells")
    table = run_study("cells", smoke=True, seeds=2, overrides={"model.hidden": 32, "train.lr": 1e-3, "model.cell": "gru",
                                                                "model.layer_norm": True}, results=tmp_path / "out",
                      cpus=2, max_concurrent=1, gpus_per_trial=0.5, address="auto", tracking_uri="sqlite:///x.db",
                      data_dir=Path("corpus"), langs="en-de", max_trials=10, fresh=True, verbose=True)
    # in the order of their declaration (study.spec.options): what to run, where, how, reporting
    assert recorded_runs == [["cells", "--smoke", "--set", "model.hidden=32", "--set", "train.lr=0.001",
                              "--set", "model.cell=gru", "--set", "model.layer_norm=true", "--seeds", "2",
                              "--data-dir", "corpus", "--langs", "en-de", "--max-trials", "10",
                              "--results", str(tmp_path / "out"), "--tracking-uri", "sqlite:///x.db", "--fresh",
                              "--cpus", "2", "--max-concurrent", "1", "--gpus-per-trial", "0.5", "--address", "auto",
                              "--verbose"]]
    pd.testing.assert_frame_equal(table, pd.read_csv(tmp_path / "out" / "cells" / "table.csv"))


def test_defaults_and_awkward_values(tmp_path, recorded_runs, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_table(tmp_path / "results" / "smoke", "cells")  # where --smoke results go by default
    write_table(tmp_path / "results", "cells")
    write_table(tmp_path / "-odd", "cells")
    assert list(run_study("cells", smoke=True)["label"]) == ["GRU", "ATR"]
    run_study("cells", overrides=["seeds=2"], resume=True)
    run_study("cells", overrides="seeds=2", extend=True, results="-odd")  # one override as a string
    assert recorded_runs[0] == ["cells", "--smoke"]
    assert recorded_runs[1] == ["cells", "--set", "seeds=2", "--resume"]
    # a value starting with "-" stays a value
    assert recorded_runs[2] == ["cells", "--set", "seeds=2", "--results=-odd", "--extend"]


def test_a_study_path_starting_with_a_dash_goes_after_double_dash(tmp_path, recorded_runs, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-mine").mkdir()
    (tmp_path / "-mine" / "odd.yaml").write_text("name: odd\n")
    write_table(tmp_path / "results", "odd")
    assert list(run_study("-mine/odd.yaml", cpus=1)["label"]) == ["GRU", "ATR"]
    assert recorded_runs == [["--cpus", "1", "--", "-mine/odd.yaml"]]


def test_a_stopped_run_raises_keyboard_interrupt(tmp_path, monkeypatch):
    monkeypatch.setattr("study.api.run_request", lambda request: 130)
    with pytest.raises(KeyboardInterrupt, match="resume=True"):
        run_study("cells", results=tmp_path)


@pytest.mark.parametrize("kwargs, message", [
    ({"name_or_path": "no_such_study"}, "unknown study 'no_such_study'"),
    ({"name_or_path": "missing.yaml"}, "missing.yaml: study file not found"),
    ({"name_or_path": 3}, "name_or_path=3: expected a path"),
    ({"name_or_path": "cells", "seeds": "3"}, "seeds='3': expected a whole number"),
    ({"name_or_path": "cells", "seeds": 2.5}, "seeds=2.5: expected a whole number"),
    ({"name_or_path": "cells", "cpus": True}, "cpus=True: expected a whole number"),
    ({"name_or_path": "cells", "cpus": 0}, "--cpus 0: must be >= 1"),
    ({"name_or_path": "cells", "lease_seconds": 1, "storage": "s3://b/x"}, "--lease-seconds 1: must be >= 3"),
    ({"name_or_path": "cells", "lease_seconds": float("nan"), "storage": "s3://b/x"},
     "--lease-seconds nan: must be a finite number"),
    ({"name_or_path": "cells", "lease_seconds": 30}, "--lease-seconds needs --storage"),
    ({"name_or_path": "cells", "langs": ""}, "langs='': expected a non-empty string"),
    ({"name_or_path": "cells", "resume": True, "fresh": True}, "--resume and --fresh exclude each other"),
    ({"name_or_path": "cells", "overrides": [("model.hidden", 3)]}, "expected a 'KEY=VALUE' string"),
    ({"name_or_path": "cells", "overrides": 5}, "overrides=5: expected a dict"),
    ({"name_or_path": "cells", "overrides": {"model.hidden": object()}}, "expected a number, bool"),
    ({"name_or_path": "cells", "overrides": {"model.hiden": 3}}, "did you mean"),
])
def test_bad_input_raises_user_error_before_anything_runs(tmp_path, monkeypatch, kwargs, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as raised:
        run_study(**kwargs)
    assert message in str(raised.value)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_load_table_reads_a_stored_table(tmp_path):
    path = write_table(tmp_path, "cells")
    pd.testing.assert_frame_equal(load_table("cells", results=tmp_path), pd.read_csv(path))
    pd.testing.assert_frame_equal(load_table("search_spaces/cells.yaml", results=str(tmp_path)), pd.read_csv(path))
    with pytest.raises(UserError, match="study fsmn: no table in"):
        load_table("fsmn", results=tmp_path)
    with pytest.raises(UserError, match="a study name is a plain identifier"):
        load_table("../cells", results=tmp_path)


@pytest.mark.slow
def test_run_study_end_to_end_returns_the_table_csv(tmp_path, cluster_env):
    """A one-trial study in a fresh process, as in a notebook: the DataFrame is table.csv, and
    command.txt holds the python -m study.run line that reproduces the call; the progress lines and
    the table go to the ``say`` callback instead of stdout."""
    (tmp_path / "api_tiny.yaml").write_text(grid_study("api_tiny", "  - {label: gru, set: {}}", epochs=1))
    script = ("import sys; from study.api import run_study; said = []; "
              "table = run_study('api_tiny.yaml', cpus=1, overrides={'budget.epochs': 1}, say=said.append); "
              "table.to_pickle('table.pkl'); open('said.txt', 'w').write(chr(10).join(said))")
    env = dict(cluster_env, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600, check=False)
    skip_if_ray_node_lost(result.returncode, result.stdout + result.stderr)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    study_dir = tmp_path / "results" / "api_tiny"
    table = pd.read_pickle(tmp_path / "table.pkl")
    pd.testing.assert_frame_equal(table, pd.read_csv(study_dir / "table.csv"))
    assert list(table["label"]) == ["gru"] and table.loc[0, "status"] == "ok"
    assert (study_dir / "command.txt").read_text().strip() == ("python -m study.run api_tiny.yaml --set budget.epochs=1 "
                                                                "--cpus 1")
    said = (tmp_path / "said.txt").read_text()
    assert "study api_tiny:" in said and "done: gru seed 1: ok" in said and "trials: 0 running, 1/1 done" in said
    assert "| gru" in said and "| gru" not in result.stdout  # the table went to the callback


def test_python_values_reach_the_study_as_the_same_values():
    """A learning rate of 1e-5 must not arrive as the string '1e-05' (JSON's spelling, which YAML
    reads as a string), nor a string "no" as false."""
    import yaml

    from study.api import yaml_text

    for value in (1e-5, [1e-5, 3e-3], {"type": "loguniform", "low": 1e-5, "high": 3e-3}, "no", "a: b", None, True, 7):
        assert yaml.safe_load(yaml_text("key", value)) == value, value
