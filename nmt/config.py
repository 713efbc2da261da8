"""Typed configuration of one NMT run: data, model, train and decode sections.

Each section is a dataclass whose fields map one-to-one onto the YAML keys (``model.cell``,
``train.lr``, ...); bounds and help sit next to each field. A unit's own options live with the
unit (``nmt/cells/<unit>.py``) and are set under ``model.<unit>`` (``model.atr.gates``); the old
flat form (``model.gates``) is still read. ``load_config`` reads YAML, applies ``--set
key=value`` overrides, and resolves the unit's defaults (fields left at ``None`` mean "the
unit's default"); every problem becomes a one-line ``ConfigError`` that names the file, the key,
the value and the fix. The generic typed-YAML machinery is ``nmt.typed_config``.
"""

from __future__ import annotations

import copy
import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from nmt.errors import ConfigError
from nmt.typed_config import (
    apply_overrides,
    build_dataclass,
    check_bounds,
    read_yaml,
    setting,
    suggest,
)
from nmt.units import Unit, units

GATE_INPUTS = ("state", "source", "prev_word")
# The synthetic preset's subword vocabulary when data.spm.vocab_size is left out: small enough for the small
# corpora the preset makes (3,000 pairs of a tenth of the lexicon allow 2,521 pieces), where 8000, a file
# corpus's default, is refused when SentencePiece trains.
SYNTHETIC_VOCAB_SIZE = 2000

@dataclass
class SpmConfig:
    """SentencePiece subword model trained on the training side."""

    model_type: Literal["bpe", "unigram"] = "bpe"
    # 8000 for a file corpus; the synthetic preset's default is SYNTHETIC_VOCAB_SIZE (see resolve)
    vocab_size: int = setting(8000, "subword vocabulary size", ge=8)
    joint: bool = True  # one model for both languages (allows tied src/tgt vocabularies)
    character_coverage: float = 1.0

@dataclass
class DataConfig:
    """Where the parallel text comes from and how it is cut into subwords."""

    preset: Literal["synthetic"] | None = "synthetic"
    size: int = setting(20000, "synthetic: number of training pairs", ge=1)
    seed: int = 1  # synthetic: same seed, same corpus
    valid_size: int = setting(500, "synthetic: pairs in valid", ge=1)
    test_size: int = setting(500, "synthetic: pairs in test", ge=1)
    lexicon: float = setting(1.0, "synthetic: scale of the lexicon (0.25 = a quarter of the words, same grammar)",
                             gt=0.0, le=1.0, note=": the share of the full synthetic lexicon")
    max_words: int = setting(60, "synthetic: longest source sentence in words", ge=8)
    train: list[str] | None = None  # [SRC, TGT] plain text, optionally .gz
    valid: list[str] | None = None
    test: list[str] | None = None
    spm: SpmConfig = field(default_factory=SpmConfig)
    max_len: int = setting(100, "training pairs longer than this (subwords, either side) are dropped", ge=2)
    limit: int | None = setting(None, "use only the first N training pairs of a file corpus", ge=1)
    cache_dir: str | None = None  # SentencePiece models and synthetic corpora; default ~/.cache/rnmt


# the trainer's stop_reason for each train.early_stop rule (patience, plateau)
EARLY_STOP_REASONS = ("early stopping", "plateau")


