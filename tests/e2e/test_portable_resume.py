"""A study's records are portable: trial keys and --resume see a corpus by its content and base
name, not by where it lies or where its cache is, and the default tracking store is the one of
the current results directory. A half-finished study committed to git (what .gitignore keeps
of its trial store) continues in a clone on another machine with its corpus at another path.

Modules covered here: ``study.spec.portable``."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from study_helpers import ROOT, mlflow_runs, study, table_rows

NAME = "portable"


def study_text(data: str = "{max_len: 60, spm: {vocab_size: 200}}") -> str:
    """A tiny 2-configuration x 1-seed study (the sizes of the fault tests)."""
    return f"""
name: {NAME}
description: a tiny study continued from a clone of its committed results
data: {data}
base:
  model: {{cell: gru, hidden: 16, emb: 16}}
  train: {{batch_tokens: 600}}
  decode: {{beam: 2}}
variants:
  - {{label: small, set: {{}}}}
  - {{label: atr, set: {{model.cell: atr}}}}
seeds: 1
budget: {{epochs: 1}}
"""


def write_corpus(directory: Path) -> Path:
    """A tiny en-de corpus (300 training pairs) as --data-dir finds it: train/val/test.{en,de}."""
    from nmt.data.synthetic import generate_corpus

    directory.mkdir(parents=True)
    corpus = generate_corpus(7, 300, 20, 20, max_words=12)
    for split, name in (("train", "train"), ("valid", "val"), ("test", "test")):
        for side, lang in ((0, "en"), (1, "de")):
            (directory / f"{name}.{lang}").write_text("".join(pair[side] + "\n" for pair in corpus[split]),
                                                      encoding="utf-8")
    return directory


def file_study(directory: Path, corpus: Path, cache: Path) -> Path:
    """The tiny study with its data files given in the study file (and an explicit cache directory)."""
    files = {split: [str(corpus / f"{name}.{lang}") for lang in ("en", "de")]
             for split, name in (("train", "train"), ("valid", "val"), ("test", "test"))}
    data = json.dumps({"preset": None, **files, "cache_dir": str(cache), "max_len": 60, "spm": {"vocab_size": 200}})
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{NAME}.yaml"
    path.write_text(study_text(data), encoding="utf-8")
    return path


def old_key(config: dict) -> str:
    """The trial key as it was computed before keys were made portable: the plain config, as configs
    were before train.numerics existed (how the CPU computes, which no key includes)."""
    train = {k: v for k, v in config["train"].items() if k != "numerics"}
    return hashlib.sha256(json.dumps({**config, "train": train}, sort_keys=True).encode()).hexdigest()[:12]


def test_trial_key_is_the_corpus_content_and_name_not_its_path_or_cache(tmp_path):
    from nmt.typed_config import tree_changes
    from study.spec.expansion import expand
    from study.spec.loading import load_study
    from study.spec.portable import config_key, portable_tree

    corpus_a = write_corpus(tmp_path / "machine-a" / "corpus")
    corpus_b = tmp_path / "machine-b" / "elsewhere" / "multi30k"
    shutil.copytree(corpus_a, corpus_b)
    spec_a = load_study(str(file_study(tmp_path / "a", corpus_a, tmp_path / "cache-a")))
    spec_b = load_study(str(file_study(tmp_path / "b", corpus_b, tmp_path / "cache-b")))
    keys_a, keys_b = [t.key for t in expand(spec_a)], [t.key for t in expand(spec_b)]
    assert len(set(keys_a)) == 2 and keys_a == keys_b
    assert tree_changes(portable_tree(spec_a.tree), portable_tree(spec_b.tree)) == []  # what --resume compares
    assert portable_tree(spec_b.tree)["data"]["train"][0].startswith("train.en@")

    corpus_c = tmp_path / "machine-c" / "corpus"
    shutil.copytree(corpus_a, corpus_c)
    lines = (corpus_c / "test.de").read_text(encoding="utf-8").splitlines()
    (corpus_c / "test.de").write_text("\n".join(["ein anderer satz", *lines[1:]]) + "\n", encoding="utf-8")
    spec_c = load_study(str(file_study(tmp_path / "c", corpus_c, tmp_path / "cache-a")))
    assert not set(keys_a) & {t.key for t in expand(spec_c)}  # other content: other trials
    changes = tree_changes(portable_tree(spec_a.tree), portable_tree(spec_c.tree))
    assert len(changes) == 1 and changes[0].startswith("data.test: ['test.en@")

    # a config without data files (the synthetic preset, every built-in study) keeps its key;
    # the cache directory the runner fills in changes nothing
    synthetic = tmp_path / "synthetic" / f"{NAME}.yaml"
    synthetic.parent.mkdir()
    synthetic.write_text(study_text("{preset: synthetic, size: 300, valid_size: 20, test_size: 20}"), encoding="utf-8")
    for spec in (load_study(str(synthetic)), load_study("cells")):
        for trial in expand(spec):
            assert trial.config["data"]["train"] is None and trial.config["data"]["cache_dir"] is None
            assert trial.key == old_key(trial.config)
            cached = {**trial.config, "data": {**trial.config["data"], "cache_dir": str(tmp_path / "cache")}}
            assert config_key(cached) == trial.key


def git_kept_files(repo: Path) -> list[str]:
    """The files of ``repo`` that ``git add`` would commit under the project's .gitignore."""
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True)
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "--others", "--exclude-standard", "-z"],
                            check=True, capture_output=True).stdout.decode()
    return sorted(name for name in listed.split("\0") if name)


