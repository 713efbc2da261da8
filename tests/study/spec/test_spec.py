"""Study files: every built-in study loads, expansion is right, and every bad spec is one clear line.

Modules covered here: ``study.execution.run_tracking``, ``study.execution.study_data``,
``study.spec.expansion``, ``study.spec.labels``, ``study.spec.loading``, ``study.spec.model``,
``study.spec.options``, ``study.spec.validation`` and ``study.store.records``."""

from __future__ import annotations

import re
import textwrap

import pytest
import yaml

from nmt.config import config_from_dict
from nmt.errors import ConfigError
from nmt.model import build_model
from study.spec.expansion import ablation_label, expand
from study.spec.loading import builtin_studies, load_study
from study.spec.model import SPACES_DIR

BUILTIN = ["ablation_srnmt", "atr_gates", "cells", "context_gates", "depth_srnmt", "fsmn", "optuna_atr",
           "pareto_cells"]


def test_all_builtin_studies_load_and_describe_a_paper_table():
    assert builtin_studies() == sorted(BUILTIN)
    for name in BUILTIN:
        spec = load_study(name)
        assert spec.name == name and spec.fields.description
        assert expand(spec), name


MULTI30K_STUDIES = sorted(SPACES_DIR.glob("multi30k/*.yaml"))


@pytest.mark.parametrize("path", MULTI30K_STUDIES, ids=lambda p: p.stem)
def test_every_multi30k_study_builds_each_row_and_names_its_paper_settings(path):
    # the converged reference studies run for hours: a row that cannot build its model must fail here, not there
    text = path.read_text(encoding="utf-8")
    shared = re.search(r"# Settings as in (\S+\.yaml)", text)  # a study that shares another's settings names it
    assert ("# Paper settings kept:" in text and "# Deviations" in text) or (shared and (path.parent / shared[1]).is_file())
    spec = load_study(str(path))
    # a reference study trains 3 seeds to early stopping or a plateau; a probe (a few short controlled runs) says it is one
    probe = "a probe, not a reference study" in text
    budget = spec.fields.budget
    assert spec.name == path.stem and (spec.fields.seeds == 3 or probe)
    assert (budget.patience or 0) > 0 or budget.stop == "plateau"
    rows = {}
    for trial in expand(spec):
        rows.setdefault(trial.label, trial.config)
    for label, tree in rows.items():
        cfg = config_from_dict(tree, source=f"{path.name}: {label}")
        assert cfg.model.hidden >= 128, label
        build_model(cfg.model, src_vocab=50, tgt_vocab=60)


def test_multi30k_studies_cover_every_paper_study():
    assert {p.stem for p in MULTI30K_STUDIES} >= {f"{name}_m30k" for name in
                                                  ("ablation_srnmt", "atr_gates", "cells", "context_gates",
                                                   "depth_srnmt", "fsmn")}


def test_ablation_expands_every_subset_in_paper_order():
    spec = load_study("ablation_srnmt", ["seeds=2"])
    trials = expand(spec)
    labels = list(dict.fromkeys(t.label for t in trials))
    assert labels == ["SR-NMT 4L", "- LayerNorm", "- Multi Attention", "- Highway", "- LN & MA", "- LN & highway",
                      "- MA & highway", "- LN, MA & highway"]
    assert len(trials) == 16 and {t.seed for t in trials} == {1, 2}
    everything_off = [t for t in trials if t.label == "- LN, MA & highway"][0]
    model = everything_off.config["model"]
    assert (model["layer_norm"], model["multi_attention"], model["srnmt"]["highway"]) == (False, False, False)
    full = trials[0].config["model"]
    assert (full["layer_norm"], full["multi_attention"], full["srnmt"]["highway"]) == (True, True, True)
    assert len({t.key for t in trials}) == 16  # the key includes the seed
    assert trials[0].config["train"]["max_epochs"] == spec.fields.budget.epochs


def test_grid_linked_axes_labels_and_keys_are_deterministic():
    depth = expand(load_study("depth_srnmt", ["seeds=1"]))
    assert [(t.config["model"]["enc_layers"], t.config["model"]["dec_layers"]) for t in depth] == \
        [(n, n) for n in range(1, 7)]
    assert [t.label for t in depth] == [f"SR-NMT {n}L" for n in range(1, 7)]
    assert [t.key for t in expand(load_study("depth_srnmt", ["seeds=1"]))] == [t.key for t in depth]


