"""Tests of the data pipeline: corpus reading, SentencePiece, batching, load_data.

Modules covered here: ``nmt.data.batching``, ``nmt.data.corpus``, ``nmt.data.pipeline`` and
``nmt.data.subword``."""

from __future__ import annotations

import dataclasses
import gzip
import multiprocessing
import os
import pickle
import random
import re
from pathlib import Path

import pytest
import torch

from nmt.config import DataConfig, SpmConfig, config_from_dict
from nmt.data import subword as subword_mod
from nmt.data import synthetic
from nmt.data.batching import Batch, make_batches, make_source_batches
from nmt.data.corpus import read_parallel
from nmt.data.pipeline import check_vocabulary_size, load_data, resolve_cache_dir, vocabulary_bound
from nmt.data.subword import BOS, EOS, PAD, UNK, SubwordVocab, train_subwords
from nmt.errors import ConfigError, DataError

MULTI30K = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"
if not MULTI30K.is_dir():
    MULTI30K = Path("/work/shared/data/multi30k")
needs_multi30k = pytest.mark.skipif(not (MULTI30K / "train.en.gz").is_file(),
                                    reason=f"Multi30k not found at {MULTI30K} (needed for real-text tests)")

SRC_WORDS = ("the cat dog house garden river mountain child woman man sees likes finds near under "
             "beautiful small red green quickly slowly bridge window table").split()


