"""What a trial's record becomes in MLflow's terms, checked without a store: limits, names and digests."""

from __future__ import annotations

from study.execution.mlflow_entities import (
    corpus_input,
    metric_label,
    mlflow_params,
    mlflow_tags,
    source_tags,
    tag_value,
    varied_values,
)


def test_params_and_tags_are_cut_to_mlflow_s_length_limits():
    params = mlflow_params({"k" * 300: "v" * 7000, "train.lr": 0.001})
    assert [(len(p.key), len(p.value)) for p in params] == [(250, 6000), (8, 5)]
    tags = mlflow_tags({"note": "x" * 6000})
    assert len(tags[0].value) == 5000 and tags[0].key == "note"


def test_a_whole_float_is_tagged_as_the_table_writes_it():
    assert [tag_value(v) for v in (4.0, 4.5, 3, "early stop")] == ["4", "4.5", "3", "early stop"]


def test_varied_values_name_only_the_keys_the_trial_has():
    flat = {"model.cell": "gru", "model.enc_layers": 2, "train.lr": 0.001}
    assert varied_values(flat, ["model.cell", "model.dec_layers", "model.enc_layers"]) == \
        "model.cell=gru, model.enc_layers=2"


def test_row_labels_become_metric_names_mlflow_accepts_without_path_tricks():
    assert metric_label("GRU + LN (2 layers)") == "GRU LN 2 layers"
    assert metric_label("../../etc/passwd") == "etc passwd" and metric_label("a..b/") == "a.b"
    assert metric_label("%%%") == "row" and len(metric_label("a" * 400)) == 200


def test_the_same_corpus_at_two_paths_is_one_dataset(tmp_path):
    digests = set()
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        for name in ("train.en", "train.de"):
            (tmp_path / folder / name).write_text(f"{name} line\n")
        data = {"train": [str(tmp_path / folder / "train.en"), str(tmp_path / folder / "train.de")],
                "cache_dir": str(tmp_path / folder / "cache")}
        dataset = corpus_input(data)
        assert dataset.dataset.name == "train.en + train.de"
        assert [(t.key, t.value) for t in dataset.tags] == [("mlflow.data.context", "training")]
        digests.add(dataset.dataset.digest)
    assert len(digests) == 1
    (tmp_path / "b" / "train.de").write_text("changed\n")
    assert corpus_input({"train": [str(tmp_path / "b" / "train.en"), str(tmp_path / "b" / "train.de")]}).dataset.digest \
        not in digests


def test_source_tags_leave_out_an_unknown_commit_and_a_dirty_mark():
    tags = source_tags("search_spaces/cells.yaml", "abc123+dirty")
    assert tags["mlflow.source.git.commit"] == "abc123" and tags["mlflow.source.name"] == "search_spaces/cells.yaml"
    assert tags["mlflow.user"]
    assert "mlflow.source.git.commit" not in source_tags("cells.yaml", "unknown")