def test_overrides_reach_the_trial_config_and_the_study():
    spec = load_study("cells", ["model.hidden=48", "seeds=1", "data.size=1000", "budget.epochs=2", "budget.min_epochs=0"])
    trials = expand(spec)
    assert len(trials) == len(spec.fields.grid["model.cell"])  # one seed per unit
    assert all(t.config["model"]["hidden"] == 48 and t.config["data"]["size"] == 1000 for t in trials)
    assert all(t.config["train"]["max_epochs"] == 2 for t in trials)


def test_smoke_shrinks_but_keeps_every_row():
    full, small = load_study("ablation_srnmt"), load_study("ablation_srnmt", smoke_run=True)
    assert len({t.label for t in expand(small)}) == 8 and small.fields.seeds == 1
    assert small.fields.budget.epochs == 1 and expand(small)[0].config["model"]["hidden"] <= 32
    assert expand(small)[0].config["model"]["enc_layers"] == 4
    assert small.fingerprint != full.fingerprint


@pytest.mark.parametrize("minimum", ["budget.min_epochs=8", "base.train.min_epochs=8"])
def test_smoke_trains_one_epoch_whatever_minimum_a_study_sets(minimum):
    small = load_study("cells", ["budget.epochs=20", "budget.patience=2", minimum], smoke_run=True)
    assert all(t.config["train"]["max_epochs"] == 1 and t.config["train"].get("min_epochs", 0) <= 1
               for t in expand(small))
    config_from_dict(expand(small)[0].config)  # valid


def test_ablation_labels_read_like_the_paper():
    assert ablation_label(("model.layer_norm",)) == "- LayerNorm"
    assert ablation_label(("model.layer_norm", "model.multi_attention")) == "- LN & MA"
    assert ablation_label(("model.layer_norm", "model.multi_attention", "model.highway")) == "- LN, MA & highway"


GOOD = """
name: tiny
description: a tiny test study
data: {preset: synthetic, size: 100}
base:
  model: {cell: srnmt, hidden: 16}
ablate: [model.layer_norm]
"""


