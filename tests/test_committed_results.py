"""Every committed reference result in results/reference/ is what ``python -m study.table`` rebuilds from
its stored trial records: the tables a reader sees are the tables the code makes."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from study.table import main as table_main

RESULTS = Path(__file__).resolve().parent.parent / "results" / "reference"
STUDIES = sorted(p.parent.name for p in RESULTS.glob("*/study.json"))
REBUILT = ("table.md", "table.csv", "table.tex", "table_compact.tex", "trials.csv", "command.txt")
ADDITIVITY = ("additivity.md", "additivity.csv", "additivity.tex")


EMBEDDED_PNG = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+")


def _finished(name: str) -> bool:
    """A study still running (committed so that it continues elsewhere) has no tables yet."""
    return json.loads((RESULTS / name / "study.json").read_text(encoding="utf-8")).get("status") == "complete"


@pytest.mark.parametrize("name", [name for name in STUDIES if _finished(name)])
def test_committed_tables_are_rebuilt_exactly(name, tmp_path, capsys):
    copy = tmp_path / "results" / name
    # the study's own figures are drawn again; an analysis's figures stay as they are
    shutil.copytree(RESULTS / name, copy, ignore=lambda folder, names: [n for n in names if n.endswith(".png")
                                                                         and Path(folder) == RESULTS / name])
    additivity = [file for file in ADDITIVITY if (RESULTS / name / file).is_file()]
    for file in REBUILT + ("report.html", *additivity):
        (copy / file).unlink()
    assert table_main([name, "--results", str(tmp_path / "results")]) == 0
    capsys.readouterr()
    # an ablation of two or more components has its additivity table, and no other study has one
    assert [file for file in ADDITIVITY if (copy / file).is_file()] == additivity
    for file in REBUILT + tuple(additivity):
        assert (copy / file).read_text(encoding="utf-8") == (RESULTS / name / file).read_text(encoding="utf-8"), file
    # the report: the same text, and as many embedded figures as the study directory has PNGs
    report, committed = ((folder / "report.html").read_text(encoding="utf-8") for folder in (copy, RESULTS / name))
    assert EMBEDDED_PNG.sub("PNG", report) == EMBEDDED_PNG.sub("PNG", committed)
    assert len(EMBEDDED_PNG.findall(report)) == len(list(copy.rglob("*.png"))) > 0


def test_depth_speed_table_times_the_depth_study_s_own_models():
    """Finding 5's speed table (analysis/depth_speed.txt) times the models depth_srnmt_m30k trains: every
    SR-NMT row has the parameters that study's finished trials recorded, and the script still builds
    the models of every row, the LSTM 2L baseline included, with the parameters in the table."""
    import importlib.util

    import yaml

    from nmt.bench import model_config
    from nmt.model import build_model

    script = RESULTS / "analysis" / "depth_speed.py"
    spec = importlib.util.spec_from_file_location("depth_speed", script)
    depth_speed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(depth_speed)
    rows = dict(re.findall(r"^\| ((?:SR-NMT \d+|LSTM 2)L) \| ([\d,]+) \|", (RESULTS / "analysis" / "depth_speed.txt")
                           .read_text(encoding="utf-8"), re.M))
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
