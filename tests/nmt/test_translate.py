"""nmt.translate as a command: one output line per input line, long lines cut with a warning,
and every bad input one line with exit status 2."""

from __future__ import annotations

import io
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import TINY

from nmt.cli import run_main
from nmt.translate import main


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, cache_dir, tiny_data) -> Path:
    from nmt.config import load_config
    from nmt.trainer import Trainer

    out = tmp_path_factory.mktemp("translate-run")
    cfg = load_config(None, TINY + [f"data.cache_dir={cache_dir}"])
    Trainer(cfg, out, log=lambda _: None, data=tiny_data).fit()
    return out / "checkpoint"


def translate(monkeypatch, capsys, checkpoint: Path, data: bytes, *args: str) -> tuple[int, list[str], str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    code = run_main(main, ["--checkpoint", str(checkpoint), "--beam", "1", *args])
    captured = capsys.readouterr()
    return code, captured.out.split("\n")[:-1], captured.err


def test_only_newline_ends_a_line(monkeypatch, capsys, checkpoint):
    breaks = ["\f", "\r", "\v", "\x1c", "\x85", "\u2028", "\u2029"]
    lines = [f"die katze{b}sieht das haus" for b in breaks] + ["ein hund\r", ""]  # CRLF line end, an empty line
    code, out, _ = translate(monkeypatch, capsys, checkpoint, "\n".join(lines).encode() + b"\n")
    assert code == 0 and len(out) == len(lines)
    code, expected, _ = translate(monkeypatch, capsys, checkpoint, b"die katze sieht das haus\nein hund\n\n")
    assert out == [expected[0]] * len(breaks) + expected[1:]  # each break read as a space


def test_a_very_long_line_is_cut_with_a_warning(monkeypatch, capsys, checkpoint):
    code, out, err = translate(monkeypatch, capsys, checkpoint, b"kurz\n" + b"die katze " * 5000 + b"\nkurz\n",
                               "--max-len", "40")
    assert code == 0 and len(out) == 3 and out[0] == out[2]
    assert "warning: 1 line(s) longer than 40 subwords were cut to their first 40 (line 2); --max-len" in err


def weights_for_another_model(checkpoint: Path) -> Path:
    config = checkpoint / "config.yaml"
    tree = yaml.safe_load(config.read_text())
    tree["model"]["hidden"] = 32
    config.write_text(yaml.safe_dump(tree))
    return checkpoint


def no_model_in_the_file(checkpoint: Path) -> Path:
    for name in ("best.pt", "state.pt"):
        torch.save({"epoch": 1}, checkpoint / name)
    return checkpoint


def subwords_of_another_run(checkpoint: Path) -> Path:
    """src.model replaced by a smaller subword model (a damaged copy, or another run's)."""
    import sentencepiece

    text = checkpoint.parent / "text.txt"
    text.write_text("".join(f"die katze sieht das haus {n} mal und der hund nicht\n" for n in range(200)))
    sentencepiece.SentencePieceTrainer.train(input=str(text), model_prefix=str(checkpoint.parent / "other"),
                                             vocab_size=40, model_type="bpe", minloglevel=2,
                                             pad_id=0, unk_id=1, bos_id=2, eos_id=3)
    shutil.copy(checkpoint.parent / "other.model", checkpoint / "src.model")
    return checkpoint


@pytest.mark.parametrize("damage, data, args, expected", [
    (weights_for_another_model, b"hallo\n", [], ["best.pt", "do not fit", "config.yaml"]),
    (no_model_in_the_file, b"hallo\n", [], ["best.pt", "holds no model weights"]),
    (None, b"gut\n\xff\xfe kaputt\n", [], ["stdin: line 2 is not valid UTF-8", "0xff"]),
    (None, b"hallo\n", ["--threads", "-1"], ["--threads -1", ">= 1"]),
    (None, b"hallo\n", ["--max-len", "0"], ["--max-len 0", ">= 1"]),
    (None, b"hallo\n", ["--output", "{tmp}/missing/out.txt"], ["--output", "missing", "does not exist"]),
    (None, b"hallo\n", ["--output", "{tmp}"], ["--output", "is a directory"]),
    (None, b"hallo\n", ["--beam", "100000000"], ["--beam 100000000", "at most 1000"]),
    (None, b"hallo\n", ["--length-penalty", "nan"], ["--length-penalty nan", "from 0 to 10"]),
    (subwords_of_another_run, b"hallo\n", [], ["src.model: holds 40 subwords", "damaged or from another run"]),
], ids=["config and weights differ", "no model in the file", "undecodable stdin", "threads -1", "max-len 0",
        "output in a missing folder", "output is a folder", "a huge beam", "a length penalty that is no number",
        "subword model of another run"])
def test_bad_input_is_one_line(tmp_path, monkeypatch, capsys, checkpoint, damage, data, args, expected):
    if damage is not None:
        checkpoint = damage(Path(shutil.copytree(checkpoint, tmp_path / "checkpoint")))
    code, out, err = translate(monkeypatch, capsys, checkpoint, data, *(a.format(tmp=tmp_path) for a in args))
    assert code == 2 and not out, err
    (line,) = err.strip().splitlines()
    assert line.startswith("error: ") and all(text in line for text in expected), line
    assert not (tmp_path / "missing").exists()


def test_output_is_never_a_link_a_fifo_or_a_device_replaced_by_a_file(tmp_path, monkeypatch, capsys, checkpoint):
    canary = tmp_path / "canary.txt"
    canary.write_text("keep me")
    link = tmp_path / "link.txt"
    link.symlink_to(canary)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target, kind in ((link, "is a symbolic link"), (fifo, "not a regular file"), (Path("/dev/null"), "not a regular file")):
        code, out, err = translate(monkeypatch, capsys, checkpoint, b"hallo\n", "--output", str(target))
        (line,) = err.strip().splitlines()
        assert code == 2 and not out and f"--output {target}: " in line and kind in line, line
    assert link.is_symlink() and canary.read_text() == "keep me" and stat.S_ISFIFO(fifo.lstat().st_mode)
    assert stat.S_ISCHR(Path("/dev/null").lstat().st_mode)
