"""Recurrent cells: one module per unit, all following ``RecurrentCell``'s contract."""

from __future__ import annotations

from nmt.cells.atr import ATRCell
from nmt.cells.base import RecurrentCell, State
from nmt.cells.gru import GRUCell
from nmt.cells.lstm import LSTMCell
from nmt.cells.ran import RANCell
from nmt.cells.rnn import RNNCell
from nmt.cells.srnmt import SRNMTEncoderUnit
from nmt.cells.sru import SRUCell
from nmt.config import ModelConfig

__all__ = ["RecurrentCell", "State", "make_cell", "ATRCell", "GRUCell", "LSTMCell", "RANCell", "RNNCell",
           "SRNMTEncoderUnit", "SRUCell"]


def make_cell(cfg: ModelConfig, input_size: int, hidden_size: int, directions: int = 1) -> RecurrentCell:
    """The cell named by ``cfg.cell`` with its variant options.

    ``hidden_size`` is per direction, except for ``srnmt`` whose encoder unit
    is inherently bidirectional and takes the total size d."""
    if cfg.cell == "lstm":
        return LSTMCell(input_size, hidden_size, directions, peephole=cfg.peephole)
    if cfg.cell == "gru":
        return GRUCell(input_size, hidden_size, directions)
    if cfg.cell == "rnn":
        return RNNCell(input_size, hidden_size, directions)
    if cfg.cell == "ran":
        return RANCell(input_size, hidden_size, directions, output=cfg.ran_output)
    if cfg.cell == "atr":
        return ATRCell(input_size, hidden_size, directions, gates=cfg.gates, forget_sign=cfg.forget_sign,
                       candidate=cfg.candidate)
    if cfg.cell == "sru":
        return SRUCell(input_size, hidden_size, directions, peephole=cfg.peephole)
    if cfg.cell == "srnmt":
        return SRNMTEncoderUnit(input_size, hidden_size, layer_norm=cfg.layer_norm, highway=cfg.highway)
    raise ValueError(f"{cfg.cell!r} is not a recurrent cell")
