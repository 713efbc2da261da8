"""Reading line-aligned parallel text (plain or gzip-compressed).

Every problem a user can cause with a corpus file (missing, a directory,
unreadable, broken gzip, not UTF-8, empty, misaligned) raises a one-line
``DataError`` naming the config key, the file, the line where relevant, and
the fix.

Line semantics follow ``wc -l``: lines are separated by ``\\n`` only (a stray
``\\r`` or Unicode line separator inside a sentence never splits it, which
would silently misalign the two sides); a final newline does not start an
extra line; trailing whitespace (including ``\\r`` of CRLF files) is
stripped; a UTF-8 byte-order mark at the start of a file is dropped.
"""

from __future__ import annotations

import gzip
import itertools
import os
import zlib
from collections.abc import Iterator
from pathlib import Path

from nmt.errors import DataError

__all__ = ["read_lines", "read_parallel", "resolve_path", "stream_lines"]

_GZIP_MAGIC = b"\x1f\x8b"


def resolve_path(path: str | os.PathLike, key: str) -> Path:
    """``path`` made absolute with its links followed; a link loop is one ``DataError`` line."""
    try:
        return Path(path).expanduser().resolve()
    except (RuntimeError, OSError):  # RuntimeError: "Symlink loop" (Python 3.11); OSError ELOOP (3.13)
        raise DataError(f"{key}: {path}: a symbolic link loop (a link that leads back to itself); point {key} at "
                        f"the real file") from None


def _read_bytes(path: Path, key: str) -> bytes:
    if not path.exists():
        if path.is_symlink():
            resolve_path(path, key)  # a loop says so
            raise DataError(f"{key}: {path}: broken symbolic link (its target does not exist); "
                            f"check the path in {key}")
        raise DataError(f"{key}: {path}: file not found; check the path in {key}")
    if path.is_dir():
        raise DataError(f"{key}: {path} is a directory, not a file; give a plain-text (or .gz) corpus file in {key}")
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except PermissionError:
        raise DataError(f"{key}: {path}: permission denied; make the file readable "
                        f"(chmod +r) or point {key} at a readable copy") from None
    except OSError as err:
        raise DataError(f"{key}: {path}: cannot be read ({err.strerror or err}); check the file in {key}") from None
    if raw[:2] == _GZIP_MAGIC:
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            why = " ".join(str(err).split()) or type(err).__name__
            raise DataError(f"{key}: {path}: broken gzip file ({why}); re-download or re-compress it "
                            f"(gzip -t {path} checks it)") from None
    if path.suffix == ".gz":
        raise DataError(f"{key}: {path}: has a .gz suffix but is not gzip-compressed; "
                        f"compress it with gzip or drop the .gz from its name")
    return raw


# No sentence is this long: a longer line is a file without its line breaks (or not text at all).
MAX_LINE_CHARS = 65_536


def read_lines(path: str | os.PathLike, key: str) -> list[str]:
    """All lines of one corpus file, trailing whitespace stripped."""
    path = Path(path)
    raw = _read_bytes(path, key)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line_no = raw.count(b"\n", 0, err.start) + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise DataError(
            f"{key}: {path} line {line_no} is not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {column}); "
            f"convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from None
    del raw
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line does not start a new one
    lines = [line.rstrip() for line in lines]
    for number, line in enumerate(lines, start=1):
        if len(line) > MAX_LINE_CHARS:
            raise DataError(f"{key}: {path} line {number} is {len(line):,} characters long (limit {MAX_LINE_CHARS:,}); "
                            "the file is probably not one sentence per line - check its line breaks")
    if not lines:
        raise DataError(f"{key}: {path} is empty (0 lines); give a corpus with one sentence per line")
    if not any(lines):
        raise DataError(f"{key}: {path} has {len(lines)} lines but all are blank; give a corpus with one sentence per line")
    return lines


def stream_lines(path: str | os.PathLike, limit: int | None = None) -> Iterator[str]:
    """The first ``limit`` (default: all) lines of a corpus file one at a time, split and stripped as
    ``read_lines`` does, for a scan that may stop early. It checks nothing: OSError, EOFError, zlib.error and
    UnicodeDecodeError reach the caller (``read_lines`` reports such files in one line)."""
    path = Path(path).expanduser()
    with open(path, "rb") as fh:
        compressed = fh.read(2) == _GZIP_MAGIC
    opener = gzip.open if compressed else open
    # utf-8-sig drops a byte-order mark; newline="\n" splits on "\n" only, as read_lines does
    with opener(path, "rt", encoding="utf-8-sig", newline="\n") as fh:
        for line in itertools.islice(fh, limit):
            yield line.rstrip()


def read_parallel(src_path: str | os.PathLike, tgt_path: str | os.PathLike, key: str,
                  limit: int | None = None) -> list[tuple[str, str]]:
    """Line-aligned (source, target) pairs; ``limit`` keeps the first N pairs.

    ``key`` is the config key the paths came from (``"data.train"``); it is
    named in every error message. Alignment is checked on the whole files,
    also when ``limit`` is given.
    """
    src = read_lines(src_path, key)
    tgt = read_lines(tgt_path, key)
    if len(src) != len(tgt):
        raise DataError(
            f"{key}: {src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}; "
            f"the two files must be line-aligned"
        )
    if limit is not None:
        if limit < 1:
            raise DataError(f"{key}: limit = {limit} must be >= 1")
        src, tgt = src[:limit], tgt[:limit]
    return list(zip(src, tgt))


_SPLIT_PREFIXES = {"train": ("train",), "valid": ("valid", "val", "dev"), "test": ("test",)}


def corpus_languages(directory: str | os.PathLike) -> list[str]:
    """Language suffixes of the training files in a corpus directory (train.en.gz -> en)."""
    names = [p.name[:-3] if p.name.endswith(".gz") else p.name for p in Path(directory).glob("train*")]
    return sorted({name.rsplit(".", 1)[1] for name in names if "." in name})


def discover_corpus(directory: str | os.PathLike, src: str, tgt: str) -> dict[str, list[str]]:
    """{"train": [SRC, TGT], "valid": [...], "test": [...]} for a directory holding
    train.L, val.L (or valid./dev.) and test*.L files (optionally .gz) for both languages."""
    directory = resolve_path(directory, "--data-dir")
    if not directory.is_dir():
        raise DataError(f"--data-dir {directory}: directory not found")
    found = {}
    for split, prefixes in _SPLIT_PREFIXES.items():
        pair = []
        for lang in (src, tgt):
            matches = sorted({p for prefix in prefixes for pattern in (f"{prefix}*.{lang}", f"{prefix}*.{lang}.gz")
                              for p in directory.glob(pattern)})
            if not matches:
                raise DataError(f"--data-dir {directory}: no {split} file for language {lang!r} "
                                f"(expected {prefixes[0]}*.{lang} or {prefixes[0]}*.{lang}.gz); languages here: "
                                f"{', '.join(corpus_languages(directory)) or 'none'}")
            if len(matches) > 1:
                raise DataError(f"--data-dir {directory}: several {split} files for {lang!r} "
                                f"({', '.join(m.name for m in matches)}); choose with --set data.{split}=[SRC,TGT]")
            pair.append(str(resolve_path(matches[0], "--data-dir")))
        found[split] = pair
    return found
