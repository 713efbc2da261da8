"""Machine-independent views of a trial config: what a trial key and ``--resume`` compare
(data files by content, no cache directory), and the trial key itself."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def config_key(config: dict) -> str:
    """Deterministic trial key: same resolved config (seed included), same key, on any machine:
    it is computed over ``portable_config`` (data files by content, no cache directory)."""
    return hashlib.sha256(json.dumps(portable_config(config), sort_keys=True).encode()).hexdigest()[:12]


DATA_FILES = ("train", "valid", "test")  # data keys that hold [SRC, TGT] file paths


def portable_config(config: dict) -> dict:
    """The config as any machine sees it: the data block through ``portable_data``, and no
    ``train.numerics`` (how the CPU computes, recorded with each trial and checked per study, not a
    property of the trained model's config; trials keyed before the setting existed keep their
    keys). A config without data files, cache directory or numerics is returned as it is (its key
    is the hash of the plain config)."""
    train = config.get("train")
    if isinstance(train, dict) and "numerics" in train:
        config = {**config, "train": {k: v for k, v in train.items() if k != "numerics"}}
    data = config.get("data")
    if not isinstance(data, dict):
        return config
    view = portable_data(data)
    return config if view == data else {**config, "data": view}


def portable_data(data: dict) -> dict:
    """A data block without what differs between machines holding the same corpus:
    ``cache_dir`` is dropped (set to None, its default: where the SentencePiece models and
    synthetic corpora are cached does not change them) and every data file path becomes
    ``"<base name>@<sha256 prefix of its content>"``, so two copies of a corpus at different
    paths are the same data, and a changed file is different data."""
    view = dict(data)
    if view.get("cache_dir") is not None:
        view["cache_dir"] = None
    for split in DATA_FILES:
        files = view.get(split)
        if isinstance(files, list):
            view[split] = [file_digest(path) if isinstance(path, str) else path for path in files]
    return view


def portable_tree(tree: dict) -> dict:
    """A study tree (study file shape, the ``request`` of study.json) with its data block made portable."""
    data = tree.get("data")
    return {**tree, "data": portable_data(data)} if isinstance(data, dict) else tree


_DIGESTS: dict[tuple[str, int, int], str] = {}  # (real path, size, mtime) -> "name@digest", per process

def file_digest(path: str) -> str:
    """``"<base name>@<first 16 hex digits of the SHA-256 of its bytes>"``, read in chunks and
    kept per file (path, size and modification time) for the life of the process: ``expand``
    runs for every trial. A file that cannot be read (stored results rebuilt on a machine
    without the corpus) keeps its path: nothing is compared against it there."""
    try:
        real = Path(path).expanduser().resolve()
        stat = real.stat()
    except (OSError, RuntimeError):
        return path
    cache_key = (str(real), stat.st_size, stat.st_mtime_ns)
    if cache_key not in _DIGESTS:
        digest = hashlib.sha256()
        try:
            with open(real, "rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
        except OSError:  # a directory, no permission: bad input that prepare_data reports in one line
            return path
        _DIGESTS[cache_key] = f"{real.name}@{digest.hexdigest()[:16]}"
    return _DIGESTS[cache_key]
