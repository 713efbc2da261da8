"""SentencePiece subword vocabularies, trained on the training side and cached.

Special ids are fixed for every model: ``PAD=0, UNK=1, BOS=2, EOS=3``.

Caching: a model is stored as ``<cache_dir>/<type><size>-<hash>.model`` where
the hash is the sha256 of a format version, the SentencePiece version, every
``data.spm`` setting, the fixed trainer options below, and the exact training
text (the lines SentencePiece sees). The same data and settings never retrain;
any change trains a new model next to the old ones. Models are written to a
temporary file in the cache directory and ``os.replace``-d into place, so a
concurrent reader never sees a half-written file; where ``fcntl`` exists a
lock file also keeps two processes from training the same model twice.

Over-long lines: SentencePiece skips training lines longer than
``max_sentence_length`` bytes (4192 by default) with a message on stderr. We
drop such lines from the *SentencePiece training text* ourselves and log one
warning with their count; they still reach the pipeline, which encodes them
(encoding has no length limit) and then drops them by ``data.max_len``.

Vocabulary size: ``hard_vocab_limit`` stays on, so a vocabulary larger than
the corpus supports is an explicit ``DataError`` that says the largest size
the corpus allows, rather than a silently smaller vocabulary. That exact limit
is known only once SentencePiece has trained; ``piece_bound`` gives an upper
bound beforehand, which config validation uses to refuse vocabularies no
training could reach.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import sentencepiece as spm_lib

from nmt.config import SpmConfig
from nmt.errors import DataError
from nmt.fileio import write_bytes

__all__ = ["PAD", "UNK", "BOS", "EOS", "SPECIALS", "SubwordVocab", "train_subwords", "piece_bound",
           "FORMAT_VERSION"]

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = frozenset((PAD, UNK, BOS, EOS))
FORMAT_VERSION = 1
MAX_SENTENCE_BYTES = 4192  # SentencePiece's default max_sentence_length
INPUT_SENTENCE_SIZE = 2_000_000  # larger corpora: SentencePiece samples this many lines (seeded)
SAMPLE_SEED = 1

# Trainer options that are the same for every model (part of the cache key).
_FIXED_OPTIONS = dict(
    pad_id=PAD, unk_id=UNK, bos_id=BOS, eos_id=EOS,
    pad_piece="<pad>", unk_piece="<unk>", bos_piece="<s>", eos_piece="</s>",
    max_sentence_length=MAX_SENTENCE_BYTES,
    input_sentence_size=INPUT_SENTENCE_SIZE,
    shuffle_input_sentence=True,
    hard_vocab_limit=True,
    normalization_rule_name="nmt_nfkc",
)


class SubwordVocab:
    """A trained SentencePiece model with the fixed special ids."""

    pad = PAD
    unk = UNK
    bos = BOS
    eos = EOS

    def __init__(self, path: str | os.PathLike, *, model_proto: bytes | None = None):
        self.path = Path(path)
        try:
            if model_proto is not None:
                self._sp = spm_lib.SentencePieceProcessor(model_proto=model_proto)
            else:
                self._sp = spm_lib.SentencePieceProcessor(model_file=str(self.path))
        except (OSError, RuntimeError) as err:
            raise DataError(f"{self.path}: not a readable SentencePiece model ({_one_line(err)}); "
                            f"delete it so that it is retrained") from None
        ids = (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id())
        if ids != (PAD, UNK, BOS, EOS):
            raise DataError(f"{self.path}: special ids pad/unk/bos/eos are {ids}, expected {(PAD, UNK, BOS, EOS)}; "
                            f"use a model trained by nmt.data.subword.train_subwords")

    def __len__(self) -> int:
        return self._sp.get_piece_size()

    def __repr__(self) -> str:
        return f"SubwordVocab({str(self.path)!r}, size={len(self)})"

    def encode(self, text: str) -> list[int]:
        """Subword ids of one sentence (no BOS/EOS)."""
        return self._sp.encode(text, out_type=int)

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        """Subword ids of many sentences at once (multi-threaded inside SentencePiece)."""
        if not texts:
            return []
        return self._sp.encode(list(texts), out_type=int)

    def decode(self, ids: Iterable[int]) -> str:
        """Detokenised text; PAD, BOS and EOS are skipped wherever they are (UNK shows as ' ⁇ ')."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        return self._sp.decode([int(i) for i in ids if i not in (PAD, BOS, EOS)])

    def piece(self, index: int) -> str:
        """The surface piece of one id (e.g. '▁Haus')."""
        return self._sp.id_to_piece(int(index))

    # Picklable without the model file (Ray ships objects between processes and nodes).
    def __getstate__(self) -> dict:
        return {"path": str(self.path), "proto": self._sp.serialized_model_proto()}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], model_proto=state["proto"])


