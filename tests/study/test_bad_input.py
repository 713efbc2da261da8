"""Bad input, at the command line: one line naming the file/key/value and the fix, exit status 2,
no traceback (unless --debug), and nothing half-written. One case per row of CASES.

Modules covered here: ``nmt.cli``, ``nmt.errors``, ``nmt.fileio`` and ``nmt.yaml_input``."""

from __future__ import annotations

import errno
import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.cli import run_main

ROOT = Path(__file__).resolve().parents[2]

STUDY = """name: bad
description: a study of the bad-input tests
data: {preset: synthetic, size: 300, valid_size: 20, test_size: 20, spm: {vocab_size: 200}}
base:
  model: {cell: gru, hidden: 16, emb: 16}
  train: {batch_tokens: 600}
variants:
  - {label: one, set: {}}
budget: {epochs: 1}
"""


def corpus(tmp_path: Path, src: list[str], tgt: list[str], raw_src: bytes | None = None, gz: bool = False) -> list[str]:
    """Parallel train/valid/test files (the same lines in each split) as --set values."""
    paths = {}
    for split in ("train", "valid", "test"):
        s, t = tmp_path / f"{split}.en", tmp_path / f"{split}.de"
        data = raw_src if raw_src is not None else "".join(line + "\n" for line in src).encode()
        if gz:
            s = s.with_suffix(".en.gz")
            data = gzip.compress(data)
        s.write_bytes(data)
        t.write_text("".join(line + "\n" for line in tgt), encoding="utf-8")
        paths[split] = f"[{s}, {t}]"
    return [f"--set=data.{split}={value}" for split, value in paths.items()] + ["--set=data.preset=null",
                                                                                "--set=data.spm.vocab_size=40"]


SENTENCES = [f"the {w} sees a small house near the river" for w in ("cat", "dog", "child", "woman", "man")] * 4
GERMAN = [f"die {w} sieht ein kleines haus am fluss" for w in ("katze", "hund", "kind", "frau", "mann")] * 4


# more pieces than every word of the smallest synthetic lexicon holds (about 8,600)
TOO_LARGE_FOR_THE_LEXICON = ["--set", "data.lexicon=0.01", "--set", "data.spm.vocab_size=50000"]


def study_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


