"""Checkpoint directories: everything needed to resume training or translate.

Layout of ``<run>/checkpoint/``::

    state.pt      model, optimiser, trainer counters and RNG states (resume)
    best.pt       the model (and optimiser) of the best validation epoch
    config.yaml   the resolved config that rebuilds the model
    src.model     SentencePiece model(s); tgt.model too when vocabularies are separate

Files are written to a temporary name and renamed into place, so a crash
never leaves a half-written checkpoint; they are read with
``torch.load(weights_only=True)``, which cannot execute code from a file.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from nmt.config import Config, config_from_dict, dump_config
from nmt.typed_config import read_yaml
from nmt.data.subword import SubwordVocab
from nmt.errors import UserError
from nmt.fileio import atomic_write
from nmt.model import Seq2Seq, build_model
from nmt.run_dir import BEST, CONFIG, SRC_SPM, STATE, TGT_SPM


class CheckpointError(UserError):
    """A checkpoint directory is missing, incomplete or unreadable."""


def atomic_save(obj: Any, path: Path) -> None:
    atomic_write(path, lambda tmp: torch.save(obj, tmp))


def atomic_copy(src: Path, dst: Path) -> None:
    atomic_write(dst, lambda tmp: shutil.copyfile(src, tmp))


def load_file(path: Path) -> dict:
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found; pass the run's checkpoint directory")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated or foreign files raise many different errors
        raise CheckpointError(f"{path}: unreadable checkpoint ({type(err).__name__}); it is truncated or not "
                              "a checkpoint of this tool") from None


def write_static_files(directory: Path, cfg: Config, src_vocab: SubwordVocab, tgt_vocab: SubwordVocab) -> None:
    """Config and subword models: written once per run."""
    directory.mkdir(parents=True, exist_ok=True)
    dump_config(cfg, directory / CONFIG)
    atomic_copy(Path(src_vocab.path), directory / SRC_SPM)
    if tgt_vocab is not src_vocab:
        atomic_copy(Path(tgt_vocab.path), directory / TGT_SPM)


def read_config(directory: Path) -> Config:
    path = directory / CONFIG
    if not path.is_file():
        raise CheckpointError(f"{directory}: no {CONFIG} here; pass a run's checkpoint directory "
                              "(e.g. runs/x/checkpoint)")
    return config_from_dict(read_yaml(path), source=str(path))


def load_vocabs(directory: Path) -> tuple[SubwordVocab, SubwordVocab]:
    if not (directory / SRC_SPM).is_file():
        raise CheckpointError(f"{directory}: no {SRC_SPM} here; the checkpoint is incomplete")
    src = SubwordVocab(directory / SRC_SPM)
    tgt = SubwordVocab(directory / TGT_SPM) if (directory / TGT_SPM).is_file() else src
    return src, tgt


def load_for_inference(directory: str | Path, device: str = "cpu") -> tuple[Seq2Seq, Config, SubwordVocab, SubwordVocab]:
    """The best model of a run (or its last state if no best was saved), in eval mode."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: checkpoint directory not found")
    cfg = read_config(directory)
    src_vocab, tgt_vocab = load_vocabs(directory)
    path = directory / BEST if (directory / BEST).is_file() else directory / STATE
    saved = load_file(path)
    if not isinstance(saved, dict) or not isinstance(saved.get("model"), dict):
        raise CheckpointError(f"{path}: holds no model weights; pass a checkpoint directory written by nmt.train")
    for name, vocab, file in (("src_embed.weight", src_vocab, SRC_SPM), ("tgt_embed.weight", tgt_vocab, TGT_SPM)):
        weights = saved["model"].get(name)
        if weights is not None and weights.shape[0] != len(vocab):  # a damaged or foreign subword model, not the weights
            shown = file if (directory / file).is_file() else SRC_SPM
            raise CheckpointError(f"{directory / shown}: holds {len(vocab)} subwords, but {path.name} was trained with "
                                  f"{weights.shape[0]}; the subword model is damaged or from another run (copy the "
                                  f"run's checkpoint directory again)")
    model = build_model(cfg.model, len(src_vocab), len(tgt_vocab))
    try:
        model.load_state_dict(saved["model"])
    except RuntimeError as err:  # missing, unexpected or differently shaped tensors
        first = " ".join(str(err).split())[:200]
        raise CheckpointError(f"{path}: the weights do not fit the model that {directory / CONFIG} describes "
                              f"({first}); keep the config.yaml saved with these weights") from None
    return model.to(device).eval(), cfg, src_vocab, tgt_vocab
