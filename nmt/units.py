"""The unit registry: every recurrent unit the platform knows, declared by its own module.

A unit module in ``nmt/cells/`` ends with one ``UNIT = Unit(...)`` declaration: its name, its
options (a small dataclass with defaults, bounds and help), its traits, its paper's defaults,
its own encoder or decoder where it has one, its table label and the variants the tests and
the benchmark cover. Everything else (the config loader, the encoder and decoder factories,
table labels, ``nmt.bench``, the cell tests) reads this registry, so adding a unit is adding
one file.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any


@dataclass(frozen=True)
class NoOptions:
    """A unit without options of its own."""


@dataclass(frozen=True)
class Unit:
    name: str  # model.cell
    label: str  # in tables and plots
    paper: str  # where its equations come from
    rank: float = 100.0  # position in listings (tables of several units, nmt.bench); ties by name
    #: the unit's own options: a dataclass, set under ``model.<name>`` in a config
    options: type = NoOptions
    #: (options, model config, input size, hidden size, directions) -> the RecurrentCell;
    #: None for a unit without a recurrent cell (FSMN)
    cell: Callable[..., Any] | None = None
    #: recurrence class: "a" linear in the state, "b" elementwise, "c" a matrix product on h_{t-1}
    recurrence: str = "c"
    #: whether the unit's modules call recurrences of ``nmt.ops`` that have Triton kernels, so that
    #: ``NMT_KERNELS=triton`` changes what it runs on and records (``nmt.ops.kernels``); the recurrence class
    #: cannot tell: ATR and RAN (class c) have kernels, LSTM, GRU and RNN (class c, torch's fused kernels) none
    triton_kernels: bool = False
    #: "split": a bidirectional encoder layer gives each direction its share of the size;
    #: "total": the cell is bidirectional by construction and takes the whole size d
    bidirectional: str = "split"
    #: whether its layers are ReLU stacks whose modules name the matrices feeding each ReLU
    #: (``relu_inputs()``), which ``model.init: he`` initialises
    relu_layers: bool = False
    #: model options the unit's paper sets differently from the generic defaults, e.g.
    #: {"layer_norm": True}; a config that sets them explicitly wins
    defaults: dict = field(default_factory=dict)
    #: (model config) -> encoder / (model config, memory size) -> decoder, where the unit has its
    #: own; None: the stacked recurrent encoder and the step-by-step attentional decoder
    encoder: Callable[..., Any] | None = None
    decoder: Callable[..., Any] | None = None
    #: (model config, fail) -> None: checks that need more than one option's bounds;
    #: ``fail(key, value, why)`` raises the config error
    validate: Callable[..., None] | None = None
    #: (options) -> options of a smoke run (tiny sizes, same flags)
    shrink: Callable[[Any], Any] | None = None
    #: (size) -> one stand-alone layer that ``nmt.bench`` times, for a unit without a cell
    bench_layer: Callable[[int], Any] | None = None
    #: variant name -> {dotted config key: value}: what the cell tests and ``nmt.bench`` cover
    #: besides the unit's defaults (which go by the bare name)
    variants: dict = field(default_factory=dict)
    #: names of variants that ``nmt.bench`` times beside the defaults
    bench: tuple = ()
    #: old flat keys (model.<old>) that name one of this unit's options now (model.<name>.<new>)
    renamed: dict = field(default_factory=dict)

    @property
    def recurrent_decoder(self) -> bool:
        """True when the unit decodes with the generic step-by-step recurrent decoder (which
        has decoder_style, input_feeding and context gates)."""
        return self.decoder is None

    @property
    def recurrent_matrix(self) -> bool:
        """True when the state update has a matrix product on h_{t-1}: what context gates scale."""
        return self.recurrence == "c"

    def option_names(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self.options)]

    def option_for(self, flat_key: str) -> str | None:
        """The option an old flat key (model.<key>) names in this unit, if any (``renamed``
        maps keys whose name changed, e.g. ran_output -> output)."""
        name = self.renamed.get(flat_key, flat_key)
        return name if name in self.option_names() else None

    def flat_key(self, option: str) -> str:
        """The old flat key of an option (the inverse of ``option_for``)."""
        return next((old for old, new in self.renamed.items() if new == option), option)


_UNITS: dict[str, Unit] = {}


def units() -> dict[str, Unit]:
    """name -> Unit in listing order (``rank``, then name); each module of ``nmt.cells`` that
    declares a ``UNIT`` is one entry, found once per process."""
    if not _UNITS:
        # at the first look-up, not when this module loads: the cells bring torch and the model code,
        # and nmt.config, which imports this registry, stays light (fast --help of the commands)
        import nmt.cells

        found = {}
        for info in sorted(pkgutil.iter_modules(nmt.cells.__path__), key=lambda m: m.name):
            module = importlib.import_module(f"nmt.cells.{info.name}")
            unit = getattr(module, "UNIT", None)
            if isinstance(unit, Unit):
                if unit.name in found:
                    raise RuntimeError(f"nmt.cells.{info.name}: unit {unit.name!r} is declared twice")
                found[unit.name] = unit
        _UNITS.update(sorted(found.items(), key=lambda item: (item[1].rank, item[0])))
    return _UNITS


def unit_names() -> list[str]:
    return list(units())


def label(name: str) -> str:
    """The table label of a unit name ("srnmt" -> "SR-NMT"); other values unchanged."""
    found = units().get(name) if isinstance(name, str) else None
    return found.label if found is not None else str(name)


def describe(unit: Unit) -> list[str]:
    """Lines that say what a unit is and what each of its options does (with its default)."""
    traits = (f"recurrence class {unit.recurrence}" + ("; Triton kernels" if unit.triton_kernels else "")
              + ("" if unit.recurrent_decoder else "; its own decoder"))
    lines = [f"{unit.name} ({unit.label}): {unit.paper}; {traits}"]
    for f in dataclasses.fields(unit.options):
        lines.append(f"  model.{unit.name}.{f.name} = {f.default!r}: {f.metadata.get('help', '')}")
    return lines


def main() -> int:
    for found in units().values():
        print("\n".join(describe(found)))
    return 0


if __name__ == "__main__":
    from nmt.units import main as registry_main  # the registry module itself, not this __main__ copy

    raise SystemExit(registry_main())