@pytest.mark.slow
def test_committed_half_finished_study_continues_in_a_clone_on_another_machine(tmp_path, ray_env):
    machine_a, machine_b = tmp_path / "machine-a", tmp_path / "machine-b"
    corpus_a = write_corpus(machine_a / "corpus")
    repo_a = machine_a / "repo"
    repo_a.mkdir()
    (repo_a / f"{NAME}.yaml").write_text(study_text(), encoding="utf-8")
    results_a = repo_a / "results" / "reference"
    env_a = {**ray_env, "NMT_CACHE_DIR": str(machine_a / "cache")}
    first = study(str(repo_a / f"{NAME}.yaml"), "--cpus", "1", "--results", str(results_a), "--data-dir",
                  str(corpus_a), "--langs", "en-de", env=env_a)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    store_a = results_a / "ray" / NAME
    keys = {json.loads((path / "trial.json").read_text())["label"]: path.name for path in (store_a / "trials").iterdir()}
    assert sorted(keys) == ["atr", "small"] and all((store_a / "finished" / key / "metrics.json").is_file()
                                                    for key in keys.values())
    kept, lost = keys["small"], keys["atr"]
    shutil.rmtree(store_a / "finished" / lost)  # half-finished, as when it was committed mid-way
    # ... after an attempt of the lost trial that got further than the one that will train it again
    # (an epoch of a larger budget, as on a machine the clone has no checkpoint of)
    history_a = json.loads((store_a / "trials" / lost / "history.json").read_text())["epochs"]
    stale = {**history_a[-1], "epoch": 2.0, "valid_bleu": 99.0}
    (store_a / "trials" / lost / "history.json").write_text(json.dumps({"epochs": [*history_a, stale]}))
    (store_a / "trials" / lost / "progress.json").write_text(json.dumps(stale))

    # commit on machine A, clone on machine B: only what git keeps travels
    files = git_kept_files(repo_a)
    store = f"results/reference/ray/{NAME}"
    for needed in (f"{store}/trials/{kept}/trial.json", f"{store}/trials/{kept}/history.json",
                   f"{store}/trials/{kept}/progress.json", f"{store}/trials/{lost}/trial.json",
                   f"{store}/finished/{kept}/metrics.json", f"{store}/finished/{kept}/test.hyp",
                   f"results/reference/{NAME}/study.json", f"{NAME}.yaml"):
        assert needed in files, (needed, files)
    assert (store_a / "finished" / kept / "state.pt").is_file() and (store_a / "trials" / kept / ".lock").is_file()
    assert not [name for name in files if name.endswith((".pt", ".lock", ".model", "mlflow.db"))
                or "/run/" in name or "mlflow-artifacts/" in name], files
    clone = machine_b / "work" / "clone"
    for name in files:
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo_a / name, clone / name)
    corpus_b = machine_b / "data" / "de-en"
    shutil.copytree(corpus_a, corpus_b)
    shutil.rmtree(machine_a)  # nothing of machine A is left: corpus, results, tracking store, cache

    results_b = clone / "results" / "reference"
    store_b = results_b / "ray" / NAME
    kept_metrics = store_b / "finished" / kept / "metrics.json"
    before = kept_metrics.read_bytes(), kept_metrics.stat().st_mtime_ns
    args = [str(clone / f"{NAME}.yaml"), "--cpus", "1", "--results", str(results_b), "--data-dir", str(corpus_b),
            "--langs", "en-de"]
    env_b = {**ray_env, "NMT_CACHE_DIR": str(machine_b / "cache")}
    resumed = study(*args, "--resume", env=env_b)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "Traceback" not in resumed.stderr
    progress = [line for line in resumed.stdout.splitlines() if "] trials: " in line]
    assert "1/2 done" in progress[0], progress  # the kept trial counts before Tune replays it
    assert any("done: small seed 1: ok" in line and line.endswith("(finished before this run)")
               for line in resumed.stdout.splitlines()), resumed.stdout[-3000:]

    # the same trial keys on machine B; the finished trial was kept, only the other one trained
    assert sorted(path.name for path in (store_b / "trials").iterdir()) == sorted(keys.values())
    assert sorted(path.parent.name for path in store_b.glob("finished/*/metrics.json")) == sorted(keys.values())
    assert (kept_metrics.read_bytes(), kept_metrics.stat().st_mtime_ns) == before
    assert not (store_b / "finished" / kept / "state.pt").exists()  # never trained here
    assert (store_b / "finished" / lost / "state.pt").is_file()  # trained here
    # trained from its start, it records its own epochs only: the earlier attempt's are forgotten
    history_b = json.loads((store_b / "trials" / lost / "history.json").read_text())["epochs"]
    assert [entry["epoch"] for entry in history_b] == [1.0] and history_b[0]["valid_bleu"] != 99.0
    assert json.loads((store_b / "trials" / lost / "progress.json").read_text())["epoch"] == 1.0
    assert [row["label"] for row in table_rows(results_b, NAME)] == ["small", "atr"]
    _, parents, children = mlflow_runs(results_b, NAME)  # the default store of the clone's results
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert sorted(child.data.tags["trial_key"] for child in children) == sorted(keys.values())
    assert all(child.info.status == "FINISHED" for child in children)
    state = json.loads((results_b / NAME / "study.json").read_text())
    assert state["tracking_uri"] == f"sqlite:///{(results_b / 'mlflow.db').resolve()}" and state["tracking_uri_default"]
    assert not machine_a.exists()

    # a real change of the corpus is still refused, with the study's own message
    test_de = corpus_b / "test.de"
    test_de.write_text("ein anderer satz\n" + test_de.read_text(encoding="utf-8").split("\n", 1)[1], encoding="utf-8")
    changed = study(*args, "--resume", env=env_b)
    assert changed.returncode == 2 and "Traceback" not in changed.stderr, changed.stderr[-3000:]
    assert "the study changed since it started (data.test: ['test.en@" in changed.stderr
    assert "--fresh" in changed.stderr
