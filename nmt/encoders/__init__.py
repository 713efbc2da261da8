"""Encoders: embedded source (B, S, E) + mask -> states H (B, S, hidden)."""

from __future__ import annotations

from torch import nn

from nmt.config import ModelConfig
from nmt.encoders.recurrent import RecurrentEncoder


def make_encoder(cfg: ModelConfig) -> nn.Module:
    """The unit's own encoder where it has one, else the stacked recurrent encoder."""
    if cfg.unit.encoder is not None:
        return cfg.unit.encoder(cfg)
    return RecurrentEncoder(cfg)
