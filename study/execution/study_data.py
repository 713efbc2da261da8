"""A study's data, prepared once in the driver before any trial: ``--data-dir`` as the data keys it
sets, the corpus paths made absolute, the shared cache chosen, and the corpus (with its SentencePiece
models) built or read from that cache, so every trial finds it ready and bad data is one line before
Ray starts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from nmt.config import config_from_dict
from nmt.data.corpus import corpus_languages, discover_corpus, resolve_path
from nmt.data.pipeline import load_data, resolve_cache_dir
from nmt.errors import UserError
from study.spec.model import StudySpec


@dataclass
class PreparedData:
    """The study with its data block resolved (absolute paths, the shared cache), the test
    references and the corpus statistics, as ``prepare_data`` returns them."""

    spec: StudySpec
    references: list[str]
    stats: dict


def prepare_data(spec: StudySpec, say) -> PreparedData:
    """Resolve the data block (absolute paths, the shared cache) and load it once in the driver (clear
    errors before any trial; the corpus and SentencePiece models are cached for the trials). The spec
    given is left as it is: the returned one holds the resolved data. A ``--data-dir`` corpus is in the
    spec already (``corpus_in``, applied when the study loaded)."""
    data = dict(spec.fields.data)
    for split in ("train", "valid", "test"):
        if data.get(split):
            data[split] = [str(resolve_path(p, f"data.{split}")) for p in data[split]]
    cfg = config_from_dict({**spec.base_tree(), "data": data}, source=spec.source)
    data["cache_dir"] = str(resolve_cache_dir(cfg.data).resolve())
    parallel = load_data(dataclasses.replace(cfg.data, cache_dir=data["cache_dir"]), log=say)
    resolved = dataclasses.replace(spec, fields=dataclasses.replace(spec.fields, data=data),
                                   tree={**spec.tree, "data": data})
    return PreparedData(resolved, [ref for _, ref in parallel.test_text], parallel.stats)


def corpus_in(data_dir: Path, langs: str | None) -> dict:
    """--data-dir DIR [--langs SRC-TGT] as the data keys it sets: no preset, the train, valid and
    test files of DIR (the only language pair there when --langs is left out)."""
    if langs is None:
        found = corpus_languages(data_dir)
        if len(found) != 2:
            raise UserError(f"--data-dir {data_dir} holds languages {', '.join(found) or 'none'}; "
                            "choose a pair with --langs SRC-TGT (e.g. --langs en-de)")
        langs = "-".join(found)
    if langs.count("-") != 1:
        raise UserError(f"--langs {langs!r}: expected SRC-TGT, e.g. en-de")
    src, tgt = langs.split("-")
    return {"preset": None, **discover_corpus(data_dir, src, tgt)}
