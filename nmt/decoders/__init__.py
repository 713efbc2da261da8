"""Decoders: the per-step recurrent decoder, and the units' own (``Unit.decoder``)."""

from __future__ import annotations

from nmt.config import ModelConfig
from nmt.decoders.base import Decoder, DecoderState, Memory
from nmt.decoders.recurrent import RecurrentDecoder

__all__ = ["Decoder", "DecoderState", "Memory", "make_decoder"]


def make_decoder(cfg: ModelConfig, memory_size: int) -> Decoder:
    """The unit's own decoder where it has one, else the step-by-step recurrent decoder."""
    if cfg.unit.decoder is not None:
        return cfg.unit.decoder(cfg, memory_size)
    return RecurrentDecoder(cfg, memory_size)
