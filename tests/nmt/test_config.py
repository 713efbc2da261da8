"""Config loading: overrides, per-cell defaults, and one clear error per bad value.

Modules covered here: ``nmt.typed_config`` and ``nmt.units``."""

from __future__ import annotations

import pytest

from nmt.config import config_from_dict, load_config, smoke, validate
from nmt.errors import ConfigError
from nmt.typed_config import apply_overrides, parse_override


def test_defaults_resolve_per_cell():
    srnmt = load_config(None, ["model.cell=srnmt"]).model
    assert (srnmt.layer_norm, srnmt.multi_attention, srnmt.options.highway, srnmt.decoder_style) == \
        (True, True, True, None)
    gru = load_config(None, ["model.cell=gru"]).model
    assert (gru.layer_norm, gru.multi_attention, gru.decoder_style, gru.input_feeding) == (False, False, "luong", True)
    assert load_config(None, ["model.cell=gru", "model.decoder_style=bahdanau"]).model.input_feeding is False
    atr = load_config(None, ["model.cell=atr"]).model.options
    assert (atr.gates, atr.forget_sign, atr.candidate) == ("twin", "input_minus_history", "linear")
    fsmn = load_config(None, ["model.cell=fsmn"]).model
    assert (fsmn.options.memory, fsmn.options.order, fsmn.options.input_window, fsmn.input_feeding) == \
        ("scalar", 10, 1, False)
    assert fsmn.attention == "general" and gru.attention == "mlp"  # FSMN paper eq. 11 is multiplicative
    assert load_config(None, ["model.hidden=64"]).model.emb == 64


def test_overrides_take_yaml_values_lists_and_new_sections():
    assert parse_override("train.lr=3e-4") == ("train.lr", "3e-4")  # YAML 1.1 string; the float field converts it
    cfg = load_config(None, ["train.lr=3e-4", "model.gate_inputs=[state, source]", "data.train=[a.en, a.de]",
                             "model.decoder_style=bahdanau", "model.context_gate=source",
                             "data.valid=[b.en, b.de]", "data.test=[c.en, c.de]"])
    assert cfg.train.lr == pytest.approx(3e-4)
    assert cfg.model.gate_inputs == ["state", "source"]
    assert cfg.data.preset is None and cfg.data.train == ["a.en", "a.de"]  # giving files means using them
    assert apply_overrides({}, ["a.b.c=1"]) == {"a": {"b": {"c": 1}}}