def train_subwords(train_pairs: Sequence[tuple[str, str]], spm: SpmConfig, cache_dir: str | os.PathLike,
                   log: Callable[[str], None] | None = print) -> tuple[SubwordVocab, SubwordVocab]:
    """Train (or load from the cache) the source and target subword models.

    Returns ``(src_vocab, tgt_vocab)``; the same object twice when ``spm.joint``.
    ``cache_dir`` is the directory the ``.model`` files live in.
    """
    log = log or (lambda _msg: None)
    cache_dir = Path(cache_dir)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DataError(f"{cache_dir}: cannot create the SentencePiece cache directory ({_one_line(err)}); "
                        f"set data.cache_dir or NMT_CACHE_DIR to a writable directory") from None
    n = len(train_pairs)
    if spm.joint:
        lines = [s for s, _ in train_pairs] + [t for _, t in train_pairs]
        vocab = _train_or_load(lines, spm, cache_dir, "joint", f"{n} pairs", log)
        return vocab, vocab
    src = _train_or_load([s for s, _ in train_pairs], spm, cache_dir, "source", f"{n} source lines", log)
    tgt = _train_or_load([t for _, t in train_pairs], spm, cache_dir, "target", f"{n} target lines", log)
    return src, tgt


def _train_or_load(lines: list[str], spm: SpmConfig, cache_dir: Path, side: str, what: str,
                   log: Callable[[str], None]) -> SubwordVocab:
    lines = [line for line in lines if line]  # blank lines carry nothing
    too_long = sum(1 for line in lines if len(line.encode("utf-8")) > MAX_SENTENCE_BYTES)
    if too_long:
        lines = [line for line in lines if len(line.encode("utf-8")) <= MAX_SENTENCE_BYTES]
        log(f"data: warning: {too_long} {side} training line(s) longer than {MAX_SENTENCE_BYTES} bytes "
            f"left out of SentencePiece training (the length filter data.max_len drops them from training too)")
    if not lines:
        raise DataError(f"data.train: no usable {side} training text for SentencePiece "
                        f"(all lines blank or longer than {MAX_SENTENCE_BYTES} bytes); check data.train")
    settings = {
        "format": FORMAT_VERSION,
        "sentencepiece": getattr(spm_lib, "__version__", "?"),
        "model_type": spm.model_type,
        "vocab_size": spm.vocab_size,
        "joint": spm.joint,
        "character_coverage": spm.character_coverage,
        "fixed": _FIXED_OPTIONS,
        "sample_seed": SAMPLE_SEED,
    }
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode("utf-8"))
    digest.update(b"\0")
    for line in lines:
        digest.update(line.encode("utf-8"))
        digest.update(b"\n")
    name = f"{spm.model_type}{spm.vocab_size}-{digest.hexdigest()[:32]}"
    path = cache_dir / f"{name}.model"
    label = f"SentencePiece {spm.model_type} {spm.vocab_size}" + (" joint" if side == "joint" else f" {side}")

    vocab = _load_cached(path)
    if vocab is not None:
        log(f"data: {label} from cache {path}")
        return vocab
    with _lock(cache_dir / f"{name}.lock"):
        vocab = _load_cached(path)  # another process may have trained it while we waited
        if vocab is not None:
            log(f"data: {label} from cache {path}")
            return vocab
        log(f"data: training {label} on {what} ...")
        proto = _train(lines, spm, side)
        write_bytes(path, proto)
    return SubwordVocab(path)


def _load_cached(path: Path) -> SubwordVocab | None:
    if not path.is_file():
        return None
    try:
        return SubwordVocab(path)
    except DataError:
        return None  # corrupt (e.g. disk full when it was written): retrain and replace


