"""YAML as the user's input: config files, study files and ``--set`` values.

Stricter than ``yaml.safe_load`` in three ways, each a silent failure before:

- a key given twice in one mapping is an error (PyYAML keeps the last one: a second ``base:``
  dropped the first one's training settings);
- ``.inf`` and ``.nan`` are refused (no setting of this platform means infinity, and NaN
  compares unequal to itself, so a NaN config would make a new trial key every run);
- a document whose aliases (``*name``) expand to more than ``MAX_NODES`` values is refused
  before anything copies it (a "billion laughs" alias bomb grew to gigabytes).
"""

from __future__ import annotations

import math

import yaml

from nmt.errors import ConfigError

MAX_NODES = 100_000  # values in the document with every alias expanded; real study files have < 1,000


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping (first on line {seen[key] + 1}); "
                                f"keep one of them", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, source: str):
    """The value of a YAML document, checked as above; errors are one ``ConfigError`` line naming ``source``."""
    try:
        loader = _StrictLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_size(node, source)
            value = loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as err:
        raise ConfigError(f"{source}: malformed YAML: {' '.join(str(err).split())}") from None
    _check_finite(value, source, "")
    return value


def _check_size(root, source: str) -> None:
    """Count the values the node graph expands to, each shared (aliased) node once per use,
    without expanding it."""
    sizes: dict[int, int] = {}

    def size(node) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        sizes[id(node)] = 1  # a recursive alias (&a [*a]) counts once instead of looping
        if isinstance(node, yaml.SequenceNode):
            total = 1 + sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total = 1 + sum(size(key) + size(value) for key, value in node.value)
        else:
            total = 1
        sizes[id(node)] = total
        if total > MAX_NODES:
            raise ConfigError(f"{source}: the YAML expands to more than {MAX_NODES:,} values (through aliases "
                              f"such as *name); write the settings out instead")
        return total

    size(root)


def _check_finite(value, source: str, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{source}: {where or 'value'} = {value}: numbers must be finite; give a real number")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, source, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_finite(item, source, f"{where}[{index}]")