def test_yaml_file_and_override_precedence(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model: {cell: atr, hidden: 32}\ntrain: {lr: 0.01}\n")
    cfg = load_config(path, ["model.hidden=48"])
    assert (cfg.model.cell, cfg.model.hidden, cfg.train.lr) == ("atr", 48, 0.01)


def test_smoke_keeps_flags_and_shrinks_sizes():
    cfg = load_config(None, ["model.cell=srnmt", "model.enc_layers=4", "model.dec_layers=4",
                             "model.srnmt.highway=false"])
    small = smoke(cfg)
    assert small.model.enc_layers == 4 and small.model.options.highway is False
    assert smoke(load_config(None, ["model.cell=fsmn", "model.fsmn.order=25"])).model.options.order == 4
    assert small.model.hidden <= 32 and small.train.max_epochs <= 2 and small.data.size <= 400
    assert cfg.model.hidden == 256  # the original is untouched
    held = smoke(load_config(None, ["train.max_epochs=40", "train.patience=3", "train.min_epochs=30"]))
    assert held.train.min_epochs == held.train.max_epochs <= 2
    validate(held, "smoke")  # early stopping may still act, at the smoke run's last epoch


BAD = [
    (["model.cell=lstmm"], "model.cell = 'lstmm' is not a known cell", "did you mean 'lstm'"),
    (["model.hiden=3"], "unknown key 'model.hiden'", "did you mean 'model.hidden'"),
    (["modle.cell=gru"], "unknown key 'modle'", "did you mean 'model'"),
    (["model.hidden=abc"], "model.hidden = 'abc' must be an integer", ""),
    (["model.hidden=2.5"], "model.hidden = 2.5 must be an integer", ""),
    (["model.bidirectional=maybe"], "model.bidirectional = 'maybe' must be true or false", ""),
    (["model.enc_layers=0"], "model.enc_layers = 0", "must be >= 1"),
    (["model.dec_layers=-2"], "model.dec_layers = -2", "must be >= 1"),
    (["model.dropout=1.5"], "model.dropout = 1.5", "must be in [0, 1)"),
    (["train.lr=-0.1"], "train.lr = -0.1", "must be > 0"),
    (["train.max_epochs=0"], "train.max_epochs = 0", "must be >= 1"),
    (["model.attention=cosine"], "model.attention = 'cosine' is not allowed", "mlp, general, dot"),
    (["model.gates=twin"], "model.gates = 'twin' does not exist for cell 'gru'", "remove it"),
    (["model.cell=gru", "model.highway=true"], "model.highway = True does not exist for cell 'gru'",
     "an option of model.srnmt.highway"),
    (["model.cell=atr", "model.peephole=true"], "model.peephole = True does not exist for cell 'atr'",
     "model.lstm.peephole, model.sru.peephole"),
    (["model.cell=gru", "model.srnmt.highway=false"], "model.srnmt holds options of the srnmt unit",
     "model.cell is 'gru'"),
    (["model.cell=atr", "model.atr.gate=coupled"], "unknown key 'model.atr.gate'", "did you mean 'model.atr.gates'"),
    (["model.cell=atr", "model.atr=coupled"], "model.atr must be a section", "coupled"),
    (["model.cell=atr", "model.gates=coupled", "model.atr.gates=twin"], "model.gates and model.atr.gates are both set",
     "keep model.atr.gates"),
    (["model.cell=lstm", "model.decoder_style=luong", "model.lstm.peephole=2"], "model.lstm.peephole = 2",
     "true or false"),
    (["model.cell=srnmt", "model.input_feeding=true"], "model.input_feeding = true", "step-by-step decoder"),
    (["model.context_gate=both"], "model.context_gate = 'both'", "decoder_style: bahdanau"),
    (["model.cell=sru", "model.decoder_style=bahdanau", "model.context_gate=source"], "model.context_gate",
     "sru has none"),
    (["model.cell=gru", "model.decoder_style=bahdanau", "model.context_gate=both", "model.gate_inputs=[colour]"],
     "unknown input 'colour'", "subset of state, source, prev_word"),
    (["model.cell=fsmn", "model.fsmn.input_window=3"], "model.fsmn.input_window = 3", "choose one of 1, 2"),
    (["model.cell=fsmn", "model.fsmn.order=-1"], "model.fsmn.order = -1", "must be >= 0"),
    (["model.cell=fsmn", "model.attention=dot"], "model.attention = 'dot'", "general"),
    (["model.cell=srnmt", "model.dir_size=full"], "model.dir_size = 'full'", "dir_size: half"),
    (["model.hidden=7"], "model.hidden = 7", "even"),
    (["data.preset=null"], "data.train = None", "[SOURCE_FILE, TARGET_FILE]"),
    (["data.train=[a.en]", "data.valid=[a,b]", "data.test=[a,b]"], "data.train = ['a.en']", "two paths"),
    (["data.spm.vocab_size=4"], "data.spm.vocab_size = 4", ">= 8"),
    (["data.spm.model_type=word"], "data.spm.model_type = 'word' is not allowed", "bpe, unigram"),
    (["train=5"], "train must be a section", ""),
    (["decode.beam=0"], "decode.beam = 0", "must be in [1, 1000]"),
    (["train.max_minutes=-1"], "train.max_minutes = -1.0", "> 0"),
    (["decode.valid_beam=0"], "decode.valid_beam = 0", "must be in [1, 1000]"),
    (["train.lr=1e-6"], "train.min_lr = 1e-05", "between 0 and train.lr"),
    (["train.plateau_patience=0"], "train.plateau_patience = 0", ">= 1"),
    (["train.min_epochs=-1"], "train.min_epochs = -1", ">= 0"),
    (["train.min_epochs=11", "train.max_epochs=10"], "train.min_epochs = 11", "more than train.max_epochs (10)"),
    (["train.patience_per_stage=true", "train.lr_decay=none"], "train.patience_per_stage = True",
     "train.lr_decay: plateau"),
    (["train.patience_per_stage=true", "train.patience=0"], "train.patience_per_stage = True", "train.patience >= 1"),
    (["model.gate_inputs=[state]"], "model.gate_inputs = ['state'] has no gate to configure", "context_gate"),
    (["model.cell=gru", "model.decoder_style=bahdanau", "model.context_gate=both", "model.gate_inputs=[state, state]"],
     "model.gate_inputs = ['state', 'state']", "lists an input twice"),
    (["data.preset=synthetic", "data.train=[a, b]", "data.valid=[a, b]", "data.test=[a, b]"],
     "data.preset = 'synthetic' and data.train are both set", "data.preset=null"),
    (["data.lexicon=0"], "data.lexicon = 0.0", "(0, 1]"),
    (["data.lexicon=1.5"], "data.lexicon = 1.5", "(0, 1]"),
    (["data.max_words=5"], "data.max_words = 5", ">= 8"),
    (["model.init=xavier"], "model.init = 'xavier' is not allowed", "scaled, uniform"),
    (["model.init=uniform", "model.init_range=0"], "model.init_range = 0.0", "(0, 1]"),
    (["model.plain_output=true"], "model.plain_output = True", "deep_output: false"),
    (["model.plain_output=true", "model.deep_output=false", "model.tie_embeddings=true", "model.emb=32"],
     "model.tie_embeddings = True", "model.emb = model.hidden"),
    (["model.cell=gru", "model.context_scale=true"], "model.context_scale", "option of model.srnmt.context_scale"),
    (["model.cell=srnmt", "model.memory_layers=middle"], "model.memory_layers", "option of model.fsmn.memory_layers"),
    (["model.cell=fsmn", "model.fsmn.memory_layers=middle", "model.enc_layers=2"],
     "model.fsmn.memory_layers = 'middle'", "enc_layers >= 3"),
    (["model.cell=fsmn", "model.fsmn.memory_lr_scale=0"], "model.fsmn.memory_lr_scale = 0.0", "(0, 1]"),
    (["model.cell=fsmn", "model.memory_lr_scale=0"], "model.fsmn.memory_lr_scale = 0.0", "(0, 1]"),
]


@pytest.mark.parametrize("overrides,what,fix", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_values_name_key_value_and_fix(overrides, what, fix):
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    message = str(info.value)
    assert "\n" not in message and what in message and fix in message


def test_malformed_yaml_and_missing_file_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {cell: [gru\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: malformed YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match=r"nope\.yaml: config file not found"):
        load_config(tmp_path / "nope.yaml")
    top = tmp_path / "list.yaml"
    top.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(top)


def test_set_without_equals_is_explained():
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_override("model.cell")


@pytest.mark.parametrize("overrides", [["model.cell=atr", "model.gates=coupled", "model.hidden=32"],
                                       ["model.cell=gru", "model.decoder_style=bahdanau", "model.context_gate=both"],
                                       ["model.cell=srnmt"], ["model.cell=fsmn", "model.input_window=2"]])
def test_resolved_config_round_trips(overrides):
    """Checkpoints store the resolved config; reading it back gives the same config."""
    cfg = load_config(None, overrides)
    assert config_from_dict(cfg.to_dict()) == cfg


def test_files_given_on_the_command_line_replace_the_default_synthetic_corpus():
    from nmt.train import DEFAULT_CONFIG

    cfg = load_config(DEFAULT_CONFIG, ["data.train=[a.en, a.de]", "data.valid=[b.en, b.de]", "data.test=[c.en, c.de]"])
    assert cfg.data.preset is None and cfg.data.test == ["c.en", "c.de"]


def test_tree_changes_names_every_changed_dotted_key():
    from nmt.typed_config import tree_changes

    old = {"budget": {"epochs": 3}, "seeds": 2, "model": {"cell": "gru"}}
    new = {"budget": {"epochs": 5}, "seeds": 2, "model": {"cell": "gru", "hidden": 64}}
    assert tree_changes(old, new) == ["budget.epochs: 3 -> 5", "model.hidden: None -> 64"]
    assert tree_changes(old, old) == []


def test_unit_options_live_under_the_unit_and_the_old_flat_form_still_reads():
    nested = load_config(None, ["model.cell=atr", "model.atr.gates=coupled", "model.atr.candidate=tanh"])
    flat = load_config(None, ["model.cell=atr", "model.gates=coupled", "model.candidate=tanh"])
    assert nested == flat and nested.model.options.gates == "coupled"
    tree = nested.to_dict()
    assert tree["model"]["atr"] == {"gates": "coupled", "forget_sign": "input_minus_history", "candidate": "tanh"}
    assert "gates" not in tree["model"] and "options" not in tree["model"]
    assert config_from_dict(tree) == nested  # the YAML shape reads back
    assert "ran" not in load_config(None, ["model.cell=gru"]).to_dict()["model"]  # a unit without options: no section
    assert load_config(None, ["model.cell=ran", "model.ran_output=identity"]).model.options.output == "identity"


def test_a_config_written_by_an_older_version_reads_as_the_same_model():
    # older versions wrote every unit's option flat, null (or false) for the units that lack it
    old = {"model": {"cell": "srnmt", "highway": False, "context_scale": True, "peephole": False, "gates": None,
                     "memory": None, "order": None, "ran_output": None, "decoder_style": None}}
    cfg = config_from_dict(old)
    assert (cfg.model.options.highway, cfg.model.options.context_scale) == (False, True)
    assert cfg == load_config(None, ["model.cell=srnmt", "model.srnmt.highway=false",
                                     "model.srnmt.context_scale=true"])


def test_print_config_and_the_unit_listing_show_each_options_help(capsys):
    from nmt.train import main as train_main
    from nmt.units import main as units_main

    assert train_main(["--print-config", "--set", "model.cell=fsmn", "--set", "model.fsmn.order=25"]) == 0
    out = capsys.readouterr().out
    assert "  fsmn:\n    memory: scalar\n    order: 25\n" in out  # the YAML shape: options under the unit
    assert "#   model.fsmn.order = 10: memory order N: the block reads taps 0..N" in out  # default and help
    assert units_main() == 0
    listing = capsys.readouterr().out
    assert "model.atr.gates = 'twin'" in listing and listing.startswith("lstm (LSTM)")
