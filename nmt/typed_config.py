"""Typed configuration from YAML: the generic part, used by ``nmt.config`` and ``study.spec``.

A config is a tree of dataclasses whose fields map one-to-one onto YAML keys. This module
reads YAML safely, applies dotted ``--set key=value`` overrides, builds the dataclasses with
every key and value checked (unknown keys get the closest valid key as a suggestion), and
checks the bounds each field declares next to itself (``setting(default, help, ge=..., ...)``).
Every problem is a one-line ``ConfigError`` naming the source, the key, the value and the fix.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import operator
import types
import typing
import unicodedata
from dataclasses import field
from pathlib import Path
from typing import Any, Literal

from nmt.errors import ConfigError
from nmt.yaml_input import load_yaml


def setting(default: Any = None, help: str = "", *, ge: float | None = None, gt: float | None = None,
            le: float | None = None, lt: float | None = None, note: str = ""):
    """A dataclass field with its help text and bounds (checked by ``check_bounds``);
    ``note`` is appended to the bounds' error message as it is (", e.g. 0.08")."""
    return field(default=default, metadata={"help": help, "ge": ge, "gt": gt, "le": le, "lt": lt, "note": note})


# bound name -> (test, comparison as written, interval bracket)
BOUNDS = {"ge": (operator.ge, ">=", "["), "gt": (operator.gt, ">", "("),
          "le": (operator.le, "<=", "]"), "lt": (operator.lt, "<", ")")}


def bounds_text(metadata: dict) -> str:
    """"must be >= 1", "must be in (0, 1]", ... from a field's declared bounds ("" if none)."""
    low = next((name for name in ("ge", "gt") if metadata.get(name) is not None), None)
    high = next((name for name in ("le", "lt") if metadata.get(name) is not None), None)
    if low and high:
        return f"must be in {BOUNDS[low][2]}{metadata[low]:g}, {metadata[high]:g}{BOUNDS[high][2]}"
    one = low or high
    return f"must be {BOUNDS[one][1]} {metadata[one]:g}" if one else ""


def in_bounds(value: Any, metadata: dict) -> bool:
    return all(metadata.get(name) is None or test(value, metadata[name]) for name, (test, _, _) in BOUNDS.items())


def check_bounds(obj, source: str, prefix: str) -> None:
    """Every field of the dataclass ``obj`` (and of its sections) within its declared bounds;
    ``None`` means "not set" and is not checked."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if not f.metadata.get("yaml", True):
            continue  # not a YAML key here (its owner checks it under its own name)
        if dataclasses.is_dataclass(value):
            check_bounds(value, source, f"{prefix}{f.name}.")
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and not in_bounds(value, f.metadata):
            raise ConfigError(f"{source}: {prefix}{f.name} = {value!r}: {bounds_text(f.metadata)}"
                              f"{f.metadata.get('note', '')}")


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


def build_dataclass(cls, tree: dict, source: str, prefix: str, explicit: set[str]):
    """``cls(**tree)`` with every key and value checked; ``explicit`` collects the keys given."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.metadata.get("yaml", True)]
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
        return check_number(value, source, key)
    if hint is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ConfigError(f"{source}: {key} = {value!r} must be a string")
        return check_text(str(value), source, key)
    raise TypeError(f"unsupported config type {hint} for {key}")


def check_number(value: Any, source: str, key: str) -> float:
    """``value`` as a finite float, however it is spelled (YAML 1.1 reads "3e-4", without a dot, as a string;
    .inf, 1e999, "nan" and an integer of hundreds of digits are refused), else one ConfigError line."""
    number = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            pass
    if number is None:
        raise ConfigError(f"{source}: {key} = {value!r} must be a number")
    try:
        number = float(number)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ConfigError(f"{source}: {key} = {value!r} must be a finite number")
    return number


def check_text(text: str, source: str, key: str) -> str:
    """``text`` when it is one line of printable text, else one ConfigError line. A line or record separator
    (a line feed, U+0085, U+2028, U+2029, ...) splits a CSV record or a Markdown row in whoever reads the exports,
    and a control character prints as nothing or as noise, so no text a table shows may hold one."""
    for char in text:
        if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            raise ConfigError(f"{source}: {key} = {text!r}: holds {_char_name(char)}; write it as one line of printable "
                              f"text")
    return text


def _char_name(char: str) -> str:
    return f"U+{ord(char):04X} ({unicodedata.name(char, 'a control character')})"


def suggest(word: str, choices: list[str], prefix: str, quote: bool = False) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.5)
    if not close:
        if quote:
            return ""
        return f"; valid keys here: {', '.join(prefix + c for c in choices)}"
    return f" (did you mean {prefix + close[0]!r}?)"


def one_line(err: Exception) -> str:
    return " ".join(str(err).split())
