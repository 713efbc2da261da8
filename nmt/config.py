"""Typed configuration of one NMT run: data, model, train and decode sections.

Each section is a dataclass whose fields map one-to-one onto the YAML keys
(``model.cell``, ``train.lr``, ...). ``load_config`` reads YAML with a safe
loader, applies ``--set key=value`` overrides, rejects unknown keys (with the
closest valid key as a suggestion) and badly typed or out-of-range values, and
resolves the per-cell defaults (fields left at ``None`` mean "the cell's
default"). Every problem becomes a one-line ``ConfigError`` that names the
file, the key, the value and the fix.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from nmt.errors import ConfigError
from nmt.yaml_input import load_yaml

CELLS = ("lstm", "gru", "rnn", "ran", "atr", "sru", "srnmt", "fsmn")
STEP_CELLS = ("lstm", "gru", "rnn", "ran", "atr", "sru")  # decoded step by step in training too
RECURRENT_MATRIX_CELLS = ("lstm", "gru", "rnn", "ran", "atr")  # have a matmul on h_{t-1}
GATE_INPUTS = ("state", "source", "prev_word")


@dataclass
class SpmConfig:
    """SentencePiece subword model trained on the training side."""

    model_type: Literal["bpe", "unigram"] = "bpe"
    vocab_size: int = 8000
    joint: bool = True  # one model for both languages (allows tied src/tgt vocabularies)
    character_coverage: float = 1.0


@dataclass
class DataConfig:
    """Where the parallel text comes from and how it is cut into subwords."""

    preset: Literal["synthetic"] | None = "synthetic"
    size: int = 20000  # synthetic: number of training pairs
    seed: int = 1  # synthetic: same seed, same corpus
    valid_size: int = 500  # synthetic: pairs in valid and in test
    test_size: int = 500
    lexicon: float = 1.0  # synthetic: scale of the lexicon (0.25 = a quarter of the words, same grammar)
    max_words: int = 60  # synthetic: longest source sentence in words
    train: list[str] | None = None  # [SRC, TGT] plain text, optionally .gz
    valid: list[str] | None = None
    test: list[str] | None = None
    spm: SpmConfig = field(default_factory=SpmConfig)
    max_len: int = 100  # training pairs longer than this (subwords, either side) are dropped
    limit: int | None = None  # use only the first N training pairs of a file corpus
    cache_dir: str | None = None  # SentencePiece models and synthetic corpora; default ~/.cache/rnmt


@dataclass
class ModelConfig:
    """The attentional encoder-decoder. ``None`` means "the default of this cell"."""

    cell: str = "gru"
    hidden: int = 256
    emb: int | None = None  # embedding size; default: hidden
    enc_layers: int = 1
    dec_layers: int = 1
    bidirectional: bool = True
    dir_size: Literal["half", "full"] = "half"  # half: H/2 per direction; full: H each, projected to H
    layer_connection: Literal["none", "residual", "highway"] = "none"  # between stacked layers
    dropout: float = 0.2  # before every parameter matrix
    attention: Literal["mlp", "general", "dot"] | None = None  # default: mlp (fsmn: general, its paper's)
    # srnmt: LN after every parameter matrix (unit and attention), default on.
    # Other cells: LN inside the attention only, default off.
    layer_norm: bool | None = None
    # An attention in every decoder layer (srnmt default) instead of the top one only.
    multi_attention: bool | None = None
    # srnmt only: the unit's highway gate z (off: h = [h>; h<], s = o).
    highway: bool | None = None
    # Step cells: luong = attend with the new state after the recurrence;
    # bahdanau = attend with the previous state, context enters the recurrence (RNNsearch).
    decoder_style: Literal["luong", "bahdanau"] | None = None
    input_feeding: bool | None = None  # step cells: feed the previous attentional output
    context_gate: Literal["none", "source", "target", "both"] = "none"  # Tu et al. 2017
    gate_inputs: list[str] | None = None  # subset of state, source, prev_word (default: all three)
    gate_granularity: Literal["element", "scalar"] | None = None  # default: element
    deep_output: bool = True  # output layer sees [t_i; c_i; e(y_{i-1})]
    # Softmax straight over the top decoder state (SR-NMT's "standard softmax layer"): removes the
    # output layer tanh(W_o [...]); needs deep_output: false.
    plain_output: bool = False
    # scaled: U(+-1/sqrt(fan_in)) matrices, N(0, 1/emb) embeddings read times sqrt(emb) (ours);
    # uniform: every weight, bias and embedding U(-init_range, init_range), embeddings read as they
    # are (the ATR and Context Gates papers, init_range 0.08). Layer-norm gains and FSMN taps keep
    # their starting values in both.
    init: Literal["scaled", "uniform"] = "scaled"
    init_range: float = 0.08
    tie_embeddings: bool = False  # target input and output embeddings share weights
    peephole: bool = False  # lstm: diagonal c->gate links; sru: v2 gates with v*c_{t-1}
    gates: Literal["twin", "coupled", "independent"] | None = None  # atr
    forget_sign: Literal["input_minus_history", "history_minus_input"] | None = None  # atr
    candidate: Literal["linear", "tanh"] | None = None  # atr
    ran_output: Literal["tanh", "identity"] | None = None  # ran: h = tanh(c) or c
    memory: Literal["scalar", "vector"] | None = None  # fsmn
    order: int | None = None  # fsmn memory order N (taps 0..N)
    input_window: int | None = None  # fsmn: words per input position (1 or 2)
    # fsmn: which encoder layers have a memory block; middle = all but the first and the last
    # (the paper's 4-layer encoder has them in layers 2 and 3); the others are plain ReLU layers.
    memory_layers: Literal["all", "middle"] | None = None
    memory_lr_scale: float | None = None  # fsmn: learning rate of the memory taps / the rest (paper 0.01)
    # srnmt: divide every attention context by sqrt(d) (the paper's c_i = attn(s~_i, H) / sqrt(d)).
    # LN(c_i W_c + b_c) would cancel the factor without the bias b_c; with it, the factor matters.
    context_scale: bool | None = None


@dataclass
class TrainConfig:
    """Optimisation, schedules, budgets and seeding."""

    lr: float = 1e-3
    batch_tokens: int = 4096  # target tokens per batch (padding included)
    # Budgets: training ends at the first one used up. Counted, never timed, so a seed gives the
    # same model on any machine.
    max_epochs: int = 10  # passes over the training data
    max_steps: int | None = None  # optimizer updates
    max_tokens: int | None = None  # training target tokens seen
    # A safety cap on wall time, not a budget: a run it stops ends with status "truncated".
    max_minutes: float | None = None
    clip: float = 5.0  # gradient norm clipping; 0 = off
    lr_decay: Literal["none", "halve", "plateau"] = "plateau"
    decay_factor: float = 0.5
    plateau_patience: int = 1  # plateau: epochs without improvement before the lr is decayed
    min_lr: float = 1e-5
    patience: int = 4  # early stopping: epochs without improvement; 0 = never stop early
    valid_metric: Literal["bleu", "ppl"] = "bleu"
    label_smoothing: float = 0.0
    seed: int = 1
    threads: int | None = None  # torch intra-op threads; default: torch's choice
    device: Literal["auto", "cpu", "cuda"] = "auto"


@dataclass
class DecodeConfig:
    """Search used for the test set and ``nmt.translate``."""

    beam: int = 5
    length_penalty: float = 1.0  # rank finished hypotheses by logprob / length**alpha
    max_len_ratio: float = 2.0  # stop at ratio * source length + 10
    batch_size: int = 64  # sentences per decoding batch
    valid_beam: int = 1  # per-epoch valid BLEU (1 = greedy, fast)


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------
# loading and overriding


def flatten(tree: dict, prefix: str = "") -> dict[str, Any]:
    """A nested config tree as {"section.key": value} (dotted keys, as --set takes them)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def tree_changes(old: dict, new: dict) -> list[str]:
    """'key: old -> new' for every dotted key whose value differs (missing keys count as None)."""
    a, b = flatten(old), flatten(new)
    return [f"{key}: {a.get(key)!r} -> {b.get(key)!r}" for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]