# (name, command module, argv builder(tmp_path) -> argv, substrings the one line must contain)
CASES = [
    ("malformed study yaml", "study.run", lambda p: [study_file(p, STUDY + "base: [unclosed\n")],
     ["bad.yaml", "line"]),
    ("malformed train yaml", "nmt.train", lambda p: ["--config", study_file(p, "model: {cell: gru\n")],
     ["bad.yaml", "YAML"]),
    ("unknown study key suggests", "study.run", lambda p: [study_file(p, STUDY.replace("budget:", "budgett:"))],
     ["budgett", "budget"]),
    ("unknown config key suggests", "nmt.train", lambda p: ["--set", "model.hiden=32"],
     ["model.hiden", "model.hidden"]),
    ("wrong type", "nmt.train", lambda p: ["--set", "model.hidden=big"], ["model.hidden", "'big'"]),
    ("unknown cell suggests", "study.run", lambda p: [study_file(p, STUDY), "--set", "model.cell=lstn"],
     ["model.cell", "lstn", "lstm"]),
    ("unknown study name suggests", "study.run", lambda p: ["ablation_srnm"], ["ablation_srnm", "ablation_srnmt"]),
    ("zero layers", "nmt.train", lambda p: ["--set", "model.enc_layers=0"], ["model.enc_layers", "0"]),
    ("dropout above 1", "study.run", lambda p: [study_file(p, STUDY), "--set", "model.dropout=1.5"],
     ["model.dropout", "1.5"]),
    ("negative lr", "nmt.train", lambda p: ["--set", "train.lr=-0.001"], ["train.lr", "-0.001"]),
    ("ablate a non-boolean", "study.run",
     lambda p: [study_file(p, STUDY.replace("variants:\n  - {label: one, set: {}}", "ablate: [model.hidden]"))],
     ["ablate", "model.hidden", "not a boolean component"]),
    ("ablate a component the cell lacks", "study.run",
     lambda p: [study_file(p, STUDY.replace("variants:\n  - {label: one, set: {}}", "ablate: [peephole]"))],
     ["ablate", "peephole"]),
    ("empty grid", "study.run",
     lambda p: [study_file(p, STUDY.replace("variants:\n  - {label: one, set: {}}", "grid: {model.cell: []}"))],
     ["grid", "model.cell"]),
    ("optuna low above high", "study.run",
     lambda p: ["optuna_atr", "--set", "search.space={train.lr: {type: loguniform, low: 0.1, high: 0.001}}"],
     ["train.lr", "low"]),
    ("reuse from a study never run", "study.run",
     lambda p: [study_file(p, STUDY), "--reuse-from", "cells", "--results", str(p / "results")],
     ["--reuse-from cells", "no trial store", "same --results directory"]),
    ("reuse from itself", "study.run", lambda p: [study_file(p, STUDY), "--reuse-from", "bad"],
     ["--reuse-from bad", "this study", "--resume"]),
    ("reuse into a search", "study.run", lambda p: ["optuna_atr", "--reuse-from", "cells"],
     ["--reuse-from", "optuna_atr is a search"]),
    ("missing data path", "study.run",
     lambda p: [study_file(p, STUDY), "--set", f"data.train=[{p}/nope.en, {p}/nope.de]", "--set", "data.preset=null",
                "--set", f"data.valid=[{p}/nope.en, {p}/nope.de]", "--set", f"data.test=[{p}/nope.en, {p}/nope.de]"],
     ["nope.en", "not found"]),
    ("line counts differ", "study.run", lambda p: [study_file(p, STUDY), *corpus(p, SENTENCES, GERMAN[:-3])],
     ["train.en", "20", "17"]),
    ("empty corpus", "study.run", lambda p: [study_file(p, STUDY), *corpus(p, [], [])], ["train.en", "empty"]),
    ("non-utf8 bytes", "study.run",
     lambda p: [study_file(p, STUDY), *corpus(p, SENTENCES, GERMAN, raw_src=b"ok line\nStra\xe4e\n" * 10)],
     ["train.en", "UTF-8", "line 2"]),
    ("non-utf8 bytes gz", "nmt.train",
     lambda p: [*corpus(p, SENTENCES, GERMAN, raw_src=b"ok line\nStra\xe4e\n" * 10, gz=True)],
     ["train.en.gz", "UTF-8"]),
    ("line far over the limit", "study.run",
     lambda p: [study_file(p, STUDY), *corpus(p, SENTENCES[:-1] + ["word " * 200_000], GERMAN)],
     ["train.en", "line 20", "characters long"]),
    ("vocab larger than data", "study.run",
     lambda p: [study_file(p, STUDY), *corpus(p, SENTENCES, GERMAN), "--set", "data.spm.vocab_size=5000"],
     ["data.spm.vocab_size = 5000", "data.train", "train.en", "has at most", "--set data.spm.vocab_size=N"]),
    *[(f"vocab larger than the synthetic lexicon allows{flags}", "study.run",
       lambda p, flags=flags: [study_file(p, STUDY), *TOO_LARGE_FOR_THE_LEXICON, *flags.split()],
       ["bad.yaml", "data.spm.vocab_size = 50000", "the synthetic corpus (seed 1, lexicon 0.01) has at most",
        "--set data.spm.vocab_size=N"]) for flags in ("", " --smoke", " --dry-run")],
    *[(f"vocab larger than the synthetic lexicon allows (nmt.train{flags})", "nmt.train",
       lambda p, flags=flags: [*TOO_LARGE_FOR_THE_LEXICON, *flags.split()],
       ["default.yaml", "data.spm.vocab_size = 50000", "the synthetic corpus (seed 1, lexicon 0.01) has at most"])
      for flags in ("", " --smoke")],
    ("separate vocabularies: the side that allows fewer pieces", "nmt.train",
     lambda p: ["--set", "data.lexicon=0.01", "--set", "data.spm.joint=false", "--set", "data.spm.vocab_size=5000"],
     ["data.spm.vocab_size = 5000", "the source side of the synthetic corpus", "has at most"]),
    ("unreachable address", "study.run", lambda p: [study_file(p, STUDY), "--address", "127.0.0.1:9"],
     ["--address 127.0.0.1:9", "ray start --head"]),
    ("unreachable RAY_ADDRESS", "study.run", lambda p: [study_file(p, STUDY)],
     ["RAY_ADDRESS=127.0.0.1:9", "cannot reach", "unset RAY_ADDRESS"]),
    ("a GPU per trial without a GPU", "study.run", lambda p: [study_file(p, STUDY), "--gpus-per-trial", "1"],
     ["--gpus-per-trial 1", "no CUDA GPU", "--gpus-per-trial 0"]),
    ("more CPUs per trial than the machine", "study.run",
     lambda p: [study_file(p, STUDY), "--cpus", "2", "--set", "resources.cpu=3"],
     ["resources.cpu = 3", "(2)", "--set resources.cpu=2"]),
    ("malformed address", "study.run", lambda p: [study_file(p, STUDY), "--address", "nohost"],
     ["--address", "HOST:PORT"]),
    ("unreachable tracking server", "study.run",
     lambda p: [study_file(p, STUDY), "--tracking-uri", "http://127.0.0.1:9"], ["MLflow", "127.0.0.1:9"]),
    ("results path is a file", "study.run",
     lambda p: [study_file(p, STUDY), "--results", str(_a_file(p))], ["--results", "is a file"]),
    ("results directory unreadable", "study.run",
     lambda p: [study_file(p, STUDY), "--results", str(_garbled_state(p))], ["study.json", "unreadable", "--fresh"]),
    ("stored results are never replaced without --fresh", "study.run",
     lambda p: [study_file(p, STUDY), "--results", str(_stored_results(p))],
     ["holds stored results", "study.table bad", "--fresh replaces them"]),
    ("an unfinished run is resumed, not shown as finished", "study.run",
     lambda p: [study_file(p, STUDY), "--results", str(_unfinished_run(p))],
     ["holds an unfinished run", "--resume continues it"]),
    ("results path not writable", "study.run",
     lambda p: [study_file(p, STUDY), "--results", "/proc/rnmt-results"], ["/proc/rnmt-results", "--results"]),
    ("train out dir not writable", "nmt.train", lambda p: ["--smoke", "--out", "/proc/rnmt-run"],
     ["/proc/rnmt-run", "--out"]),
    ("resume with nothing to resume", "study.run", lambda p: [study_file(p, STUDY), "--resume", "--results",
                                                              str(p / "r")], ["nothing to resume", "without --resume"]),
    ("resume and fresh together", "study.run", lambda p: [study_file(p, STUDY), "--resume", "--fresh"],
     ["--resume", "--fresh"]),
    ("seeds zero", "study.run", lambda p: [study_file(p, STUDY), "--seeds", "0"], ["seeds", "0"]),
    ("set without equals", "study.run", lambda p: [study_file(p, STUDY), "--set", "model.hidden"],
     ["model.hidden", "KEY=VALUE"]),
    ("unknown metric", "study.run", lambda p: [study_file(p, STUDY + "metric: {name: valid_bleuu}\n")],
     ["metric.name", "valid_bleuu", "valid_bleu"]),
    ("study file missing", "study.run", lambda p: [str(p / "missing.yaml")], ["missing.yaml"]),
    ("langs without data dir", "study.run", lambda p: [study_file(p, STUDY), "--langs", "en-de"],
     ["--langs", "--data-dir"]),
    ("data dir without the pair", "study.run",
     lambda p: [study_file(p, STUDY), "--data-dir", str(p), "--langs", "en-fr"], ["--data-dir", "'en'"]),
    ("a data path that is a link loop", "study.run",
     lambda p: [study_file(p, STUDY), "--set=data.preset=null", *(f"--set=data.{split}=[{_loop(p)}, {_loop(p)}]"
                                                                 for split in ("train", "valid", "test"))],
     ["data.train", "loop-a", "symbolic link loop"]),
    ("a data path that is a link loop (nmt.train)", "nmt.train",
     lambda p: ["--set=data.preset=null", *(f"--set=data.{split}=[{_loop(p)}, {_loop(p)}]"
                                            for split in ("train", "valid", "test"))],
     ["data.train", "loop-a", "symbolic link loop"]),
    ("--data-dir a link loop", "study.run", lambda p: [study_file(p, STUDY), "--data-dir", str(_loop(p)),
                                                        "--langs", "en-de"], ["--data-dir", "symbolic link loop"]),
    ("translate without checkpoint", "nmt.translate", lambda p: ["--checkpoint", str(p / "none")],
     ["none", "checkpoint"]),
    ("table of a study never run", "study.table", lambda p: ["cells", "--results", str(p / "empty")],
     ["cells", "study.run"]),
    ("search space unknown key", "study.run",
     lambda p: ["optuna_atr", "--set", "search.space={model.hiden: {type: categorical, choices: [16, 32]}}"],
     ["search.space.model.hiden", "'model.hidden'"]),
    ("search space bad choice", "study.run",
     lambda p: ["optuna_atr", "--set", "search.space={model.cell: {type: categorical, choices: [gru, lstn]}}"],
     ["search.space.model.cell", "'lstn'"]),
    ("search space data key", "study.run",
     lambda p: ["optuna_atr", "--set", "search.space={data.size: {type: int, low: 100, high: 200}}"],
     ["search.space.data.size", "only model, train and decode"]),
    ("asha grace period beyond the budget", "study.run",
     lambda p: [study_file(p, STUDY), "--set", "scheduler={type: asha, grace_period: 10}"],
     ["scheduler.grace_period", "10", "budget of 1 epochs"]),
    ("table.x names no axis", "study.run",
     lambda p: [study_file(p, STUDY.replace("variants:\n  - {label: one, set: {}}", "grid: {model.cell: [gru, atr]}")
                           + "table: {plot: line, x: model.hidden}\n")],
     ["table.x", "'model.hidden'", "model.cell"]),
    ("variant label not text", "study.run",
     lambda p: [study_file(p, STUDY.replace("{label: one,", "{label: 3,"))], ["variants[0].label", "3", "quote"]),
    ("infinity in a study file", "study.run",
     lambda p: [study_file(p, STUDY.replace("batch_tokens: 600", "batch_tokens: 600, lr: .inf"))],
     ["bad.yaml", "base.train.lr", "finite"]),
    ("nan in --set", "nmt.train", lambda p: ["--set", "train.lr=.nan"], ["--set", "finite"]),
    # YAML reads 1e999 (no dot) as text, which float() turns into infinity
    ("1e999 in a study file", "study.run",
     lambda p: [study_file(p, STUDY.replace("batch_tokens: 600", "batch_tokens: 600, lr: 1e999"))],
     ["bad.yaml", "train.lr = '1e999' must be a finite number"]),
    ("1e999 in --set", "study.run", lambda p: [study_file(p, STUDY), "--dry-run", "--set", "decode.max_len_ratio=1e999"],
     ["decode.max_len_ratio", "must be a finite number"]),
    ("-1e999 in nmt.train --set", "nmt.train", lambda p: ["--set", "train.lr=-1e999"], ["train.lr", "finite"]),
    # the study's numerics key decides how every trial computes: a trial config's own is refused, not overridden
    ("numerics in the base config", "study.run",
     lambda p: [study_file(p, STUDY.replace("batch_tokens: 600", "batch_tokens: 600, numerics: native"))],
     ["bad.yaml", "base.train.numerics", "numerics: portable` or `numerics: native"]),
    ("numerics as a grid axis", "study.run",
     lambda p: [study_file(p, STUDY.replace("variants:\n  - {label: one, set: {}}", "grid: {train.numerics: [native, portable]}"))],
     ["grid.train.numerics", "the study's own key"]),
    # a line or record separator in a text the exports show would split a CSV record or a Markdown row
    ("a line separator in a row label", "study.run",
     lambda p: [study_file(p, STUDY.replace("{label: one,", '{label: "o\\u2028ne",'))],
     ["variants[0].label", "U+2028 (LINE SEPARATOR)", "one line"]),
    ("a next-line character in a title", "study.run",
     lambda p: [study_file(p, STUDY), "--set", 'table.title="a\\u0085b"'], ["table.title", "U+0085", "one line"]),
    ("a key twice in a study file", "study.run", lambda p: [study_file(p, STUDY + "base:\n  train: {lr: 0.1}\n")],
     ["bad.yaml", "'base' appears twice", "line 4"]),
    ("a key twice in a config", "nmt.train",
     lambda p: ["--config", study_file(p, "train: {lr: 0.1}\nmodel: {cell: gru}\ntrain: {lr: 0.2}\n")],
     ["bad.yaml", "'train' appears twice"]),
    ("YAML alias bomb", "study.run", lambda p: [study_file(p, STUDY + _alias_bomb())],
     ["bad.yaml", "more than 100,000 values", "aliases"]),
    ("a grid of a million", "study.run",
     lambda p: [study_file(p, STUDY.replace("variants:\n  - {label: one, set: {}}", "grid: {" + ", ".join(
         f"model.{key}: [{', '.join(str(v) for v in range(10))}]"
         for key in ("hidden", "emb", "enc_layers", "dec_layers", "dropout", "order")) + "}"))],
     ["grid", "1,000,000 trials", "--max-trials 1000000"]),
    ("a hundred million seeds", "study.run", lambda p: [study_file(p, STUDY), "--seeds", "100000000"],
     ["seeds", "100,000,000 trials", "--max-trials"]),
    ("table of a study named ..", "study.table", lambda p: ["..", "--results", str(p / "r")],
     ["'..'", "plain identifier"]),
    ("--fresh through a linked study folder", "study.run",
     lambda p: [study_file(p, STUDY), "--fresh", "--results", str(_linked(p, "bad"))],
     ["study directory", "symbolic link"]),
    # a linked ray folder is followed (a data disk), but what lies there under the study's name is no trial store
    ("--fresh through a linked ray folder", "study.run",
     lambda p: [study_file(p, STUDY), "--fresh", "--results", str(_linked(p, "ray"))],
     ["trial store", "did not write (study.json)"]),
]


