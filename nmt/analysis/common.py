"""What the analysis tools share: a trained run, its test text, teacher-forced
batches in input order, and writing figures and summaries."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from nmt.checkpoint import load_for_inference
from nmt.config import Config
from nmt.data.batching import Batch, make_batches
from nmt.data.corpus import read_parallel
from nmt.data.pipeline import load_data
from nmt.data.subword import SubwordVocab
from nmt.errors import UserError
from nmt.fileio import check_writable_dir
from nmt.measures import traced
from nmt.model import Seq2Seq


@dataclass
class Run:
    model: Seq2Seq
    cfg: Config
    src_vocab: SubwordVocab
    tgt_vocab: SubwordVocab
    directory: Path


def add_run_arguments(parser: argparse.ArgumentParser, text: bool = True) -> None:
    parser.add_argument("--checkpoint", type=Path, required=True,
                        help="a run directory of nmt.train (runs/NAME) or a study trial's checkpoint "
                             "(results/ray/STUDY/finished/KEY)")
    if text:
        parser.add_argument("--source", type=Path, help="source sentences (default: the run's data.test source)")
        parser.add_argument("--reference", type=Path, help="reference translations (default: the run's data.test target)")
        parser.add_argument("--limit", type=int, help="use only the first N sentences")
    parser.add_argument("--out", type=Path, required=True, help="directory for the PNG and the JSON summary")
    parser.add_argument("--threads", type=int, help="torch threads")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for bad input")


def load_run(path: Path, threads: int | None = None) -> Run:
    directory = path / "checkpoint" if (path / "checkpoint").is_dir() else path
    if not directory.is_dir():
        raise UserError(f"--checkpoint {path}: directory not found")
    if threads:
        torch.set_num_threads(threads)
    model, cfg, src_vocab, tgt_vocab = load_for_inference(directory)
    return Run(model, cfg, src_vocab, tgt_vocab, directory)


def evaluation_text(cfg: Config, source: Path | None, reference: Path | None, limit: int | None) -> list[tuple[str, str]]:
    """(source, reference) pairs: the given files, else the run's own test set."""
    if limit is not None and limit < 1:
        raise UserError(f"--limit {limit}: must be >= 1")
    if (source is None) != (reference is None):
        raise UserError("--source and --reference go together; give both, or neither for the run's test set")
    if source is not None:
        pairs = read_parallel(source, reference, "--source/--reference")
    elif cfg.data.test:
        missing = [p for p in cfg.data.test if not Path(p).is_file()]
        if missing:
            raise UserError(f"data.test of the run: {missing[0]} not found from here; run from the directory the "
                            "run was started in, or pass --source and --reference")
        pairs = read_parallel(cfg.data.test[0], cfg.data.test[1], "data.test")
    else:
        pairs = load_data(cfg.data, log=None).test_text
    return pairs[:limit] if limit else pairs


def teacher_forced_batches(run: Run, pairs: Sequence[tuple[str, str]], batch_tokens: int = 3000) -> Iterator[Batch]:
    """Batches of the encoded pairs (every pair, none dropped), each with its ``indices``."""
    examples = [(run.src_vocab.encode(s), run.tgt_vocab.encode(t)) for s, t in pairs]
    yield from make_batches(examples, batch_tokens, shuffle=False)


def traced_batches(run: Run, pairs: Sequence[tuple[str, str]], module: torch.nn.Module) -> Iterator[tuple[Batch, list]]:
    """Teacher-force every pair through the model with ``module.trace`` switched on (``nmt.measures.traced``);
    yields each batch with what the module recorded for it."""
    yield from traced(run.model, module, teacher_forced_batches(run, pairs))


def prepare_out(out: Path) -> Path:
    check_writable_dir(out, "--out")
    out.mkdir(parents=True, exist_ok=True)
    return out


def save_figure(fig, path: Path) -> Path:
    """The PNG and the same figure as PDF beside it, for a paper (no creation date: the same
    figure gives the same file)."""
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    fig.savefig(path.with_suffix(".pdf"), metadata={"CreationDate": None})
    return path


def write_summary(path: Path, summary: dict) -> Path:
    def clean(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    path.write_text(json.dumps(clean(summary), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
