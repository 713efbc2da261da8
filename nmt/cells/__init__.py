"""Recurrent cells: one module per unit, all following ``RecurrentCell``'s contract; each
module declares its unit (``UNIT``) for the registry ``nmt.units``.

This package imports nothing of ``nmt.config`` when it loads: the registry imports every module
here to find the units, and ``nmt.config`` imports the registry. ``make_cell`` reads the unit and
its options off the model config it is given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nmt.cells.base import RecurrentCell, State

if TYPE_CHECKING:  # annotations only
    from nmt.config import ModelConfig

__all__ = ["RecurrentCell", "State", "make_cell"]


def make_cell(cfg: ModelConfig, input_size: int, hidden_size: int, directions: int = 1) -> RecurrentCell:
    """The cell of the unit ``cfg.cell`` with its options.

    ``hidden_size`` is per direction, except for units that are bidirectional by construction
    (``Unit.bidirectional == "total"``, the SR-NMT encoder unit), which take the total size d."""
    unit = cfg.unit
    if unit.cell is None:
        raise ValueError(f"{cfg.cell!r} has no recurrent cell")
    return unit.cell(cfg.options, cfg, input_size, hidden_size, directions)