# cases whose bad input is in the environment
ENVIRONMENT = {"unreachable RAY_ADDRESS": {"RAY_ADDRESS": "127.0.0.1:9"}}  # a leftover export in the user's shell


def _loop(tmp_path: Path) -> Path:
    """Two links that point at each other."""
    a, b = tmp_path / "loop-a", tmp_path / "loop-b"
    if not a.is_symlink():
        a.symlink_to(b)
        b.symlink_to(a)
    return a


def _alias_bomb() -> str:
    """Nine levels of ten aliases: a billion values in 400 bytes of YAML."""
    lines = ["bomb0: &b0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"bomb{i}: &b{i} [{', '.join([f'*b{i - 1}'] * 10)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


def _linked(tmp_path: Path, folder: str) -> Path:
    """A results directory whose ``folder`` is a link to a directory outside it that must survive."""
    outside = tmp_path / "outside"
    (outside / "bad").mkdir(parents=True)
    (outside / "bad" / "study.json").write_text('{"study": "bad", "status": "complete"}')
    (outside / "precious.txt").write_text("not the tool's")
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / folder).symlink_to(outside / "bad" if folder == "bad" else outside)
    return tmp_path / "r"


def _a_file(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("not a directory")
    return path


def _garbled_state(tmp_path: Path) -> Path:
    """A results directory whose study state is not JSON (a crash of another tool, a bad copy)."""
    (tmp_path / "r" / "bad").mkdir(parents=True)
    (tmp_path / "r" / "bad" / "study.json").write_bytes(b"\x00\x01 not json")
    return tmp_path / "r"


def _stored_results(tmp_path: Path) -> Path:
    """Tables and trial records without a trial store, as committed reference results are."""
    (tmp_path / "r" / "bad").mkdir(parents=True)
    (tmp_path / "r" / "bad" / "study.json").write_text('{"study": "bad", "status": "complete"}')
    (tmp_path / "r" / "bad" / "table.md").write_text("| Model | BLEU |\n")
    return tmp_path / "r"


def _unfinished_run(tmp_path: Path) -> Path:
    (tmp_path / "r" / "bad").mkdir(parents=True)
    (tmp_path / "r" / "bad" / "study.json").write_text('{"study": "bad", "status": "running"}')
    (tmp_path / "r" / "ray" / "bad").mkdir(parents=True)
    return tmp_path / "r"


def _main(module: str):
    if module == "study.run":
        from study.run import main
    elif module == "study.table":
        from study.table import main
    elif module == "nmt.train":
        from nmt.train import main
    else:
        from nmt.translate import main
    return main


@pytest.mark.parametrize("name, module, argv, expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, cache_dir, capsys, monkeypatch, name, module, argv,
                                                         expected):
    monkeypatch.chdir(tmp_path)  # default --results / --out land here, and must stay empty
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for key, value in ENVIRONMENT.get(name, {}).items():
        monkeypatch.setenv(key, value)
    args = argv(tmp_path)
    before = _listing(tmp_path)
    ray_starts = []
    monkeypatch.setattr("study.execution.ray_setup.start_ray", ray_starts.append)  # refused before Ray starts, or it would
    code = run_main(_main(module), args)
    captured = capsys.readouterr()
    assert code == 2, (name, captured.err, captured.out[-2000:])
    assert not ray_starts, f"{name}: Ray was started before the bad input was refused"
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    for text in expected:
        assert text in lines[0], (text, lines[0])
    created = _listing(tmp_path) - before
    leftovers = {p for p in created if not _harmless(p)}
    assert not leftovers, leftovers


@pytest.mark.parametrize("module, argv", [
    ("nmt.train", lambda p: TOO_LARGE_FOR_THE_LEXICON),
    ("study.run", lambda p: [study_file(p, STUDY), *TOO_LARGE_FOR_THE_LEXICON, "--dry-run"]),
    ("study.run", lambda p: [study_file(p, STUDY), *corpus(p, SENTENCES, GERMAN), "--set", "data.spm.vocab_size=5000"]),
], ids=["nmt.train synthetic", "study.run --dry-run synthetic", "study.run files"])
def test_a_too_large_vocabulary_is_refused_before_any_corpus_work(tmp_path, capsys, monkeypatch, module, argv):
    """Validation finds it: no synthetic corpus is generated and SentencePiece does not train."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("NMT_CACHE_DIR", str(tmp_path / "cache"))
    assert run_main(_main(module), argv(tmp_path)) == 2
    assert "data.spm.vocab_size" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()


def _listing(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")}


def _harmless(path: Path) -> bool:
    """An empty results directory made by the writability check is not a half-written result."""
    return path.parts[0] in ("results", "r") and len(path.parts) == 1


def test_bad_input_exits_2_as_a_process_and_debug_shows_the_traceback(tmp_path):
    plain = subprocess.run([sys.executable, "-m", "study.run", "ablation_srnm"], capture_output=True, text=True,
                           cwd=tmp_path, check=False, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert plain.returncode == 2 and plain.stderr.count("\n") == 1 and "Traceback" not in plain.stderr
    debug = subprocess.run([sys.executable, "-m", "study.run", "ablation_srnm", "--debug"], capture_output=True,
                           text=True, cwd=tmp_path, check=False, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert debug.returncode != 0 and "Traceback" in debug.stderr


@pytest.mark.parametrize("code, fix", [(errno.ENOSPC, "free some space"), (errno.EROFS, "make it writable")])
def test_a_file_system_that_refuses_a_write_is_one_line(capsys, code, fix):
    def main(argv):
        raise OSError(code, os.strerror(code), "/data/run/state.pt")

    assert run_main(main, []) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"error: cannot write /data/run/state.pt ({os.strerror(code)}); {fix} and run the command again"
    with pytest.raises(OSError):  # --debug shows the traceback
        run_main(main, ["--debug"])