def make_pairs(n: int, seed: int = 0, max_words: int = 12) -> list[tuple[str, str]]:
    """A tiny translation-like corpus: the target reverses word order and inflects words."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        words = [rng.choice(SRC_WORDS) for _ in range(rng.randint(1, max_words))]
        src = " ".join(words).capitalize() + "."
        tgt = " ".join(w[::-1] + "ung" for w in reversed(words)).capitalize() + "!"
        pairs.append((src, tgt))
    return pairs


def write_text(path: Path, lines: list[str], gz: bool = False) -> Path:
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    if gz:
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


def write_corpus(tmp_path: Path, name: str, pairs: list[tuple[str, str]], gz: bool = False) -> list[str]:
    suffix = ".gz" if gz else ""
    src = write_text(tmp_path / f"{name}.src{suffix}", [s for s, _ in pairs], gz)
    tgt = write_text(tmp_path / f"{name}.tgt{suffix}", [t for _, t in pairs], gz)
    return [str(src), str(tgt)]


# ---------------------------------------------------------------------------
# corpus reading


def test_read_plain_and_gzip_give_the_same_pairs(tmp_path):
    src = ["\ufeffHello world.  ", "  leading spaces stay", "", "Grüße aus Köln\r", "tab\tinside\t"]
    tgt = ["Hallo Welt.", "Führende Leerzeichen", "leer links", "Greetings from Cologne", "x"]
    plain = read_parallel(write_text(tmp_path / "a.en", src), write_text(tmp_path / "a.de", tgt), key="data.train")
    gz = read_parallel(write_text(tmp_path / "b.en.gz", src, gz=True), write_text(tmp_path / "b.de.gz", tgt, gz=True),
                       key="data.train")
    assert plain == gz
    assert [s for s, _ in plain] == ["Hello world.", "  leading spaces stay", "", "Grüße aus Köln", "tab\tinside"]
    assert [t for _, t in plain] == tgt
    assert read_parallel(tmp_path / "a.en", tmp_path / "a.de", key="data.train", limit=2) == plain[:2]


def test_lines_split_on_newline_only(tmp_path):
    # no final newline; a stray \r and a Unicode line separator inside a sentence must not split it
    (tmp_path / "s").write_bytes("one\rstill one\ntwo\u2028still two\nthree".encode("utf-8"))
    (tmp_path / "t").write_bytes(b"1\n2\n3\n")
    pairs = read_parallel(tmp_path / "s", tmp_path / "t", key="data.valid")
    assert len(pairs) == 3
    assert pairs[0] == ("one\rstill one", "1")
    assert pairs[1] == ("two\u2028still two", "2")
    assert pairs[2] == ("three", "3")


def test_missing_file(tmp_path):
    other = write_text(tmp_path / "x.en", ["a"])
    with pytest.raises(DataError) as err:
        read_parallel(other, tmp_path / "nope.de", key="data.train")
    msg = str(err.value)
    assert msg.startswith("data.train: ") and str(tmp_path / "nope.de") in msg
    assert "not found" in msg and "\n" not in msg


def test_directory_instead_of_file(tmp_path):
    (tmp_path / "dir.de").mkdir()
    with pytest.raises(DataError) as err:
        read_parallel(write_text(tmp_path / "x.en", ["a"]), tmp_path / "dir.de", key="data.test")
    msg = str(err.value)
    assert msg.startswith("data.test: ") and str(tmp_path / "dir.de") in msg and "directory" in msg


def test_line_count_mismatch(tmp_path):
    src = write_text(tmp_path / "m.en", ["a", "b", "c"])
    tgt = write_text(tmp_path / "m.de", ["a", "b"])
    with pytest.raises(DataError) as err:
        read_parallel(src, tgt, key="data.train", limit=1)  # checked on the whole files, even with a limit
    msg = str(err.value)
    assert msg == (f"data.train: {src} has 3 lines but {tgt} has 2; the two files must be line-aligned")


@pytest.mark.parametrize("content, what", [(b"", "empty (0 lines)"), (b"\n  \n\t\n", "all are blank")])
def test_empty_corpus(tmp_path, content, what):
    (tmp_path / "e.de").write_bytes(content)
    with pytest.raises(DataError) as err:
        read_parallel(write_text(tmp_path / "x.en", ["a"]), tmp_path / "e.de", key="data.valid")
    msg = str(err.value)
    assert msg.startswith("data.valid: ") and str(tmp_path / "e.de") in msg and what in msg


@pytest.mark.parametrize("gz", [False, True])
def test_non_utf8(tmp_path, gz):
    data = b"line one\nline two\n" + "Stra\xe4e".encode("latin-1") + b"\nlast\n"
    path = tmp_path / ("bad.de.gz" if gz else "bad.de")
    path.write_bytes(gzip.compress(data) if gz else data)
    with pytest.raises(DataError) as err:
        read_parallel(write_text(tmp_path / "x.en", ["a"] * 4), path, key="data.valid")
    msg = str(err.value)
    assert msg.startswith(f"data.valid: {path} line 3 is not valid UTF-8 (byte 0xe4 at column 5)")
    assert "convert the file to UTF-8" in msg


def test_broken_gzip(tmp_path):
    good = gzip.compress(b"a\nb\nc\n" * 1000)
    (tmp_path / "t.de.gz").write_bytes(good[: len(good) // 2])  # truncated download
    with pytest.raises(DataError) as err:
        read_parallel(write_text(tmp_path / "x.en", ["a"]), tmp_path / "t.de.gz", key="data.train")
    msg = str(err.value)
    assert msg.startswith("data.train: ") and "t.de.gz" in msg and "gzip" in msg and "\n" not in msg


def test_gz_suffix_on_plain_text(tmp_path):
    (tmp_path / "p.de.gz").write_bytes(b"not compressed\n")
    with pytest.raises(DataError, match=r"data.train: .*p\.de\.gz.*not gzip-compressed"):
        read_parallel(write_text(tmp_path / "x.en", ["a"]), tmp_path / "p.de.gz", key="data.train")


def test_unreadable_file(tmp_path, monkeypatch):
    path = write_text(tmp_path / "secret.de", ["a"])
    other = write_text(tmp_path / "x.en", ["a"])
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # root reads files whatever their mode: make open() fail the way it does for other users
        import builtins

        import nmt.data.corpus as corpus_mod

        def deny(file, *args, **kwargs):
            if Path(file) == path:
                raise PermissionError(13, "Permission denied", str(file))
            return builtins.open(file, *args, **kwargs)

        monkeypatch.setattr(corpus_mod, "open", deny, raising=False)
    path.chmod(0)
    try:
        with pytest.raises(DataError) as err:
            read_parallel(other, path, key="data.test")
        msg = str(err.value)
        assert msg.startswith(f"data.test: {path}: permission denied") and "readable" in msg
    finally:
        path.chmod(0o644)


# ---------------------------------------------------------------------------
# SentencePiece


@pytest.fixture(scope="module")
def pairs():
    return make_pairs(400, seed=1)


def test_vocab_specials_and_round_trip(pairs, tmp_path):
    for model_type in ("bpe", "unigram"):
        cfg = SpmConfig(model_type=model_type, vocab_size=120, joint=True)
        src, tgt = train_subwords(pairs, cfg, tmp_path / "spm", log=None)
        assert src is tgt and len(src) == 120 and src.path.is_file()
        assert [src.piece(i) for i in (PAD, UNK, BOS, EOS)] == ["<pad>", "<unk>", "<s>", "</s>"]
        for s, t in pairs[:50] + [("The cat sees the river near the bridge.", "Egdirbung")]:
            for text in (s, t):
                ids = src.encode(text)
                assert ids and not ({PAD, BOS, EOS} & set(ids))
                assert src.decode(ids) == text
                assert src.decode([BOS] + ids + [EOS, PAD, PAD]) == text  # specials are ignored
                assert src.decode(torch.tensor(ids)) == text
        batch = [s for s, _ in pairs[:20]]
        assert src.encode_many(batch) == [src.encode(s) for s in batch]
        assert UNK in src.encode("Ж")  # a character never seen in training


def test_vocab_pickles_without_the_file(pairs, tmp_path):
    vocab, _ = train_subwords(pairs, SpmConfig(vocab_size=100), tmp_path, log=None)
    blob = pickle.dumps(vocab)
    vocab.path.unlink()
    clone = pickle.loads(blob)
    assert len(clone) == len(vocab) and clone.encode("the cat") == vocab.encode("the cat")


def test_cache_hit_does_not_retrain(pairs, tmp_path, monkeypatch):
    calls = []
    real_train = subword_mod._train
    monkeypatch.setattr(subword_mod, "_train", lambda *a, **k: calls.append(1) or real_train(*a, **k))
    cfg = SpmConfig(vocab_size=100)
    messages = []
    first, _ = train_subwords(pairs, cfg, tmp_path, log=messages.append)
    mtime = first.path.stat().st_mtime_ns
    second, _ = train_subwords(list(pairs), SpmConfig(vocab_size=100), tmp_path, log=messages.append)
    assert len(calls) == 1
    assert second.path == first.path and second.path.stat().st_mtime_ns == mtime
    assert "training SentencePiece" in messages[0] and "from cache" in messages[-1]
    # nothing half-written or temporary is left next to the model
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".lock", ".model"]

    # any change of data or settings is a miss and trains a new model
    changed = list(pairs)
    changed[7] = (changed[7][0] + " window", changed[7][1])
    paths = {first.path}
    for data, settings in [(changed, cfg), (pairs, SpmConfig(vocab_size=101)),
                           (pairs, SpmConfig(vocab_size=100, model_type="unigram")),
                           (pairs, SpmConfig(vocab_size=100, character_coverage=0.9995))]:
        vocab, _ = train_subwords(data, settings, tmp_path, log=None)
        paths.add(vocab.path)
    assert len(calls) == 5 and len(paths) == 5


def test_joint_and_separate_vocabularies(pairs, tmp_path):
    src, tgt = train_subwords(pairs, SpmConfig(vocab_size=100, joint=False), tmp_path, log=None)
    assert src is not tgt and src.path != tgt.path
    joint, joint2 = train_subwords(pairs, SpmConfig(vocab_size=100, joint=True), tmp_path, log=None)
    assert joint is joint2 and joint.path not in (src.path, tgt.path)
    # the target model is trained on the target side only: target words are few pieces there
    tgt_word = "Nedragung"
    assert len(tgt.encode(tgt_word)) < len(src.encode(tgt_word))
    assert len(src.encode("Garden")) <= len(tgt.encode("Garden"))


def test_vocab_too_large_and_too_small(pairs, tmp_path):
    with pytest.raises(DataError) as err:
        train_subwords(pairs, SpmConfig(vocab_size=5000), tmp_path, log=None)
    msg = str(err.value)
    assert msg.startswith("data.spm.vocab_size = 5000 is larger than this corpus allows (at most ")
    allowed = int(msg.split("at most ")[1].split(")")[0])
    assert msg.endswith(f"; lower it (--set data.spm.vocab_size={allowed})")
    assert 50 < allowed < 5000
    with pytest.raises(DataError, match=r"^data.spm.vocab_size = 5000 is larger than the source side of this corpus"):
        train_subwords(pairs, SpmConfig(vocab_size=5000, joint=False, model_type="unigram"), tmp_path, log=None)
    with pytest.raises(DataError, match=r"data.spm.vocab_size = 10 is smaller than .*raise data.spm.vocab_size"):
        train_subwords(pairs, SpmConfig(vocab_size=10), tmp_path, log=None)
    assert not list(tmp_path.glob("*.model")) and not list(tmp_path.glob("*.tmp"))


def test_over_long_lines_are_left_out_of_training(pairs, tmp_path):
    long_line = "window " * 1000  # 7000 bytes > SentencePiece's max_sentence_length
    messages = []
    vocab, _ = train_subwords(pairs + [(long_line.strip(), "x")], SpmConfig(vocab_size=100), tmp_path,
                              log=messages.append)
    assert any("1 joint training line(s) longer than 4192 bytes" in m for m in messages)
    assert vocab.decode(vocab.encode(long_line.strip())) == long_line.strip()  # encoding has no limit


def _train_in_child(args):
    pairs, cache = args
    vocab, _ = train_subwords(pairs, SpmConfig(vocab_size=100), cache, log=None)
    return str(vocab.path), vocab.encode("the beautiful garden")


def test_concurrent_training_is_safe(pairs, tmp_path):
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with ctx.Pool(3) as pool:
        results = pool.map(_train_in_child, [(pairs, tmp_path)] * 3)
    assert len({path for path, _ in results}) == 1 and len({tuple(ids) for _, ids in results}) == 1
    assert len(list(tmp_path.glob("*.model"))) == 1 and not list(tmp_path.glob("*.tmp"))
    assert SubwordVocab(results[0][0]).encode("the beautiful garden") == results[0][1]


# ---------------------------------------------------------------------------
# batching


def random_examples(n: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    rng = random.Random(seed)
    out = []
    for _i in range(n):
        s = [rng.randint(4, 99) for _ in range(rng.randint(0, 30))]
        t = [rng.randint(4, 99) for _ in range(rng.randint(0, 30))]
        out.append((s, t))
    out.append(([5] * 90, [6] * 120))  # longer than batch_tokens on its own
    return out


def check_batch(batch: Batch, examples) -> None:
    b, s_len = batch.src.shape
    assert batch.tgt_in.shape == batch.tgt_out.shape == batch.tgt_mask.shape
    assert batch.src_mask.shape == batch.src.shape and len(batch.indices) == b
    assert batch.src.dtype == torch.long and batch.src_mask.dtype == torch.bool
    for row, idx in enumerate(batch.indices):
        src, tgt = examples[idx]
        n, m = len(src), len(tgt)
        assert batch.src[row, :n].tolist() == src and batch.src[row, n] == EOS
        assert batch.src[row, n + 1:].eq(PAD).all()
        assert batch.src_mask[row].tolist() == [True] * (n + 1) + [False] * (s_len - n - 1)
        assert batch.tgt_in[row, : m + 1].tolist() == [BOS] + tgt
        assert batch.tgt_out[row, : m + 1].tolist() == tgt + [EOS]
        assert batch.tgt_in[row, m + 1:].eq(PAD).all() and batch.tgt_out[row, m + 1:].eq(PAD).all()
        assert batch.tgt_mask[row].sum() == m + 1 and batch.tgt_mask[row, : m + 1].all()
    assert batch.ntokens == sum(len(examples[i][1]) + 1 for i in batch.indices)
    # tensors are as small as the longest example needs
    assert s_len == max(len(examples[i][0]) for i in batch.indices) + 1
    assert batch.tgt_in.size(1) == max(len(examples[i][1]) for i in batch.indices) + 1


def test_batches_cover_every_example_once_within_the_token_budget():
    examples = random_examples(300)
    batch_tokens = 100
    batches = make_batches(examples, batch_tokens, shuffle=True, seed=3, epoch=1)
    seen = sorted(i for b in batches for i in b.indices)
    assert seen == list(range(len(examples)))
    for batch in batches:
        check_batch(batch, examples)
        padded = batch.src.size(0) * max(batch.src.size(1), batch.tgt_in.size(1))
        assert padded <= batch_tokens or batch.src.size(0) == 1
    assert any(b.src.size(0) == 1 and b.tgt_in.size(1) == 121 for b in batches)
    assert max(b.src.size(0) for b in batches) > 1


def test_unshuffled_batches_are_length_sorted():
    examples = random_examples(200, seed=5)
    batches = make_batches(examples, 150, shuffle=False)
    keys = [(len(examples[i][1]), len(examples[i][0])) for b in batches for i in b.indices]
    assert keys == sorted(keys)


def test_shuffle_is_deterministic_per_seed_and_epoch():
    examples = random_examples(300, seed=2)

    def order(seed, epoch):
        return [tuple(b.indices) for b in make_batches(examples, 120, shuffle=True, seed=seed, epoch=epoch)]

    assert order(1, 0) == order(1, 0)
    assert order(1, 0) != order(1, 1)
    assert order(1, 0) != order(2, 0)
    assert sorted(order(1, 0)) == sorted(order(1, 1))  # same batches, different order


def test_empty_target_and_device_move():
    examples = [([7, 8], []), ([9], [10, 11])]
    (batch,) = make_batches(examples, 1000, shuffle=False)
    assert batch.indices == [0, 1]
    assert batch.tgt_in[0].tolist() == [BOS, PAD, PAD] and batch.tgt_out[0].tolist() == [EOS, PAD, PAD]
    assert batch.ntokens == 1 + 3
    moved = batch.to("cpu")
    assert torch.equal(moved.src, batch.src) and moved.indices == batch.indices


def test_source_batches_restore_order():
    rng = random.Random(0)
    sources = [[rng.randint(4, 50) for _ in range(rng.randint(0, 20))] for _ in range(53)]
    batches = make_source_batches(sources, max_sentences=8)
    restored = [None] * len(sources)
    for src, mask, idx in batches:
        assert src.size(0) == len(idx) <= 8 and mask.shape == src.shape
        for row, i in enumerate(idx):
            n = len(sources[i])
            assert src[row, :n].tolist() == sources[i] and src[row, n] == EOS
            assert mask[row].sum() == n + 1
            restored[i] = src[row, :n].tolist()
    assert restored == sources
    lengths = [len(sources[i]) for _, _, idx in batches for i in idx]
    assert lengths == sorted(lengths, reverse=True)


# ---------------------------------------------------------------------------
# load_data


def file_config(tmp_path, train, valid, test, **kw) -> DataConfig:
    return DataConfig(preset=None, train=write_corpus(tmp_path, "train", train),
                      valid=write_corpus(tmp_path, "valid", valid, gz=True), test=write_corpus(tmp_path, "test", test),
                      cache_dir=str(tmp_path / "cache"), **kw)


def test_load_data_from_files_filters_training_pairs(tmp_path):
    train = make_pairs(300, seed=4, max_words=6)
    long_pair = (" ".join(["beautiful mountain"] * 30), "Kurz!")
    train += [long_pair, ("Only a source side.", ""), ("", "Nur Ziel.")]
    valid = make_pairs(20, seed=5) + [long_pair]
    test = make_pairs(15, seed=6)
    messages = []
    cfg = file_config(tmp_path, train, valid, test, max_len=25, spm=SpmConfig(vocab_size=100))
    data = load_data(cfg, log=messages.append)

    vocab = data.src_vocab
    assert vocab is data.tgt_vocab and len(vocab) == 100
    expected_long = sum(1 for s, t in train if s and t and max(len(vocab.encode(s)), len(vocab.encode(t))) > 25)
    assert expected_long >= 1
    assert data.stats["train_dropped_long"] == expected_long
    assert data.stats["train_dropped_empty"] == 2
    assert data.stats["train_pairs"] == len(data.train) == len(train) - expected_long - 2
    assert all(0 < len(s) <= 25 and 0 < len(t) <= 25 for s, t in data.train)
    assert data.train[0] == (vocab.encode(train[0][0]), vocab.encode(train[0][1]))
    # valid and test are complete and aligned with their raw text
    assert data.valid_text == valid and data.test_text == test
    assert len(data.valid) == 21 and data.valid[-1][0] == vocab.encode(long_pair[0])
    assert [vocab.decode(t) for _, t in data.test] == [t for _, t in test]
    assert any(f"{expected_long} longer than 25 subwords" in m and "dropped" in m for m in messages)

    # second call: same model from the cache, same data
    again = load_data(cfg, log=messages.append)
    assert again.src_vocab.path == vocab.path and again.train == data.train
    assert "from cache" in " ".join(messages[-2:])


def test_load_data_limit_and_separate_vocabularies(tmp_path):
    cfg = file_config(tmp_path, make_pairs(300, seed=7), make_pairs(10, seed=8), make_pairs(10, seed=9),
                      limit=120, spm=SpmConfig(vocab_size=80, joint=False))
    data = load_data(cfg, log=None)
    assert data.stats["train_read"] == 120 and len(data.train) == 120
    assert data.src_vocab is not data.tgt_vocab and not data.stats["joint_vocab"]
    assert data.test[0][1] == data.tgt_vocab.encode(data.test_text[0][1])


def test_load_data_errors_name_the_key(tmp_path):
    cfg = file_config(tmp_path, make_pairs(50), make_pairs(5), make_pairs(5))
    cfg.valid = [cfg.valid[0], str(tmp_path / "missing.de")]
    with pytest.raises(DataError, match=r"^data\.valid: .*missing\.de: file not found"):
        load_data(cfg, log=None)


def test_cache_dir_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_CACHE_DIR", str(tmp_path / "from-env"))
    assert resolve_cache_dir(DataConfig()) == tmp_path / "from-env"
    assert resolve_cache_dir(DataConfig(cache_dir=str(tmp_path / "own"))) == tmp_path / "own"
    monkeypatch.delenv("NMT_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_cache_dir(DataConfig()) == tmp_path / "home" / ".cache" / "rnmt"
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(DataError) as err:
        resolve_cache_dir(DataConfig(cache_dir=str(tmp_path / "a-file" / "cache")))
    msg = str(err.value)
    assert str(tmp_path / "a-file" / "cache") in msg and "data.cache_dir" in msg and "NMT_CACHE_DIR" in msg


@needs_multi30k
def test_load_data_multi30k_head(tmp_path):
    m = MULTI30K
    cfg = DataConfig(preset=None, train=[str(m / "train.en.gz"), str(m / "train.de.gz")],
                     valid=[str(m / "val.en.gz"), str(m / "val.de.gz")],
                     test=[str(m / "test_2016_flickr.en.gz"), str(m / "test_2016_flickr.de.gz")],
                     limit=300, spm=SpmConfig(vocab_size=500), cache_dir=str(tmp_path))
    data = load_data(cfg, log=None)
    assert data.stats["train_read"] == 300 and data.stats["train_dropped"] == 0 and len(data.train) == 300
    assert len(data.valid) == 1014 and len(data.test) == 1000
    assert data.valid_text[0][0].startswith("A group of men")
    vocab = data.tgt_vocab
    assert vocab.decode(vocab.encode(data.valid_text[0][1])) == data.valid_text[0][1]
    batches = make_batches(data.train, 1000, shuffle=True, seed=1)
    assert sorted(i for b in batches for i in b.indices) == list(range(300))


def _synthetic_available() -> bool:
    try:
        from nmt.data import synthetic  # noqa: F401
    except ImportError:
        return False
    return hasattr(synthetic, "write_corpus")


@pytest.mark.skipif(not _synthetic_available(), reason="nmt.data.synthetic.write_corpus is not available yet")
def test_load_data_synthetic_preset(tmp_path):
    cfg = DataConfig(preset="synthetic", seed=3, size=300, valid_size=20, test_size=15,
                     spm=SpmConfig(vocab_size=200), cache_dir=str(tmp_path))
    messages = []
    data = load_data(cfg, log=messages.append)
    corpus_dir = tmp_path / "synthetic" / "seed3-300-20-15"
    assert (corpus_dir / "manifest.json").is_file()
    assert data.stats["source"] == "synthetic seed=3 size=300"
    assert data.stats["train_read"] == 300 and len(data.train) == 300 - data.stats["train_dropped"]
    assert len(data.valid) == len(data.valid_text) == 20 and len(data.test) == 15
    assert any("generating the synthetic corpus" in m for m in messages)
    mtimes = {p: p.stat().st_mtime_ns for p in corpus_dir.iterdir()}

    messages.clear()
    again = load_data(cfg, log=messages.append)
    assert again.train == data.train and again.valid_text == data.valid_text
    assert {p: p.stat().st_mtime_ns for p in corpus_dir.iterdir()} == mtimes  # not regenerated
    assert not any("generating" in m for m in messages)
    assert not [p for p in (tmp_path / "synthetic").iterdir() if p.name.startswith(".")]  # no temp dirs left


def test_synthetic_knobs_get_their_own_cached_corpus(tmp_path):
    from nmt.config import load_config
    from nmt.data.pipeline import load_data

    common = ["data.size=200", "data.valid_size=10", "data.test_size=10", "data.spm.vocab_size=200",
              f"data.cache_dir={tmp_path}"]
    full = load_data(load_config(None, common).data, log=None)
    small = load_data(load_config(None, [*common, "data.lexicon=0.25", "data.max_words=12"]).data, log=None)
    corpora = sorted(p.name for p in (tmp_path / "synthetic").iterdir() if not p.name.startswith("."))
    assert corpora == ["seed1-200-10-10", "seed1-200-10-10-lex0.25-w12"]
    assert max(len(src.split()) for src, _ in small.test_text) <= 12
    assert full.test_text != small.test_text


# ---------------------------------------------------------------------------
# the vocabulary bound of config validation


def validated(data: DataConfig) -> DataConfig:
    """``data`` through config validation and the vocabulary check a new run makes."""
    checked = config_from_dict({"data": dataclasses.asdict(data)}, source="test").data
    check_vocabulary_size(checked, "test")
    return checked


def test_a_stored_config_stays_readable_when_its_corpus_no_longer_fits(tmp_path):
    """Checkpoints and finished studies are read through config validation: the vocabulary check is
    for runs about to use a corpus, so a corpus that changed since does not lock them out."""
    cfg = file_config(tmp_path, [("ab cd", "ef")] * 3, [("ab", "ef")], [("ab", "ef")],
                      spm=SpmConfig(vocab_size=1_000_000))
    assert config_from_dict({"data": dataclasses.asdict(cfg)}, source="test").data.spm.vocab_size == 1_000_000
    with pytest.raises(ConfigError, match="data.spm.vocab_size = 1000000: data.train"):
        validated(cfg)


def sentencepiece_limit(pairs, spm: SpmConfig, cache: Path) -> int:
    """The largest vocabulary SentencePiece trains on ``pairs`` (on the side that allows fewer), read from its
    refusal of ``spm.vocab_size``; ``spm.vocab_size`` itself when it trains."""
    try:
        train_subwords(pairs, spm, cache, log=None)
    except DataError as err:
        return int(re.search(r"at most (\d+)", str(err)).group(1))
    return spm.vocab_size


def test_the_bound_is_sentencepieces_limit_for_two_letter_words(tmp_path):
    """Every piece a two-letter word allows ('▁a', 'ab', '▁ab') ends up in a BPE vocabulary, so there the
    bound (4 specials + characters + longer pieces) is SentencePiece's exact limit: it passes validation and
    SentencePiece trains it; one more is refused by validation."""
    rng = random.Random(0)

    def line(letters: str) -> str:
        return " ".join(rng.choice(letters) + rng.choice(letters) for _ in range(5))

    pairs = [(line("abcdef"), line("uvwxyz")) for _ in range(30)]
    cfg = file_config(tmp_path, pairs, pairs[:3], pairs[:3], spm=SpmConfig(vocab_size=1_000_000))
    bound, text = vocabulary_bound(cfg)
    assert text == f"data.train ({cfg.train[0]}, {cfg.train[1]})"
    cfg.spm.vocab_size = bound
    assert len(load_data(validated(cfg), log=None).src_vocab) == bound
    cfg.spm.vocab_size = bound + 1
    with pytest.raises(ConfigError) as err:
        validated(cfg)
    assert str(err.value).startswith(f"test: data.spm.vocab_size = {bound + 1}: data.train ({cfg.train[0]}, "
                                     f"{cfg.train[1]}) has at most {bound} distinct subword pieces")
    assert f"lower it to {bound} or less (--set data.spm.vocab_size=N)" in str(err.value)
    assert sentencepiece_limit(pairs, cfg.spm, tmp_path / "spm") == bound  # SentencePiece agrees


def test_the_synthetic_bound_needs_no_corpus_and_holds(tmp_path):
    """From the lexicon alone: nothing is generated to check it. SentencePiece makes fewer pieces from a corpus
    of these settings (how many depends on the sentences drawn, so only training knows the exact limit)."""
    corpus = synthetic.generate_corpus(2, 300, 0, 0, lexicon=0.01, max_words=8)["train"]
    for joint, text in ((True, "the synthetic corpus (seed 2, lexicon 0.01)"),
                        (False, "the source side of the synthetic corpus (seed 2, lexicon 0.01)")):
        cfg = DataConfig(seed=2, size=300, lexicon=0.01, max_words=8, cache_dir=str(tmp_path / "cache"),
                         spm=SpmConfig(vocab_size=1_000_000, joint=joint))
        bound, found = vocabulary_bound(cfg)
        assert found == text
        cfg.spm.vocab_size = bound
        validated(cfg)
        cfg.spm.vocab_size = bound + 1
        with pytest.raises(ConfigError, match=rf"^test: data.spm.vocab_size = {bound + 1}: {re.escape(text)} has at "
                                              rf"most {bound} distinct subword pieces"):
            validated(cfg)
        assert not (tmp_path / "cache").exists()
        for model_type in ("bpe", "unigram"):
            spm = SpmConfig(model_type=model_type, vocab_size=bound, joint=joint)
            assert sentencepiece_limit(corpus, spm, tmp_path / "spm") < bound


def test_word_forms_cover_every_generated_token():
    """The synthetic bound is an upper one only if word_forms lists every token the generator can write."""
    for seed, lexicon, max_words in ((1, 0.01, 8), (2, 0.1, 10), (3, 1.0, 60)):
        forms = synthetic.word_forms(seed, lexicon)
        corpus = synthetic.generate_corpus(seed, 400, 50, 50, lexicon=lexicon, max_words=max_words)
        for src, tgt in (pair for split in corpus.values() for pair in split):
            assert set(synthetic.tokenize(src)) <= forms["source"], src
            assert set(synthetic.tokenize(tgt)) <= forms["target"], tgt


@needs_multi30k
def test_the_bound_holds_on_real_text(tmp_path):
    """A few hundred lines of Multi30k (English-German), separate vocabularies: the source side allows fewer
    pieces, SentencePiece (BPE and unigram) makes fewer than the bound, and one more is refused."""
    pairs = read_parallel(MULTI30K / "train.en.gz", MULTI30K / "train.de.gz", key="data.train", limit=300)
    cfg = file_config(tmp_path, pairs, pairs[:5], pairs[:5], limit=200, spm=SpmConfig(vocab_size=1_000_000,
                                                                                      joint=False))
    bound, text = vocabulary_bound(cfg)
    assert text == f"the source side of data.train ({cfg.train[0]}, {cfg.train[1]}, first 200 pairs)"
    for model_type in ("bpe", "unigram"):
        spm = SpmConfig(model_type=model_type, vocab_size=bound, joint=False)
        assert sentencepiece_limit(pairs[:200], spm, tmp_path / "spm") < bound
    cfg.spm.vocab_size = bound
    validated(cfg)
    cfg.spm.vocab_size = bound + 1
    with pytest.raises(ConfigError, match=rf"at most {bound} distinct subword pieces"):
        validated(cfg)


def test_the_bound_reads_changed_files_again_and_leaves_unreadable_ones_to_load_data(tmp_path):
    cfg = file_config(tmp_path, [("ab cd", "ef")] * 3, [("ab", "ef")], [("ab", "ef")],
                      spm=SpmConfig(vocab_size=1_000_000))
    first, _ = vocabulary_bound(cfg)
    write_corpus(tmp_path, "train", [("ab cd gh", "ef ij")] * 3)
    assert vocabulary_bound(cfg)[0] > first
    cfg.train = [str(tmp_path / "missing.src"), cfg.train[1]]
    assert vocabulary_bound(cfg) is None
    with pytest.raises(DataError, match="missing.src: file not found"):
        load_data(validated(cfg), log=None)
