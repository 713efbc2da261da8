"""The synthetic preset's default vocabulary is one its corpora allow: a config or study file that
leaves ``data.spm.vocab_size`` out (the README's study file does) is valid as written, while file
corpora keep their default and no built-in study's trials change."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import nmt.config
from nmt.config import SYNTHETIC_VOCAB_SIZE, load_config

ROOT = Path(__file__).resolve().parents[2]
FILES = ["data.train=[a.en,a.de]", "data.valid=[b.en,b.de]", "data.test=[c.en,c.de]"]


def test_the_synthetic_preset_has_its_own_default_and_an_explicit_size_wins():
    assert load_config(None).data.spm.vocab_size == SYNTHETIC_VOCAB_SIZE
    assert load_config(None, ["data.lexicon=0.1"]).data.spm.vocab_size == SYNTHETIC_VOCAB_SIZE
    assert load_config(None, ["data.spm.vocab_size=8000"]).data.spm.vocab_size == 8000
    assert load_config(None, FILES).data.spm.vocab_size == 8000  # a file corpus keeps the usual default
    # written out (a checkpoint's config.yaml, a trial's config), the size is explicit and reads back the same
    again = load_config(None, [f"data.spm.vocab_size={load_config(None).data.spm.vocab_size}"])
    assert again.to_dict() == load_config(None).to_dict()


def test_the_readme_study_files_corpus_trains_its_default_vocabulary(cache_dir):
    """The example's corpus (3,000 pairs of a tenth of the lexicon, at most 10 words) allows about
    2,500 pieces: the old default of 8000 was refused when SentencePiece trained."""
    from nmt.data.pipeline import load_data

    cfg = load_config(None, ["data.size=3000", "data.lexicon=0.1", "data.max_words=10", f"data.cache_dir={cache_dir}"])
    data = load_data(cfg.data, log=None)
    assert data.stats["tgt_vocab"] == SYNTHETIC_VOCAB_SIZE


@pytest.mark.parametrize("path", sorted((ROOT / "search_spaces").rglob("*.yaml")), ids=lambda p: p.stem)
def test_every_built_in_study_names_its_vocabulary(path):
    """So a default cannot change a built-in study's trials (their keys hash the resolved config)."""
    study = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(study["data"]["spm"]["vocab_size"], int)


def test_the_built_in_studies_trial_keys_do_not_depend_on_the_default(monkeypatch):
    from study.spec.expansion import expand
    from study.spec.loading import load_study

    names = sorted(p.stem for p in (ROOT / "search_spaces").glob("*.yaml"))
    now = {name: [t.key for t in expand(load_study(name))] for name in names}
    monkeypatch.setattr(nmt.config, "SYNTHETIC_VOCAB_SIZE", 8000)  # the default before the fix
    assert {name: [t.key for t in expand(load_study(name))] for name in names} == now
