"""Data pipeline: parallel text -> SentencePiece subwords -> token-bucketed batches.

``load_data(cfg.data)`` is the one call most callers need; ``make_batches``
turns its encoded pairs into padded tensors.
"""

from nmt.data.batching import Batch, make_batches, make_source_batches
from nmt.data.corpus import read_parallel
from nmt.data.pipeline import ParallelData, load_data, resolve_cache_dir
from nmt.data.subword import BOS, EOS, PAD, UNK, SubwordVocab, train_subwords

__all__ = [
    "BOS", "EOS", "PAD", "UNK",
    "Batch", "ParallelData", "SubwordVocab",
    "load_data", "make_batches", "make_source_batches", "read_parallel", "resolve_cache_dir", "train_subwords",
]
