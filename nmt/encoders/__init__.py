"""Encoders: embedded source (B, S, E) + mask -> states H (B, S, hidden)."""

from __future__ import annotations

from torch import nn

from nmt.config import ModelConfig
from nmt.encoders.fsmn import FSMNEncoder
from nmt.encoders.recurrent import RecurrentEncoder


def make_encoder(cfg: ModelConfig) -> nn.Module:
    if cfg.cell == "fsmn":
        return FSMNEncoder(cfg)
    return RecurrentEncoder(cfg)
