"""From a ``DataConfig`` to encoded, length-filtered parallel data in one call.

``load_data(cfg)``:

1. resolves the cache directory (``data.cache_dir``, else ``$NMT_CACHE_DIR``,
   else ``~/.cache/rnmt``) and checks that it is writable;
2. reads the corpus: the synthetic preset is generated once per
   (seed, sizes) into ``<cache>/synthetic/seed{seed}-{size}-{valid}-{test}/``
   (atomically, with a manifest; regenerated if the generator's code changed)
   and read back like any file corpus; otherwise ``data.train/valid/test``
   are read with ``read_parallel`` (``data.limit`` keeps the first N training
   pairs of a file corpus);
3. trains or loads the SentencePiece model(s) from ``<cache>/spm/``;
4. encodes everything; training pairs with an empty side or more than
   ``data.max_len`` subwords on either side (BOS/EOS not counted) are dropped;
   valid and test are kept whole, every line is evaluated.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nmt.config import DataConfig
from nmt.data.corpus import MAX_LINE_CHARS, read_parallel, stream_lines
from nmt.data.subword import SubwordVocab, piece_bound, train_subwords
from nmt.data import synthetic
from nmt.errors import ConfigError, DataError

__all__ = ["ParallelData", "check_vocabulary_size", "load_data", "resolve_cache_dir", "vocabulary_bound"]

Pairs = list[tuple[list[int], list[int]]]
_MANIFEST = "manifest.json"
_SPLITS = ("train", "valid", "test")


@dataclass
class ParallelData:
    src_vocab: SubwordVocab
    tgt_vocab: SubwordVocab
    train: Pairs  # encoded, length-filtered, no empty side
    valid: Pairs  # encoded, every line
    test: Pairs
    valid_text: list[tuple[str, str]]  # raw (source, reference) strings for BLEU
    test_text: list[tuple[str, str]]
    stats: dict = field(default_factory=dict)

    @property
    def joint(self) -> bool:
        return self.src_vocab is self.tgt_vocab


def resolve_cache_dir(cfg: DataConfig) -> Path:
    """The cache directory, created and checked for writability."""
    if cfg.cache_dir:
        path, origin = Path(cfg.cache_dir).expanduser(), f"data.cache_dir = {cfg.cache_dir}"
    elif os.environ.get("NMT_CACHE_DIR"):
        path, origin = Path(os.environ["NMT_CACHE_DIR"]).expanduser(), f"NMT_CACHE_DIR={os.environ['NMT_CACHE_DIR']}"
    else:
        path, origin = Path("~/.cache/rnmt").expanduser(), "the default cache directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-"):
            pass
    except OSError as err:
        why = err.strerror or " ".join(str(err).split())
        raise DataError(f"{path} ({origin}): cannot be used as cache directory ({why}); "
                        f"set data.cache_dir or NMT_CACHE_DIR to a writable directory") from None
    return path


def load_data(cfg: DataConfig, log: Callable[[str], None] | None = print) -> ParallelData:
    """The corpus of ``cfg`` read, its subword model(s) trained or loaded, everything encoded and the
    training pairs length-filtered (steps 1-4 of this module's docstring)."""
    log = log or (lambda _msg: None)
    start = time.perf_counter()
    cache = resolve_cache_dir(cfg)
    files, source = _corpus_files(cfg, cache, log)
    limit = cfg.limit if cfg.preset is None else None  # data.limit cuts a file corpus only
    train_text = read_parallel(*files["train"], key="data.train", limit=limit)
    valid_text = read_parallel(*files["valid"], key="data.valid")
    test_text = read_parallel(*files["test"], key="data.test")

    src_vocab, tgt_vocab = train_subwords(train_text, cfg.spm, cache / "spm", log=log)

    train, too_long, empty = _training_pairs(train_text, src_vocab, tgt_vocab, cfg.max_len)
    valid = _encode_pairs(valid_text, src_vocab, tgt_vocab)
    test = _encode_pairs(test_text, src_vocab, tgt_vocab)

    dropped = []
    if too_long:
        dropped.append(f"{too_long} longer than {cfg.max_len} subwords")
    if empty:
        dropped.append(f"{empty} with an empty side")
    note = f" ({', '.join(dropped)} dropped)" if dropped else ""
    log(f"data: {len(train)} train pairs{note}, {len(valid)} valid, {len(test)} test; "
        f"vocab {len(src_vocab)}" + ("" if src_vocab is tgt_vocab else f"/{len(tgt_vocab)}"))
    stats = {
        "source": source,
        "train_pairs": len(train),
        "train_read": len(train_text),
        "train_dropped": too_long + empty,
        "train_dropped_long": too_long,
        "train_dropped_empty": empty,
        "valid_pairs": len(valid),
        "test_pairs": len(test),
        "src_vocab": len(src_vocab),
        "tgt_vocab": len(tgt_vocab),
        "joint_vocab": src_vocab is tgt_vocab,
        "spm_models": sorted({str(src_vocab.path), str(tgt_vocab.path)}),
        "train_src_tokens": sum(len(s) for s, _ in train),
        "train_tgt_tokens": sum(len(t) for _, t in train),
        "cache_dir": str(cache),
        "seconds": round(time.perf_counter() - start, 3),
    }
    if limit is not None:
        stats["limit"] = limit
    return ParallelData(src_vocab, tgt_vocab, train, valid, test, valid_text, test_text, stats)


def _corpus_files(cfg: DataConfig, cache: Path, log: Callable[[str], None]) -> tuple[dict, str]:
    """({split: (source file, target file)}, the corpus's description in the stats): the synthetic
    preset's files (generated into the cache the first time), or ``data.train/valid/test``."""
    if cfg.preset == "synthetic":
        return _synthetic_corpus(cfg, cache, log), f"synthetic seed={cfg.seed} size={cfg.size}"
    if cfg.preset is not None:
        raise DataError(f"data.preset = {cfg.preset!r} is not known; use synthetic, or leave it out and give data.train/valid/test")
    files = {}
    for split in _SPLITS:
        paths = getattr(cfg, split)
        if not paths or len(paths) != 2:
            raise DataError(f"data.{split} = {paths!r}: give [SOURCE_FILE, TARGET_FILE] or use data.preset: synthetic")
        files[split] = (Path(paths[0]).expanduser(), Path(paths[1]).expanduser())
    return files, "; ".join(f"{split}: {files[split][0]} {files[split][1]}" for split in _SPLITS)


def _training_pairs(train_text: list[tuple[str, str]], src_vocab: SubwordVocab, tgt_vocab: SubwordVocab,
                    max_len: int) -> tuple[Pairs, int, int]:
    """(the encoded training pairs kept, how many were longer than ``max_len`` subwords on either side,
    how many had an empty side); no pair left is an error."""
    train_src = src_vocab.encode_many([s for s, _ in train_text])
    train_tgt = tgt_vocab.encode_many([t for _, t in train_text])
    train: Pairs = []
    too_long = empty = 0
    for s, t in zip(train_src, train_tgt):
        if not s or not t:
            empty += 1
        elif len(s) > max_len or len(t) > max_len:
            too_long += 1
        else:
            train.append((s, t))
    if not train:
        raise DataError(f"data.train: no training pairs left after dropping {too_long} longer than data.max_len = "
                        f"{max_len} subwords and {empty} with an empty side; raise data.max_len or check data.train")
    return train, too_long, empty


def vocabulary_bound(cfg: DataConfig) -> tuple[int, str] | None:
    """(at most how many subword pieces the training text allows, what that text is), for the side that
    allows fewer when the vocabularies are separate; None when the training files cannot be read
    (``load_data`` says why).

    ``check_vocabulary_size`` calls it, so that a ``data.spm.vocab_size`` no training could reach is refused
    before any corpus work: the synthetic bound comes from every word its lexicon can write (no sentence is
    drawn). A file corpus cannot be bounded without reading it, so its training files are scanned, but only
    until ``vocab_size`` pieces are found (a few lines when the vocabulary fits); a scan that finds too few
    has read the files whole, and then reads them once more as ``load_data`` does, so that a broken corpus
    (empty, misaligned, ...) is reported as such rather than as a vocabulary problem. See ``piece_bound``:
    the bound is an upper one, SentencePiece's exact limit comes when it trains.
    """
    enough = cfg.spm.vocab_size
    found = []
    for side in ("joint",) if cfg.spm.joint else ("source", "target"):
        if cfg.preset == "synthetic":
            bound = _synthetic_bound(cfg.seed, cfg.lexicon, side, enough)
            text = f"the synthetic corpus (seed {cfg.seed}, lexicon {cfg.lexicon:g})"
        else:
            paths = tuple(str(Path(p).expanduser()) for p in cfg.train)
            try:
                stamps = tuple((os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in paths)
            except OSError:
                return None
            bound = _file_bound(paths, stamps, cfg.limit, side, enough)
            if bound is not None and bound < enough:
                read_parallel(*paths, key="data.train", limit=cfg.limit)  # raises on a broken corpus
            text = f"data.train ({', '.join(paths)}" + (f", first {cfg.limit} pairs)" if cfg.limit else ")")
        if bound is None:
            return None
        found.append((bound, text if side == "joint" else f"the {side} side of {text}"))
    return min(found)


def check_vocabulary_size(d: DataConfig, source: str) -> None:
    """Refuse a vocabulary larger than any SentencePiece training on this corpus could make, before
    the corpus is generated and SentencePiece trains. Called where a corpus is about to be used (a
    new training run or study), not by ``validate``: a stored config (a checkpoint, a finished study)
    stays readable when its training files have moved or changed. The bound is an upper one:
    SentencePiece itself says the exact limit, which can be lower, when it trains. (It lives here, next to
    ``vocabulary_bound``, and not in ``nmt.config``: the data pipeline builds on the config, not the
    other way round.)"""
    found = vocabulary_bound(d)
    if found is not None and found[0] < d.spm.vocab_size:
        most, text = found
        raise ConfigError(f"{source}: data.spm.vocab_size = {d.spm.vocab_size}: {text} has at most {most} distinct "
                          f"subword pieces (special symbols included); lower it to {most} or less (--set "
                          f"data.spm.vocab_size=N); SentencePiece reports its exact limit, usually far lower, when "
                          f"it trains")


# Cached: validation runs for every trial config of a study, with the same data.
@functools.lru_cache(maxsize=64)
def _synthetic_bound(seed: int, lexicon: float, side: str, enough: int) -> int:
    forms = synthetic.word_forms(seed, lexicon)
    return piece_bound(forms["source"] | forms["target"] if side == "joint" else forms[side], enough)


@functools.lru_cache(maxsize=64)
def _file_bound(paths: tuple[str, str], stamps: tuple, limit: int | None, side: str, enough: int) -> int | None:
    """``stamps`` (size, modification time of each file) make a changed file count again."""
    chosen = paths if side == "joint" else paths[:1] if side == "source" else paths[1:]

    def lines():
        for path in chosen:
            for line in stream_lines(path, limit):
                if len(line) > MAX_LINE_CHARS:  # no sentence; read_lines refuses the file
                    raise ValueError(f"{path}: a line of {len(line)} characters")
                yield line

    try:
        return piece_bound(lines(), enough)
    except (OSError, EOFError, ValueError, zlib.error):  # ValueError: also not UTF-8
        return None


def _encode_pairs(pairs: list[tuple[str, str]], src_vocab: SubwordVocab, tgt_vocab: SubwordVocab) -> Pairs:
    src = src_vocab.encode_many([s for s, _ in pairs])
    tgt = tgt_vocab.encode_many([t for _, t in pairs])
    return list(zip(src, tgt))


# ---------------------------------------------------------------------------
# synthetic preset


def _generator_fingerprint(module) -> str:
    """Changes whenever the generator's code does, so stale cached corpora are regenerated."""
    try:
        return hashlib.sha256(Path(module.__file__).read_bytes()).hexdigest()[:16]
    except (OSError, TypeError, AttributeError):
        return str(getattr(module, "VERSION", "unknown"))


def _read_manifest(directory: Path) -> dict | None:
    try:
        manifest = json.loads((directory / _MANIFEST).read_text(encoding="utf-8"))
        files = manifest["files"]
        if all(all((directory / name).is_file() for name in files[split]) for split in _SPLITS):
            return manifest
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _synthetic_corpus(cfg: DataConfig, cache: Path, log: Callable[[str], None]) -> dict[str, tuple[Path, Path]]:
    root = cache / "synthetic"
    knobs = (f"-lex{cfg.lexicon:g}" if cfg.lexicon != 1.0 else "") + \
        (f"-w{cfg.max_words}" if cfg.max_words != synthetic.DEFAULT_MAX_WORDS else "")
    final = root / f"seed{cfg.seed}-{cfg.size}-{cfg.valid_size}-{cfg.test_size}{knobs}"
    fingerprint = _generator_fingerprint(synthetic)
    manifest = _read_manifest(final)
    if manifest is None or manifest.get("generator") != fingerprint:
        log(f"data: generating the synthetic corpus (seed {cfg.seed}, {cfg.size} train, "
            f"{cfg.valid_size} valid, {cfg.test_size} test, lexicon {cfg.lexicon:g}, at most "
            f"{cfg.max_words} words) in {final} ...")
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{final.name}.tmp-"))
        try:
            written = synthetic.write_corpus(tmp, cfg.seed, cfg.size, cfg.valid_size, cfg.test_size,
                                             lexicon=cfg.lexicon, max_words=cfg.max_words)
            files = {}
            for split in _SPLITS:
                files[split] = [str(Path(p).resolve().relative_to(tmp.resolve())) for p in written[split]]
            (tmp / _MANIFEST).write_text(json.dumps({"generator": fingerprint, "files": files,
                                                     "seed": cfg.seed, "size": cfg.size,
                                                     "valid_size": cfg.valid_size,
                                                     "test_size": cfg.test_size, "lexicon": cfg.lexicon,
                                                     "max_words": cfg.max_words}, indent=1), encoding="utf-8")
            _install_dir(tmp, final)
        except OSError as err:
            raise DataError(f"{root}: cannot write the synthetic corpus ({err.strerror or err}); "
                            f"set data.cache_dir or NMT_CACHE_DIR to a writable directory") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        manifest = _read_manifest(final)
        if manifest is None:
            raise DataError(f"{final}: the synthetic corpus is incomplete after writing it; "
                            f"delete the directory and run again")
    else:
        log(f"data: synthetic corpus from cache {final}")
    return {split: tuple(final / name for name in manifest["files"][split]) for split in _SPLITS}


def _install_dir(tmp: Path, final: Path) -> None:
    """Move a finished directory into place; never leaves ``final`` half-written."""
    try:
        os.rename(tmp, final)
        return
    except OSError:
        if not final.exists():
            raise
    # ``final`` exists: another process finished first (keep theirs if it is
    # complete and current), or it is stale/incomplete (swap it out).
    current = _read_manifest(final)
    mine = json.loads((tmp / _MANIFEST).read_text(encoding="utf-8"))
    if current is not None and current.get("generator") == mine["generator"]:
        return
    old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
    with contextlib.suppress(OSError):
        os.rename(final, old)
    try:
        os.rename(tmp, final)
    except OSError:
        if _read_manifest(final) is None:
            raise
    shutil.rmtree(old, ignore_errors=True)