def write_study(tmp_path, text: str, name: str = "tiny"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def edited(changes: dict, remove: tuple = ()) -> str:
    tree = yaml.safe_load(GOOD)
    for key in remove:
        tree.pop(key)
    tree.update(changes)
    return yaml.safe_dump(tree)


BAD = [
    ({"name": "other"}, (), "name: is 'other' but the file is tiny.yaml", "make them the same"),
    ({}, ("description",), "description: missing", "paper and table"),
    ({"seedz": 2}, (), "unknown key 'seedz'", "did you mean 'seeds'"),
    ({"seeds": 0}, (), "seeds: = 0", ">= 1"),
    ({"seeds": "two"}, (), "seeds = 'two' must be an integer", ""),
    ({}, ("ablate",), "the study varies nothing", "add ablate"),
    ({"grid": {"model.hidden": [8, 16]}}, (), "grid: cannot be combined with ablate", "one of ablate"),
    ({"ablate": ["model.colour"]}, (), "'model.colour' is not a model component", "ablate lists boolean"),
    ({"ablate": ["model.hidden"]}, (), "model.hidden is not a boolean component", "use grid"),
    ({"ablate": ["model.peephole"]}, (), "'model.peephole' is not a model component of cell 'srnmt'", "model.layer_norm"),
    ({"ablate": ["model.lstm.peephole"], "base": {"model": {"cell": "lstm"}}}, (), "model.lstm.peephole is already off",
     "full model"),
    ({"ablate": ["model.layer_norm", "model.layer_norm"]}, (), "lists a component twice", ""),
    ({"grid": {}}, ("ablate",), "grid: is empty", "at least one axis"),
    ({"grid": {"model.hidden": []}}, ("ablate",), "grid.model.hidden: = []", "non-empty list"),
    ({"grid": {"model.cell": ["gru", "lstmm"]}}, ("ablate",), "model.cell = 'lstmm' is not a known cell",
     "did you mean 'lstm'"),
    ({"grid": {"model.hidden": [0]}}, ("ablate",), "model.hidden = 0", "must be >= 1"),
    ({"metric": {"name": "bleu"}}, (), "metric.name: = 'bleu' is not reported", "valid_bleu"),
    ({"metric": {"name": "valid_bleu", "mode": "up"}}, (), "metric.mode = 'up' is not allowed", "max, min"),
    ({"scheduler": {"type": "asha"}, "metric": {"name": "test_bleu"}}, (), "is known only when a trial ends",
     "valid_bleu"),
    ({"resources": {"cpu": 0}}, (), "resources.cpu: = 0", "> 0"),
    ({"resources": {"gpu": -1}}, (), "resources.gpu: = -1", ">= 0"),
    ({"budget": {"epochs": 0}}, (), "budget.epochs: = 0", ">= 1"),
    ({"budget": {"steps": 0}}, (), "budget.steps: = 0", ">= 1"),
    ({"budget": {"tokens": -1}}, (), "budget.tokens: = -1", ">= 1"),
    ({"budget": {"patience": -1}}, (), "budget.patience: = -1", "never stop early"),
    ({"budget": {"minutes": 0}}, (), "budget.minutes: = 0", "safety cap"),
    ({"budget": {"min_epochs": -1}}, (), "budget.min_epochs: = -1", "from the first epoch"),
    ({"budget": {"epochs": 10, "min_epochs": 12}}, (), "budget.min_epochs: = 12 is more than budget.epochs (10)",
     "raise budget.epochs"),
    ({"budget": {"min_epochs": 12}}, (), "budget.min_epochs: = 12 is more than the default epoch budget (10)",
     "raise budget.epochs"),
    ({"budget": {"min_epochs": 12}, "base": {"model": {"cell": "srnmt"}, "train": {"max_epochs": 6}}}, (),
     "budget.min_epochs: = 12 is more than base.train.max_epochs (6)", "raise budget.epochs"),
    ({"name": ".."}, (), "name: = '..': a study name is a plain identifier", "letters, digits"),
    ({"name": "a/b"}, (), "name: = 'a/b': a study name is a plain identifier", "letters, digits"),
    ({"name": "reference"}, (), "name: = 'reference' is the name of a folder the platform keeps", "another name"),
    ({"base": {"modle": {"cell": "gru"}}}, (), "base.modle: unknown section", "did you mean 'base.model'"),
    ({"search": {"space": {"train.lr": {"type": "loguniform", "low": 0.01, "high": 0.001}}}}, ("ablate",),
     "low = 0.01 must be < high = 0.001", "swap them"),
    ({"search": {"space": {"train.lr": {"type": "gauss", "low": 1, "high": 2}}}}, ("ablate",),
     "type: = 'gauss'", "uniform, loguniform, int, categorical"),
    ({"search": {"space": {}}}, ("ablate",), "search.space: is empty", "distributions"),
    ({"search": {"space": {"model.cell": {"type": "categorical", "choices": []}}}}, ("ablate",),
     "a categorical distribution is", "choices"),
    ({"search": {"space": {"train.lr": {"type": "loguniform", "low": 0, "high": 1}}}}, ("ablate",),
     "needs low > 0", ""),
    ({"metric": [{"name": "valid_bleu"}, {"name": "train_tokens_per_s"}]}, (), "several objectives need a search", ""),
    ({"table": {"label": "{model.colour}"}, "grid": {"model.hidden": [8, 16]}}, ("ablate",),
     "{model.colour} is not a config key", "dotted keys"),
    ({"table": {"reference": "nope"}, "grid": {"model.hidden": [8, 16]}}, ("ablate",),
     "table.reference = 'nope' is not a row", "hidden=8"),
    ({"variants": [{"label": "a"}, {"set": {"model.hidden": 8}}]}, ("ablate",), "variants[1].label: missing", ""),
    ({"table": {"plot": "line"}}, (), "a line plot needs", "table.x"),
]


@pytest.mark.parametrize("changes,remove,what,fix", BAD, ids=[b[2][:40] for b in BAD])
def test_bad_study_is_one_line_naming_file_key_and_fix(tmp_path, changes, remove, what, fix):
    path = write_study(tmp_path, edited(changes, remove))
    with pytest.raises(ConfigError) as info:
        load_study(str(path))
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert what in message and fix in message


def test_budget_keys_reach_every_trial_config():
    spec = load_study("ablation_srnmt", ["budget.epochs=7", "budget.steps=500", "budget.tokens=90000",
                                         "budget.patience=2", "budget.min_epochs=5", "budget.minutes=30"])
    for trial in expand(spec):
        train = trial.config["train"]
        assert (train["max_epochs"], train["max_steps"], train["max_tokens"], train["patience"],
                train["min_epochs"], train["max_minutes"]) == (7, 500, 90000, 2, 5, 30.0)


def test_no_builtin_study_or_smoke_run_ends_trials_by_wall_time():
    for name in BUILTIN:
        for smoke_run in (False, True):
            for trial in expand(load_study(name, smoke_run=smoke_run)):
                assert trial.config["train"]["max_minutes"] is None, (name, smoke_run)


def test_unknown_study_name_suggests_the_closest():
    with pytest.raises(ConfigError, match="unknown study 'ablation_srnm'.*did you mean 'ablation_srnmt'"):
        load_study("ablation_srnm")


def test_malformed_study_yaml(tmp_path):
    path = write_study(tmp_path, "name: tiny\nbase: [1, 2\n")
    with pytest.raises(ConfigError, match="malformed YAML"):
        load_study(str(path))


@pytest.mark.parametrize("name", BUILTIN)
def test_effective_spec_round_trips_for_rebuilding_tables(name):
    from study.spec.loading import spec_from_dict, spec_to_dict

    for smoke_run in (False, True):
        spec = load_study(name, smoke_run=smoke_run)
        again = spec_from_dict(spec_to_dict(spec), source="study.json")
        assert [(t.label, t.key) for t in expand(again)] == [(t.label, t.key) for t in expand(spec)]


def test_saved_trial_records_rebuild_the_same_table(tmp_path):
    """Committed reference results carry their trial records: tables rebuild without Ray."""
    from study.analysis.tables import build_table
    from study.store.records import load_saved_records, save_records

    refs = ["a b c d", "e f g h"]
    records = []
    for label, row, hyps in (("ref", 0, ["a b c d", "e f g x"]), ("other", 1, ["a b x y", "e x x h"])):
        for seed in (1, 2):
            hyp = tmp_path / f"{label}{seed}.hyp"
            hyp.write_text("\n".join(hyps) + "\n")
            records.append({"key": f"{row:06d}{seed:06d}", "label": label, "row": row, "seed": seed, "config": {},
                            "params": {}, "status": "ok", "error": "", "hyp_path": str(hyp), "artifacts": [],
                            "metrics": {"test_bleu": 50.0 - 10 * row + seed, "params": 10, "weight_matrices": 2,
                                        "train_tokens_per_s": 100.0}})
    direct = build_table(records, "t", "ref", refs)
    save_records(records, tmp_path / "study")
    rebuilt = build_table(load_saved_records(tmp_path / "study"), "t", "ref", refs)
    assert direct.markdown() == rebuilt.markdown()
    row = rebuilt.rows.set_index("label").loc["other"]
    assert row["delta"] == -10.0 and row["n"] == 2 and 0.0 <= row["p_value"] <= 1.0
    assert rebuilt.rows.set_index("label").loc["ref", "bleu_std"] == pytest.approx(0.7071, abs=1e-3)


def test_mlflow_s_own_variable_comes_between_the_option_and_the_stored_or_default_store(tmp_path, monkeypatch):
    from study.execution.run_tracking import tracking_uri
    from study.spec.options import Execution, ResultsPlace, RunOptions

    chosen = {"tracking_uri": "http://127.0.0.1:5000", "tracking_uri_default": False}
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////team/mlflow.db")
    assert tracking_uri(RunOptions(), None, tmp_path) == "sqlite:////team/mlflow.db"
    assert tracking_uri(RunOptions(how=Execution(resume=True)), chosen, tmp_path) == "sqlite:////team/mlflow.db"
    option = RunOptions(where=ResultsPlace(tracking_uri="http://10.0.0.5:5000"))
    assert tracking_uri(option, chosen, tmp_path) == "http://10.0.0.5:5000"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", " ")  # set but empty: as if unset
    assert tracking_uri(RunOptions(), None, tmp_path) == f"sqlite:///{(tmp_path / 'mlflow.db').resolve()}"


def test_tracking_store_of_reference_results_is_not_reused(tmp_path):
    from study.execution.run_tracking import tracking_uri
    from study.spec.options import Execution, ResultsPlace, RunOptions

    resumed = RunOptions(how=Execution(resume=True))
    state = {"tracking_uri": "sqlite:////elsewhere/results/mlflow.db"}  # committed by another machine
    fresh = tracking_uri(RunOptions(), state, tmp_path)
    assert fresh == f"sqlite:///{(tmp_path / 'mlflow.db').resolve()}"
    # resumed: the default store of the results directory it started in is the default store of this one
    assert tracking_uri(resumed, state, tmp_path) == fresh  # study.json without the record
    assert tracking_uri(resumed, {**state, "tracking_uri_default": True}, tmp_path) == fresh
    # a store chosen with --tracking-uri is kept on resume; --tracking-uri always wins
    chosen = {**state, "tracking_uri_default": False}
    assert tracking_uri(resumed, chosen, tmp_path) == state["tracking_uri"]
    for uri in ("http://127.0.0.1:5000", "sqlite:////shared/tracking.db"):  # not a default store
        assert tracking_uri(resumed, {"tracking_uri": uri}, tmp_path) == uri
    server = ResultsPlace(tracking_uri="http://127.0.0.1:5000")
    assert tracking_uri(RunOptions(where=server), state, tmp_path) == "http://127.0.0.1:5000"
    assert tracking_uri(RunOptions(where=server, how=Execution(resume=True)), state, tmp_path) == "http://127.0.0.1:5000"


def test_the_readme_example_study_file_loads(tmp_path):
    """The study file a reader copies from the README is valid as printed."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Writing a study file"):]
    example = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    path = tmp_path / "my_study.yaml"
    path.write_text(example, encoding="utf-8")
    trials = expand(load_study(str(path)))
    assert {t.label for t in trials} == {"GRU 1L", "GRU 2L", "ATR 1L", "ATR 2L"} and len(trials) == 12
    train = trials[0].config["train"]
    assert (train["max_epochs"], train["min_epochs"], train["early_stop"]) == (50, 10, "plateau")


def test_a_data_dir_corpus_is_validated_instead_of_the_study_files_own_data(tmp_path):
    """--data-dir replaces the study's corpus before validation: a vocabulary the study's own
    synthetic data could not make, but the real corpus can, is accepted (and the reverse refused)."""
    from nmt.data.synthetic import generate_corpus
    from study.execution.study_data import corpus_in

    # files with a richer vocabulary than the study's own synthetic data (the whole lexicon, not a tenth)
    corpus = generate_corpus(3, 3000, 50, 50, lexicon=1.0, max_words=10)
    for split, name in (("train", "train"), ("valid", "val"), ("test", "test")):
        for side, lang in enumerate(("en", "de")):
            (tmp_path / f"{name}.{lang}").write_text("".join(pair[side] + "\n" for pair in corpus[split]))
    separate = ["data.spm.joint=false", "data.spm.vocab_size=2000"]
    with pytest.raises(ConfigError, match="data.spm.vocab_size = 2000: the source side of the synthetic corpus"):
        load_study("cells", separate)
    spec = load_study("cells", separate, corpus=corpus_in(tmp_path, "en-de"))
    assert spec.fields.data["preset"] is None and spec.fields.data["train"][0].endswith("train.en")
    with pytest.raises(ConfigError, match=r"data.spm.vocab_size = 9000000: data.train \("):
        load_study("cells", ["data.spm.vocab_size=9000000"], corpus=corpus_in(tmp_path, "en-de"))


def test_the_plateau_stopping_rule_is_part_of_every_trial_and_of_its_key():
    """budget.stop: plateau reaches each trial's train.early_stop, so it is in the trial key: a study never mixes
    rules. The rule stops on train.valid_metric's curve, so the study's metric must be that curve."""
    patience = expand(load_study("cells", ["budget.stop=patience"]))
    plateau = expand(load_study("cells"))  # the built-in studies stop on a plateau
    assert {t.config["train"]["early_stop"] for t in patience} == {"patience"}
    assert {t.config["train"]["early_stop"] for t in plateau} == {"plateau"}
    assert not {t.key for t in patience} & {t.key for t in plateau}
    assert load_study("cells", ["budget.stop=plateau"]).tree["budget"]["stop"] == "plateau"  # what study.json keeps
    with pytest.raises(ConfigError, match=r"budget.stop: plateau stops each trial when its valid BLEU .* the study's "
                                          r"metric is valid_ppl \(min\)"):
        load_study("cells", ["budget.stop=plateau", "metric.name=valid_ppl", "metric.mode=min"])
    load_study("cells", ["budget.stop=plateau", "metric.name=valid_ppl", "metric.mode=min", "train.valid_metric=ppl"])
    with pytest.raises(ConfigError, match="budget.stop"):
        load_study("cells", ["budget.stop=converged"])
