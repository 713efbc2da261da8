"""Translate many sentences: length-sorted batches, original order restored, timed."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from nmt.config import DecodeConfig
from nmt.data.batching import make_source_batches
from nmt.data.subword import EOS, SubwordVocab
from nmt.model import Seq2Seq
from nmt.search import beam_search


@dataclass
class Translations:
    texts: list[str]  # detokenised, in input order
    seconds: float

    @property
    def words(self) -> int:
        return sum(len(text.split()) for text in self.texts)

    @property
    def words_per_second(self) -> float:
        return self.words / self.seconds if self.seconds > 0 else 0.0

    @property
    def seconds_per_sentence(self) -> float:
        return self.seconds / max(len(self.texts), 1)


def translate(model: Seq2Seq, sources: list[list[int]], tgt_vocab: SubwordVocab, decode: DecodeConfig,
              beam: int | None = None, device: torch.device | str = "cpu") -> Translations:
    """Decode encoded sources (subword ids, no EOS) with ``beam`` (default ``decode.beam``)."""
    beam = decode.beam if beam is None else beam
    was_training = model.training
    model.eval()
    outputs: list[list[int]] = [[] for _ in sources]
    start = time.perf_counter()
    for src, src_mask, indices in make_source_batches(sources, decode.batch_size):
        hypotheses = beam_search(model, src.to(device), src_mask.to(device), beam=beam,
                                 length_penalty=decode.length_penalty, max_len_ratio=decode.max_len_ratio)
        for index, hypothesis in zip(indices, hypotheses):
            outputs[index] = hypothesis
    seconds = time.perf_counter() - start
    model.train(was_training)
    texts = [tgt_vocab.decode([t for t in ids if t != EOS]) for ids in outputs]
    return Translations(texts, seconds)