@dataclass
class TrainConfig:
    """Optimisation, schedules, budgets and seeding."""

    lr: float = setting(1e-3, "learning rate", gt=0.0)
    # adam: Adam with torch's defaults; sgd: plain SGD, no momentum (the FSMN paper's, lr 0.1)
    optimizer: Literal["adam", "sgd"] = "adam"
    batch_tokens: int = setting(4096, "target tokens per batch (padding included)", ge=1)
    # Budgets: training ends at the first one used up. Counted, never timed, so a seed gives the
    # same model on any machine.
    max_epochs: int = setting(10, "passes over the training data", ge=1)
    max_steps: int | None = setting(None, "optimizer updates", ge=1, note=" (or leave it out: no such budget)")
    max_tokens: int | None = setting(None, "training target tokens seen", ge=1, note=" (or leave it out: no such budget)")
    # A safety cap on wall time, not a budget: a run it stops ends with status "truncated".
    max_minutes: float | None = setting(None, "wall-time cap", gt=0.0, note=" (or leave it out: no wall-time cap)")
    clip: float = setting(5.0, "gradient norm clipping; 0 = off", ge=0.0, note=" (0 turns clipping off)")
    lr_decay: Literal["none", "halve", "plateau"] = "plateau"
    decay_factor: float = setting(0.5, "lr decay factor", gt=0.0, lt=1.0)
    plateau_patience: int = setting(1, "plateau: epochs without improvement before the lr is decayed", ge=1)
    min_lr: float = 1e-5
    patience: int = setting(4, "early stopping: epochs without improvement; 0 = never stop early", ge=0,
                            note=" (0 = never stop early)")
    min_epochs: int = setting(0, "early stopping: never before this many epochs have been trained; 0 = from the "
                                 "first", ge=0, note=" (0 = early stopping may act from the first epoch)")
    # patience: stop after `patience` epochs without improvement (0: never); plateau: stop once the
    # validation curve (train.valid_metric) is on a plateau by nmt.plateau's test, the test that marks
    # a study's rows: then max_epochs is a safety net, and a run it ends was still improving
    early_stop: Literal["patience", "plateau"] = "patience"
    patience_per_stage: bool = setting(
        False, "plateau: each lr stage trains to convergence (the SR-NMT paper's restart after convergence): "
               "a restart from the best epoch starts the early-stopping count afresh, and training stops only in "
               "the stage at min_lr; false counts epochs without improvement across restarts")
    valid_metric: Literal["bleu", "ppl"] = "bleu"
    label_smoothing: float = setting(0.0, ge=0.0, lt=1.0)
    seed: int = 1
    threads: int | None = setting(None, "torch intra-op threads; default: torch's choice", ge=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # How the CPU computes, not what is trained (nmt.numerics): portable pins the kernels (pinning 2) so a
    # seed gives the same model on Intel and AMD CPUs with AVX2; native lets each CPU use its own, faster ones. Kept
    # out of the trial key, like the threads and the device.
    numerics: Literal["portable", "native"] = "portable"


@dataclass
class DecodeConfig:
    """Search used for the test set and ``nmt.translate``."""

    beam: int = setting(5, ge=1, le=1000)
    length_penalty: float = setting(1.0, "alpha: rank finished hypotheses by logprob / length**alpha", ge=0.0, le=10.0)
    max_len_ratio: float = setting(2.0, "stop at ratio * source length + 10", gt=0.0)
    batch_size: int = setting(64, "sentences per decoding batch", ge=1)
    valid_beam: int = setting(1, "per-epoch valid BLEU (1 = greedy, fast)", ge=1, le=1000)


@dataclass
class ModelConfig:
    """The attentional encoder-decoder. ``None`` means "the default of this unit"."""

    cell: str = setting("gru", "the recurrent unit (python -m nmt.units lists them)")
    hidden: int = setting(256, "state size", ge=1)
    emb: int | None = setting(None, "embedding size; default: hidden", ge=1)
    enc_layers: int = setting(1, ge=1)
    dec_layers: int = setting(1, ge=1)
    bidirectional: bool = True
    dir_size: Literal["half", "full"] = setting("half", "half: H/2 per direction; full: H each, projected to H")
    layer_connection: Literal["none", "residual", "highway"] = setting("none", "between stacked layers")
    dropout: float = setting(0.2, "before every parameter matrix", ge=0.0, lt=1.0)
    attention_dropout: bool = setting(False, "dropout before the attention's query and key matrices too (the SR-NMT "
                                             "paper's dropout before every parameter matrix); false leaves the "
                                             "attention's inputs undropped")
    attention: Literal["mlp", "general", "dot"] | None = setting(None, "default: mlp, or the unit's paper's")
    # srnmt: LN after every parameter matrix (unit and attention), default on.
    # Other units: LN inside the attention only, default off.
    layer_norm: bool | None = setting(None, "layer normalisation (default: the unit's paper's)")
    multi_attention: bool | None = setting(None, "an attention in every decoder layer, not the top one only")
    # Units on the step-by-step decoder: luong = attend with the new state after the recurrence;
    # bahdanau = attend with the previous state, context enters the recurrence (RNNsearch);
    # conditional = two cells per attending layer, the attention between them (ATR's systems, Nematus).
    decoder_style: Literal["luong", "bahdanau", "conditional"] | None = setting(
        None, "step-by-step decoder: luong, bahdanau or conditional")
    input_feeding: bool | None = setting(None, "step-by-step decoder: feed the previous attentional output")
    context_gate: Literal["none", "source", "target", "both"] = setting("none", "Tu et al. 2017")
    gate_inputs: list[str] | None = setting(None, "subset of state, source, prev_word (default: all three)")
    gate_granularity: Literal["element", "scalar"] | None = setting(None, "default: element")
    deep_output: bool = setting(True, "output layer sees [t_i; c_i; e(y_{i-1})]")
    # Softmax straight over the top decoder state (SR-NMT's "standard softmax layer"): removes the
    # output layer tanh(W_o [...]); needs deep_output: false.
    plain_output: bool = False
    # scaled: U(+-1/sqrt(fan_in)) matrices, N(0, 1/emb) embeddings read times sqrt(emb) (ours);
    # uniform: every weight, bias and embedding U(-init_range, init_range), embeddings read as they
    # are (the ATR and Context Gates papers, init_range 0.08); he: scaled, but the matrices feeding
    # each ReLU of a ReLU stack (FSMN) U(+-sqrt(6/fan_in)), fan_in summed over the matrices one ReLU
    # adds up, and their biases 0 (the He uniform initialisation: the signal keeps its scale through
    # the stack, where scaled shrinks it about 6x a layer). Layer-norm gains and FSMN taps keep
    # their starting values in all three.
    init: Literal["scaled", "uniform", "he"] = "scaled"
    init_range: float = setting(0.08, gt=0.0, le=1.0, note=", e.g. 0.08 (the ATR and Context Gates papers)")
    tie_embeddings: bool = setting(False, "target input and output embeddings share weights")
    # The unit's own options (the dataclass its module declares), written as model.<cell> in YAML.
    options: Any = field(default=None, metadata={"yaml": False})

    @property
    def unit(self) -> Unit:
        return units()[self.cell]


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict[str, Any]:
        """The YAML shape: the unit's options under ``model.<cell>`` (left out when it has none)."""
        tree = dataclasses.asdict(self)
        options = tree["model"].pop("options")
        if options:
            tree["model"][self.model.cell] = options
        return tree


# ---------------------------------------------------------------------------
# loading


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Read a YAML config (or start from defaults), apply overrides, validate."""
    tree = read_yaml(path) if path is not None else {}
    source = str(path) if path is not None else "config"
    if overrides:
        tree = apply_overrides(tree, overrides)
    return config_from_dict(tree, source=source)


def config_from_dict(tree: dict, source: str = "config") -> Config:
    """Build and validate a ``Config`` from a nested dict (YAML shape)."""
    if not isinstance(tree, dict):
        raise ConfigError(f"{source}: expected a mapping with sections data/model/train/decode")
    tree, unit_tree = split_unit_options(tree, source)
    explicit: set[str] = set()
    cfg = build_dataclass(Config, tree, source, prefix="", explicit=explicit)
    unit = cfg.model.unit
    cfg.model.options = build_dataclass(unit.options, unit_tree, source, prefix=f"model.{unit.name}.",
                                        explicit=explicit)
    resolve(cfg, explicit, source)
    check_bounds(cfg, source, prefix="")
    check_bounds(cfg.model.options, source, prefix=f"model.{unit.name}.")
    validate(cfg, source)
    return cfg


def find_unit(cell: Any, source: str) -> Unit:
    known = units()
    if not isinstance(cell, str) or cell not in known:
        names = list(known)
        raise ConfigError(f"{source}: model.cell = {cell!r} is not a known cell; choose one of "
                          f"{', '.join(names)}{suggest(str(cell), names, '', quote=True)}")
    return known[cell]


def split_unit_options(tree: dict, source: str) -> tuple[dict, dict]:
    """(the tree without unit options, the chosen unit's options): ``model.<cell>`` plus the old
    flat keys (``model.gates`` -> ``model.atr.gates``). Flat keys at the values old versions
    wrote for options a unit lacks (null, false) are dropped; any other value of an option the
    chosen unit lacks is an error that names the unit it belongs to."""
    model = tree.get("model")
    if not isinstance(model, dict):
        return tree, {}  # no model section, or a bad one that build_dataclass reports
    model = dict(model)
    unit = find_unit(model.get("cell", ModelConfig.cell), source)
    known = units()
    sections = {name: model.pop(name) for name in list(model) if name in known}
    for name, value in sections.items():
        if name != unit.name and value:
            raise ConfigError(f"{source}: model.{name} holds options of the {name} unit, but model.cell is "
                              f"{unit.name!r}; remove model.{name} or set model.cell: {name}")
    own = sections.get(unit.name) or {}
    if not isinstance(own, dict):
        raise ConfigError(f"{source}: model.{unit.name} must be a section (a mapping) of the {unit.name} unit's "
                          f"options, got {own!r}")
    own = dict(own)
    generic = _generic_model_keys()
    for key in [k for k in model if k not in generic]:
        owners = {u.name: u.option_for(key) for u in known.values() if u.option_for(key) is not None}
        if not owners:
            continue  # an unknown key: build_dataclass names it with a suggestion
        value = model.pop(key)
        if unit.name in owners:
            new = owners[unit.name]
            if new in own:
                raise ConfigError(f"{source}: model.{key} and model.{unit.name}.{new} are both set; "
                                  f"keep model.{unit.name}.{new}")
            own[new] = value
        elif value is not None and value is not False:
            where = ", ".join(f"model.{name}.{option}" for name, option in owners.items())
            raise ConfigError(f"{source}: model.{key} = {value!r} does not exist for cell {unit.name!r} "
                              f"(it is an option of {where}); remove it")
    return {**tree, "model": model}, own


def _generic_model_keys() -> set[str]:
    """The model keys every unit has (the unit's own options excluded)."""
    return {f.name for f in dataclasses.fields(ModelConfig) if f.metadata.get("yaml", True)}


def model_option(model: ModelConfig, key: str) -> tuple[Any, Any] | None:
    """(type, value) of a dotted model key in a resolved config: a generic one (model.layer_norm),
    the unit's own (model.srnmt.highway) or one in the old flat form (model.highway); None when
    the model has no such key."""
    parts = key.split(".")
    unit = model.unit
    if parts[0] != "model" or len(parts) not in (2, 3):
        return None
    if len(parts) == 2 and parts[1] in _generic_model_keys():
        return typing.get_type_hints(ModelConfig)[parts[1]], getattr(model, parts[1])
    if len(parts) == 3:
        name = parts[2] if parts[1] == unit.name and parts[2] in unit.option_names() else None
    else:
        name = unit.option_for(parts[1])
    if name is None:
        return None
    return typing.get_type_hints(unit.options)[name], getattr(model.options, name)


# ---------------------------------------------------------------------------
# the unit's defaults and cross-field validation


def resolve(cfg: Config, explicit: set[str], source: str) -> None:
    """Fill ``None`` fields with the unit's (its paper's) defaults, then the generic ones;
    reject options the unit's decoder lacks; give the synthetic preset its own default vocabulary."""
    m = cfg.model
    unit = m.unit
    for key, value in unit.defaults.items():
        if getattr(m, key) is None:
            setattr(m, key, value)
    if m.attention is None:
        m.attention = "mlp"
    if m.layer_norm is None:
        m.layer_norm = False
    if m.multi_attention is None:
        m.multi_attention = False
    stepping = [u.name for u in units().values() if u.recurrent_decoder]
    if unit.recurrent_decoder:
        if m.decoder_style is None:
            m.decoder_style = "luong"
        if m.input_feeding is None:
            m.input_feeding = m.decoder_style == "luong"
    else:
        if m.decoder_style is not None:
            raise ConfigError(f"{source}: model.decoder_style = {m.decoder_style!r} does not exist for cell "
                              f"{m.cell!r} (it applies to {', '.join(stepping)}); remove it")
        if m.input_feeding:
            raise ConfigError(
                f"{source}: model.input_feeding = true needs a step-by-step decoder "
                f"({', '.join(stepping)}); {m.cell} decodes all positions at once. Remove it"
            )
        m.input_feeding = False
    if m.emb is None:
        m.emb = m.hidden
    if m.context_gate == "none":
        for key in ("gate_inputs", "gate_granularity"):
            if getattr(m, key) is not None:
                raise ConfigError(f"{source}: model.{key} = {getattr(m, key)!r} has no gate to configure "
                                  "(model.context_gate is none); remove it or choose a context_gate")
    else:
        if m.gate_inputs is None:
            m.gate_inputs = list(GATE_INPUTS)
        if m.gate_granularity is None:
            m.gate_granularity = "element"
    d = cfg.data
    files = [key for key in ("train", "valid", "test") if getattr(d, key)]
    if d.preset is not None and files:
        if "data.preset" in explicit:
            raise ConfigError(f"{source}: data.preset = {d.preset!r} and data.{files[0]} are both set; "
                              "set data.preset: null (--set data.preset=null) to use the files")
        d.preset = None  # giving files means "use these files"
    if d.preset == "synthetic" and "data.spm.vocab_size" not in explicit:
        d.spm.vocab_size = SYNTHETIC_VOCAB_SIZE


def validate(cfg: Config, source: str) -> None:
    """The checks that involve more than one field (each field's bounds are checked already)."""
    m, t, d = cfg.model, cfg.train, cfg.data

    def fail(key: str, value: Any, why: str) -> None:
        raise ConfigError(f"{source}: {key} = {value!r}: {why}")

    if m.plain_output:
        if m.deep_output:
            fail("model.plain_output", m.plain_output, "the softmax reads the top state, not a deep output; "
                 "set model.deep_output: false too")
        if m.tie_embeddings and m.emb != m.hidden:
            fail("model.tie_embeddings", m.tie_embeddings, f"with plain_output the softmax reads the {m.hidden}-wide "
                 f"state, so tied embeddings need model.emb = model.hidden (got {m.emb})")
    if m.bidirectional and m.dir_size == "half" and m.hidden % 2:
        fail("model.hidden", m.hidden, "must be even with bidirectional encoders of dir_size half")
    if m.init == "he" and not m.unit.relu_layers:
        relu = [u.name for u in units().values() if u.relu_layers]
        fail("model.init", m.init, f"initialises the matrices that feed a ReLU stack, which only {', '.join(relu)} "
             f"has; use scaled or uniform for {m.cell}")
    if m.unit.validate is not None:
        m.unit.validate(m, fail)
    if m.context_gate != "none":
        bad_inputs = [g for g in m.gate_inputs if g not in GATE_INPUTS]
        if bad_inputs:
            fail("model.gate_inputs", m.gate_inputs,
                 f"unknown input {bad_inputs[0]!r}; use a subset of {', '.join(GATE_INPUTS)}")
        if len(set(m.gate_inputs)) != len(m.gate_inputs):
            fail("model.gate_inputs", m.gate_inputs, "lists an input twice; name each of state, source, prev_word once")
        if not (m.unit.recurrent_decoder and m.unit.recurrent_matrix):
            gated = [u.name for u in units().values() if u.recurrent_decoder and u.recurrent_matrix]
            fail("model.context_gate", m.context_gate,
                 f"context gates act on the recurrent update of {', '.join(gated)}; "
                 f"{m.cell} has none. Use context_gate: none")
        if m.decoder_style != "bahdanau":
            fail("model.context_gate", m.context_gate,
                 "context gates gate the source context inside the state update; set model.decoder_style: bahdanau")
        if not m.gate_inputs:
            fail("model.gate_inputs", m.gate_inputs, "a context gate needs at least one input")
    if not 0.0 <= t.min_lr <= t.lr:
        fail("train.min_lr", t.min_lr, f"must be between 0 and train.lr ({t.lr})")
    if t.min_epochs > t.max_epochs:
        fail("train.min_epochs", t.min_epochs, f"is more than train.max_epochs ({t.max_epochs}), so early stopping "
             f"could never act; lower it, or set train.patience: 0 to train every epoch")
    if t.patience_per_stage and (t.lr_decay != "plateau" or not t.patience):
        fail("train.patience_per_stage", t.patience_per_stage,
             "counts early stopping per lr stage of the plateau schedule; set train.lr_decay: plateau and "
             "train.patience >= 1, or leave it false")
    if d.preset is None:
        for split in ("train", "valid", "test"):
            paths = getattr(d, split)
            if paths is None:
                fail(f"data.{split}", None, "give [SOURCE_FILE, TARGET_FILE] or use data.preset: synthetic")
            if len(paths) != 2:
                fail(f"data.{split}", paths, "must be two paths: [SOURCE_FILE, TARGET_FILE]")


def smoke(cfg: Config) -> Config:
    """A shrunken copy of ``cfg`` (tiny data, model and epochs) that keeps every flag."""
    cfg = copy.deepcopy(cfg)
    d, m, t, dec = cfg.data, cfg.model, cfg.train, cfg.decode
    d.size, d.valid_size, d.test_size = min(d.size, 400), min(d.valid_size, 40), min(d.test_size, 40)
    d.limit = min(d.limit or 400, 400)
    d.spm.vocab_size = min(d.spm.vocab_size, 300)
    d.max_len = min(d.max_len, 60)
    m.hidden = min(m.hidden, 32)
    m.emb = min(m.emb, 32)
    if m.unit.shrink is not None:
        m.options = m.unit.shrink(m.options)
    t.max_epochs = min(t.max_epochs, 2)
    t.min_epochs = min(t.min_epochs, t.max_epochs)
    t.batch_tokens = min(t.batch_tokens, 1200)
    dec.beam = min(dec.beam, 3)
    return cfg


def config_yaml(cfg: Config) -> str:
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)


def dump_config(cfg: Config, path: str | Path) -> None:
    Path(path).write_text(config_yaml(cfg), encoding="utf-8")
