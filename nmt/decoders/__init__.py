"""Decoders: the per-step recurrent decoder, the SR-NMT decoder and the FSMN decoder."""

from __future__ import annotations

from nmt.config import ModelConfig
from nmt.decoders.base import Decoder, DecoderState, Memory
from nmt.decoders.fsmn import FSMNDecoder
from nmt.decoders.recurrent import RecurrentDecoder
from nmt.decoders.srnmt import SRNMTDecoder

__all__ = ["Decoder", "DecoderState", "Memory", "make_decoder"]


def make_decoder(cfg: ModelConfig, memory_size: int) -> Decoder:
    if cfg.cell == "srnmt":
        return SRNMTDecoder(cfg, memory_size)
    if cfg.cell == "fsmn":
        return FSMNDecoder(cfg, memory_size)
    return RecurrentDecoder(cfg, memory_size)