def parse_override(text: str) -> tuple[str, Any]:
    """``"model.hidden=512"`` -> ``("model.hidden", 512)``; the value is YAML."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE, e.g. --set model.hidden=512")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"--set {text!r}: empty key; expected KEY=VALUE, e.g. --set train.lr=0.001")
    value = load_yaml(raw, f"--set {text!r}") if raw.strip() else None
    return key, value


def apply_overrides(tree: dict, overrides: list[str] | list[tuple[str, Any]], source: str = "--set") -> dict:
    """Return a copy of ``tree`` with dotted-key overrides applied."""
    tree = copy.deepcopy(tree)
    for item in overrides:
        key, value = parse_override(item) if isinstance(item, str) else item
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"{source}: {key}: {part!r} is a value, not a section")
            node = child
        node[parts[-1]] = value
    return tree


def read_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found; check the path")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read config ({one_line(err)})") from None
    tree = load_yaml(text, str(path))
    if tree is None:
        return {}
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a mapping with sections data/model/train/decode at the top")
    return tree


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
    explicit: set[str] = set()
    cfg = build_dataclass(Config, tree, source, prefix="", explicit=explicit)
    resolve(cfg, explicit, source)
    validate(cfg, source)
    return cfg


def build_dataclass(cls, tree: dict, source: str, prefix: str, explicit: set[str]):
    """``cls(**tree)`` with every key and value checked; ``explicit`` collects the keys given."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(f"{source}: unknown key {dotted!r}{suggest(key, names, prefix)}")
        hint = hints[key]
        section = _section_type(hint)
        if section is not None and (isinstance(value, dict) or (value is None and dataclasses.is_dataclass(hint))):
            kwargs[key] = build_dataclass(section, value or {}, source, prefix=f"{dotted}.", explicit=explicit)
        elif section is not None and dataclasses.is_dataclass(hint):
            raise ConfigError(f"{source}: {dotted} must be a section (a mapping), got {value!r}")
        else:
            kwargs[key] = check_value(value, hint, source, dotted)
            explicit.add(dotted)
    return cls(**kwargs)


