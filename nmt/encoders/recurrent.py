"""Stacked (bi)recurrent encoder for every recurrent cell.

Layer l reads the previous layer's states (the embeddings for l = 1), with
dropout before the cell's input matrix. Bidirectional layers run both
directions in one cell (``dir_size: half``: H/2 each, concatenated to H;
``full``: H each, concatenated and projected back to H). From the second
layer on, ``layer_connection`` adds a residual or highway path around each
layer. A unit that is bidirectional by construction (the SR-NMT unit) takes
the whole size and carries its own highway gate.
"""

from __future__ import annotations

from torch import Tensor, nn

from nmt.cells import make_cell
from nmt.config import ModelConfig
from nmt.modules.layers import LayerConnection


class RecurrentEncoder(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        hidden = cfg.hidden
        self.dropout = nn.Dropout(cfg.dropout)
        self.cells = nn.ModuleList()
        self.projections = nn.ModuleList()
        self.connections = nn.ModuleList()
        for layer in range(cfg.enc_layers):
            input_size = cfg.emb if layer == 0 else hidden
            if cfg.unit.bidirectional == "total":  # bidirectional by construction: takes d
                cell = make_cell(cfg, input_size, hidden)
            elif cfg.bidirectional:
                per_direction = hidden // 2 if cfg.dir_size == "half" else hidden
                cell = make_cell(cfg, input_size, per_direction, directions=2)
            else:
                cell = make_cell(cfg, input_size, hidden, directions=1)
            self.cells.append(cell)
            needs_projection = cell.output_size != hidden
            self.projections.append(nn.Linear(cell.output_size, hidden) if needs_projection else nn.Identity())
            self.connections.append(LayerConnection(cfg.layer_connection if layer > 0 else "none", hidden))
        self.output_size = hidden

    @property
    def weight_matrices(self) -> int:
        return self.cells[0].weight_matrices

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        m = mask.unsqueeze(-1).to(x.dtype)
        for cell, projection, connection in zip(self.cells, self.projections, self.connections):
            out, _ = cell(self.dropout(x), mask, skip=x)
            x = connection(projection(out), x) * m
        return x