def _train(lines: list[str], spm: SpmConfig, side: str) -> bytes:
    writer = io.BytesIO()
    if len(lines) > INPUT_SENTENCE_SIZE:
        spm_lib.set_random_generator_seed(SAMPLE_SEED)  # the line sample is reproducible
    try:
        spm_lib.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=writer,
            model_type=spm.model_type,
            vocab_size=spm.vocab_size,
            character_coverage=spm.character_coverage,
            num_threads=max(1, min(8, os.cpu_count() or 1)),
            minloglevel=2,  # SentencePiece logs a lot to stderr; errors still raise
            **_FIXED_OPTIONS,
        )
    except RuntimeError as err:
        raise _training_error(err, spm, side) from None
    return writer.getvalue()


def _training_error(err: Exception, spm: SpmConfig, side: str) -> DataError:
    text = _one_line(err)
    where = "this corpus" if side == "joint" else f"the {side} side of this corpus"
    m = re.search(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)", text)
    if m:
        return DataError(f"data.spm.vocab_size = {spm.vocab_size} is larger than {where} allows "
                         f"(at most {m.group(2)}); lower it (--set data.spm.vocab_size={m.group(2)})")
    m = re.search(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)", text)
    if m:
        return DataError(f"data.spm.vocab_size = {spm.vocab_size} is smaller than the distinct characters plus "
                         f"4 special tokens of {where} ({m.group(2)}); raise data.spm.vocab_size or lower "
                         f"data.spm.character_coverage")
    detail = text.split("] ", 1)[-1] if "] " in text else text
    return DataError(f"data.spm: SentencePiece training failed on {where} ({detail}); "
                     f"check data.train and the data.spm settings")


# ---------------------------------------------------------------------------
# the largest vocabulary a text allows, bounded without training

MAX_PIECE_CHARS = 16  # SentencePiece's max_sentencepiece_length (its default; _FIXED_OPTIONS keeps it)
WORD_START = "\u2581"  # '▁': SentencePiece's mark of a word start (it replaces the spaces)


def piece_bound(lines: Iterable[str], enough: int | None = None) -> int:
    """At most how many pieces a SentencePiece vocabulary trained on ``lines`` can hold.

    Both trainers make only pieces that lie inside one word as the trainer sees it (normalised, '▁' in
    front) and are at most MAX_PIECE_CHARS long; every character is a piece, and the special symbols come on
    top. So specials + distinct characters + distinct longer substrings of the words is an upper bound. It is
    reached when every word has two letters; on real text SentencePiece makes fewer (BPE about a quarter of
    it, unigram a twentieth), so a vocabulary within the bound can still be refused, with the exact limit,
    when SentencePiece trains. Splits between scripts (a word and its full stop) are not applied: it stays
    an upper bound. Counting stops once ``enough`` pieces are found: the caller only asks whether a
    vocabulary fits.
    """
    normalizer = spm_lib.SentencePieceNormalizer(rule_name=_FIXED_OPTIONS["normalization_rule_name"])
    chars: set[str] = set()
    longer: set[str] = set()
    for line in lines:
        text = normalizer.normalize(line)  # the trainer's text: NFKC, spaces as '▁' before every word
        chars.update(text)
        for word in filter(None, text.split(WORD_START)):
            word = WORD_START + word
            for start in range(len(word) - 1):
                longer.update(word[start:end] for end in range(start + 2, min(len(word), start + MAX_PIECE_CHARS) + 1))
        if enough is not None and len(SPECIALS) + len(chars) + len(longer) >= enough:
            break
    return len(SPECIALS) + len(chars) + len(longer)


@contextlib.contextmanager
def _lock(path: Path):
    """An exclusive inter-process lock where the platform has one; a no-op elsewhere."""
    try:
        import fcntl  # POSIX only: a module that is missing on Windows
    except ImportError:  # Windows: the atomic replace alone keeps readers safe
        yield
        return
    try:
        fh = open(path, "a+b")
    except OSError:
        yield  # read-only or odd filesystem: go without the lock
        return
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        fh.close()  # closing releases the lock


def _one_line(err: Exception) -> str:
    return " ".join(str(err).split()) or type(err).__name__