def _section_type(hint: Any):
    """The dataclass a key holds (directly or as an option of a union), if any."""
    if dataclasses.is_dataclass(hint):
        return hint
    for option in typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else ():
        if dataclasses.is_dataclass(option):
            return option
    return None


def check_value(value: Any, hint: Any, source: str, key: str) -> Any:
    """Return ``value`` coerced to ``hint`` or raise a ConfigError naming the key."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return check_value(value, option, source, key)
            except ConfigError as err:
                errors.append(err)
        raise errors[0]
    if origin is Literal:
        choices = typing.get_args(hint)
        if value not in choices:
            names = ", ".join(str(c) for c in choices)
            hint_text = suggest(str(value), [str(c) for c in choices], "", quote=True)
            raise ConfigError(f"{source}: {key} = {value!r} is not allowed; choose one of {names}{hint_text}")
        return value
    if hint is dict or origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: {key} = {value!r} must be a mapping of keys to values")
        return value
    if origin is list:
        (item_type,) = typing.get_args(hint)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise ConfigError(f"{source}: {key} = {value!r} must be a list, e.g. [a, b]")
        return [check_value(item, item_type, source, f"{key}[{i}]") for i, item in enumerate(value)]
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: {key} = {value!r} must be true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{source}: {key} = {value!r} must be an integer")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            if isinstance(value, str):
                try:  # YAML 1.1 reads "3e-4" (no dot) as a string
                    return float(value)
                except ValueError:
                    pass
            raise ConfigError(f"{source}: {key} = {value!r} must be a number")
        return float(value)
    if hint is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ConfigError(f"{source}: {key} = {value!r} must be a string")
        return str(value)
    raise TypeError(f"unsupported config type {hint} for {key}")


def suggest(word: str, choices: list[str], prefix: str, quote: bool = False) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.5)
    if not close:
        if quote:
            return ""
        return f"; valid keys here: {', '.join(prefix + c for c in choices)}"
    return f" (did you mean {prefix + close[0]!r}?)"


def one_line(err: Exception) -> str:
    return " ".join(str(err).split())


# ---------------------------------------------------------------------------
# per-cell defaults and cross-field validation

# key -> (cells it applies to, default for those cells, what it does)
CELL_OPTIONS: dict[str, tuple[tuple[str, ...], Any]] = {
    "highway": (("srnmt",), True),
    "gates": (("atr",), "twin"),
    "forget_sign": (("atr",), "input_minus_history"),
    "candidate": (("atr",), "linear"),
    "ran_output": (("ran",), "tanh"),
    "memory": (("fsmn",), "scalar"),
    "order": (("fsmn",), 10),
    "input_window": (("fsmn",), 1),
    "memory_layers": (("fsmn",), "all"),
    "memory_lr_scale": (("fsmn",), 1.0),
    "context_scale": (("srnmt",), False),
    "decoder_style": (STEP_CELLS, "luong"),
}


def resolve(cfg: Config, explicit: set[str], source: str) -> None:
    """Fill ``None`` fields with the chosen cell's defaults; reject options the cell lacks."""
    m = cfg.model
    if m.cell not in CELLS:
        raise ConfigError(
            f"{source}: model.cell = {m.cell!r} is not a known cell; choose one of "
            f"{', '.join(CELLS)}{suggest(m.cell, list(CELLS), '', quote=True)}"
        )
    for key, (cells, default) in CELL_OPTIONS.items():
        value = getattr(m, key)
        if m.cell in cells:
            if value is None:
                setattr(m, key, default)
        elif value is not None:
            raise ConfigError(
                f"{source}: model.{key} = {value!r} does not exist for cell {m.cell!r} "
                f"(it applies to {', '.join(cells)}); remove it"
            )
    if m.peephole and m.cell not in ("lstm", "sru"):
        raise ConfigError(
            f"{source}: model.peephole = true does not exist for cell {m.cell!r} (lstm and sru only); remove it"
        )
    if m.attention is None:
        m.attention = "general" if m.cell == "fsmn" else "mlp"
    if m.layer_norm is None:
        m.layer_norm = m.cell == "srnmt"
    if m.multi_attention is None:
        m.multi_attention = m.cell == "srnmt"
    if m.input_feeding is None:
        m.input_feeding = m.cell in STEP_CELLS and m.decoder_style == "luong"
    elif m.input_feeding and m.cell not in STEP_CELLS:
        raise ConfigError(
            f"{source}: model.input_feeding = true needs a step-by-step decoder "
            f"({', '.join(STEP_CELLS)}); {m.cell} decodes all positions at once. Remove it"
        )
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


def validate(cfg: Config, source: str) -> None:
    m, t, d, dec = cfg.model, cfg.train, cfg.data, cfg.decode

    def fail(key: str, value: Any, why: str) -> None:
        raise ConfigError(f"{source}: {key} = {value!r}: {why}")

    for key in ("hidden", "emb", "enc_layers", "dec_layers"):
        if getattr(m, key) < 1:
            fail(f"model.{key}", getattr(m, key), "must be >= 1")
    if not 0.0 <= m.dropout < 1.0:
        fail("model.dropout", m.dropout, "must be in [0, 1)")
    if not 0.0 < m.init_range <= 1.0:
        fail("model.init_range", m.init_range, "must be in (0, 1], e.g. 0.08 (the ATR and Context Gates papers)")
    if m.plain_output:
        if m.deep_output:
            fail("model.plain_output", m.plain_output, "the softmax reads the top state, not a deep output; "
                 "set model.deep_output: false too")
        if m.tie_embeddings and m.emb != m.hidden:
            fail("model.tie_embeddings", m.tie_embeddings, f"with plain_output the softmax reads the {m.hidden}-wide "
                 f"state, so tied embeddings need model.emb = model.hidden (got {m.emb})")
    if m.bidirectional and m.dir_size == "half" and m.hidden % 2:
        fail("model.hidden", m.hidden, "must be even with bidirectional encoders of dir_size half")
    if m.cell == "srnmt":
        if not m.bidirectional or m.dir_size != "half":
            fail("model.dir_size", m.dir_size, "the srnmt encoder unit is bidirectional with d/2 per direction; "
                 "use bidirectional: true, dir_size: half")
    if m.cell == "fsmn":
        if m.order < 0:
            fail("model.order", m.order, "must be >= 0")
        if m.memory_layers == "middle" and m.enc_layers < 3:
            fail("model.memory_layers", m.memory_layers, f"the encoder's middle layers are those between the first "
                 f"and the last; with enc_layers = {m.enc_layers} there are none. Use enc_layers >= 3 (the paper: 4)")
        if not 0.0 < m.memory_lr_scale <= 1.0:
            fail("model.memory_lr_scale", m.memory_lr_scale, "must be in (0, 1], e.g. 0.01 (the paper's)")
        if m.input_window not in (1, 2):
            fail("model.input_window", m.input_window, "must be 1 or 2 words")
        if m.attention == "dot":
            fail("model.attention", m.attention, "the fsmn decoder queries with [v~; v1] (2 x hidden), "
                 "which dot attention cannot compare with the encoder states; use general (the paper's) or mlp")
    if m.context_gate != "none":
        bad_inputs = [g for g in m.gate_inputs if g not in GATE_INPUTS]
        if bad_inputs:
            fail("model.gate_inputs", m.gate_inputs,
                 f"unknown input {bad_inputs[0]!r}; use a subset of {', '.join(GATE_INPUTS)}")
        if len(set(m.gate_inputs)) != len(m.gate_inputs):
            fail("model.gate_inputs", m.gate_inputs, "lists an input twice; name each of state, source, prev_word once")
        if m.cell not in RECURRENT_MATRIX_CELLS:
            fail("model.context_gate", m.context_gate,
                 f"context gates act on the recurrent update of {', '.join(RECURRENT_MATRIX_CELLS)}; "
                 f"{m.cell} has none. Use context_gate: none")
        if m.decoder_style != "bahdanau":
            fail("model.context_gate", m.context_gate,
                 "context gates gate the source context inside the state update; set model.decoder_style: bahdanau")
        if not m.gate_inputs:
            fail("model.gate_inputs", m.gate_inputs, "a context gate needs at least one input")
    if t.lr <= 0:
        fail("train.lr", t.lr, "must be > 0")
    if t.batch_tokens < 1:
        fail("train.batch_tokens", t.batch_tokens, "must be >= 1")
    if t.max_epochs < 1:
        fail("train.max_epochs", t.max_epochs, "must be >= 1")
    for key in ("max_steps", "max_tokens"):
        if getattr(t, key) is not None and getattr(t, key) < 1:
            fail(f"train.{key}", getattr(t, key), "must be >= 1 (or leave it out: no such budget)")
    if t.max_minutes is not None and t.max_minutes <= 0:
        fail("train.max_minutes", t.max_minutes, "must be > 0 (or leave it out: no wall-time cap)")
    if t.clip < 0:
        fail("train.clip", t.clip, "must be >= 0 (0 turns clipping off)")
    if not 0.0 <= t.min_lr <= t.lr:
        fail("train.min_lr", t.min_lr, f"must be between 0 and train.lr ({t.lr})")
    if not 0.0 < t.decay_factor < 1.0:
        fail("train.decay_factor", t.decay_factor, "must be in (0, 1)")
    if t.patience < 0:
        fail("train.patience", t.patience, "must be >= 0 (0 = never stop early)")
    if t.plateau_patience < 1:
        fail("train.plateau_patience", t.plateau_patience, "must be >= 1")
    if not 0.0 <= t.label_smoothing < 1.0:
        fail("train.label_smoothing", t.label_smoothing, "must be in [0, 1)")
    if t.threads is not None and t.threads < 1:
        fail("train.threads", t.threads, "must be >= 1")
    if dec.beam < 1:
        fail("decode.beam", dec.beam, "must be >= 1")
    if dec.valid_beam < 1:
        fail("decode.valid_beam", dec.valid_beam, "must be >= 1")
    if dec.batch_size < 1:
        fail("decode.batch_size", dec.batch_size, "must be >= 1")
    if dec.max_len_ratio <= 0:
        fail("decode.max_len_ratio", dec.max_len_ratio, "must be > 0")
    if d.preset is None:
        for split in ("train", "valid", "test"):
            paths = getattr(d, split)
            if paths is None:
                fail(f"data.{split}", None, "give [SOURCE_FILE, TARGET_FILE] or use data.preset: synthetic")
            if len(paths) != 2:
                fail(f"data.{split}", paths, "must be two paths: [SOURCE_FILE, TARGET_FILE]")
    else:
        for key in ("size", "valid_size", "test_size"):
            if getattr(d, key) < 1:
                fail(f"data.{key}", getattr(d, key), "must be >= 1")
        if not 0.0 < d.lexicon <= 1.0:
            fail("data.lexicon", d.lexicon, "must be in (0, 1]: the share of the full synthetic lexicon")
        if d.max_words < 8:
            fail("data.max_words", d.max_words, "must be >= 8")
    if d.spm.vocab_size < 8:
        fail("data.spm.vocab_size", d.spm.vocab_size, "must be >= 8")
    if d.max_len < 2:
        fail("data.max_len", d.max_len, "must be >= 2")
    if d.limit is not None and d.limit < 1:
        fail("data.limit", d.limit, "must be >= 1")


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
    if m.order is not None:
        m.order = min(m.order, 4)
    t.max_epochs = min(t.max_epochs, 2)
    t.batch_tokens = min(t.batch_tokens, 1200)
    dec.beam = min(dec.beam, 3)
    return cfg


def dump_config(cfg: Config, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False), encoding="utf-8")
