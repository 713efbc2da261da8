"""Step-by-step attentional decoder for the recurrent cells (lstm, gru, rnn, ran, atr, sru).

``decoder_style: luong`` (Luong et al. 2015): layer l updates
h^l_i = cell(x^l_i, h^l_{i-1}); an attending layer then computes
c^l_i = attn(h^l_i, H); below the top its output is tanh(W^l [h^l_i; c^l_i]).
``input_feeding`` adds the previous attentional output o_{i-1} to the first
layer's input. Without input feeding nothing feeds back across steps, so
training runs every layer over the whole target at once (the cells' fast
paths) and attention for all positions in one batched call.

``decoder_style: bahdanau`` (RNNsearch / GroundHog): an attending layer
computes c^l_i = attn(h^l_{i-1}, H) from its previous state, and the
context enters the recurrence, h^l_i = f(W x^l_i + U h^l_{i-1} + C c^l_i),
optionally through a context gate (Tu et al. 2017). This needs the step loop.

``decoder_style: conditional`` (the two-layer hierarchical decoder of Zhang
et al. 2018's ATR systems, the conditional GRU of dl4mt / Nematus): an
attending layer has two cells. The lower one reads the word and the previous
state, the attention queries with its result, and the higher one reads the
context with the lower one's state as its previous state::

    s_i = cell_lower(x_i, h_{i-1})
    c_i = attn(s_i, H)
    h_i = cell_higher(c_i, s_i)

A layer that does not attend is one cell. This needs the step loop too.

``multi_attention``: every layer attends (otherwise the top layer only).
Output: o_i = tanh(W_o [h^L_i; c^L_i; e(y_{i-1})]) (``deep_output``), or the
top state itself (``plain_output``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nmt.cells import make_cell
from nmt.config import ModelConfig
from nmt.decoders.base import Decoder, DecoderState, Memory
from nmt.modules.context_gate import ContextGate


class RecurrentDecoder(Decoder):
    def __init__(self, cfg: ModelConfig, memory_size: int):
        super().__init__(cfg)
        hidden = cfg.hidden
        self.hidden = hidden
        self.style = cfg.decoder_style
        self.bahdanau = cfg.decoder_style == "bahdanau"
        self.input_feeding = cfg.input_feeding
        self.dropout = nn.Dropout(cfg.dropout)
        self.cells = nn.ModuleList()
        self.connections = nn.ModuleList()
        self.context_terms = nn.ModuleDict()  # C: context -> cell chunks (bahdanau)
        self.combiners = nn.ModuleDict()  # luong, multi-attention: tanh(W [h; c]) below the top
        self.gates = nn.ModuleDict()
        self.higher_cells = nn.ModuleDict()  # conditional: the cell above each attention, reading its context
        for layer in range(cfg.dec_layers):
            input_size = cfg.emb * (2 if self.input_feeding else 1) if layer == 0 else hidden
            cell = make_cell(cfg, input_size, hidden)
            self.cells.append(cell)
            if not self.add_layer(cfg, layer, hidden, memory_size):
                continue
            name = str(layer)
            if self.bahdanau:
                self.context_terms[name] = nn.Linear(memory_size, cell.chunks * hidden, bias=False)
                if cfg.context_gate != "none":
                    self.gates[name] = ContextGate(cfg.context_gate, cfg.gate_inputs, cfg.gate_granularity,
                                                   cfg.emb, hidden, memory_size, cfg.dropout)
            elif self.style == "conditional":
                self.higher_cells[name] = make_cell(cfg, memory_size, hidden)
            elif layer < cfg.dec_layers - 1:
                self.combiners[name] = nn.Linear(hidden + memory_size, hidden)
        self.finish(cfg, hidden, memory_size)
        self.emb_size = cfg.emb

    # --- incremental -----------------------------------------------------------

    def init_state(self, memory: Memory) -> DecoderState:
        state: DecoderState = {}
        for layer, (cell, h0) in enumerate(zip(self.cells, self.init(memory))):
            for j, part in enumerate(cell.initial_state(h0.size(0), h0)):
                state[f"{layer}.{j}"] = part
        if self.input_feeding:
            state["feed"] = memory["states"].new_zeros(memory["states"].size(0), self.emb_size)
        return state

    def step(self, memory: Memory, y_emb_t: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        new_state: DecoderState = {}
        x = torch.cat([y_emb_t, state["feed"]], dim=-1) if self.input_feeding else y_emb_t
        context = None
        for layer, (cell, connection) in enumerate(zip(self.cells, self.connections)):
            cell_state = tuple(state[f"{layer}.{j}"] for j in range(cell.state_size))
            name = str(layer)
            u = cell.project(self.dropout(x), skip=x)
            history_gate = None
            if self.bahdanau and name in self.attentions:
                context, _ = self.attend(name, cell_state[0], memory)
                source_term = self.context_terms[name](self.dropout(context))
                if name in self.gates:
                    gate = self.gates[name]
                    z = gate.gate(y_emb_t, cell_state[0], context)
                    u, history_gate = gate.combine(z, u, source_term)
                else:
                    u = u + source_term
            h, cell_state = cell.step(u, cell_state, history_gate=history_gate)
            if name in self.higher_cells:
                context, _ = self.attend(name, h, memory)
                higher = self.higher_cells[name]
                h, cell_state = higher.step(higher.project(self.dropout(context), skip=context), cell_state)
            for j, part in enumerate(cell_state):
                new_state[f"{layer}.{j}"] = part
            if self.style == "luong" and name in self.attentions:
                context, _ = self.attend(name, h, memory)
                if name in self.combiners:
                    h = torch.tanh(self.combiners[name](self.dropout(torch.cat([h, context], dim=-1))))
            x = connection(h, x)
        o = self.output(x, context, y_emb_t)
        if self.input_feeding:
            new_state["feed"] = o
        return o, new_state

    # --- teacher forcing -------------------------------------------------------

    @property
    def parallel(self) -> bool:
        """True when no step feeds back into the next (luong without input feeding)."""
        return self.style == "luong" and not self.input_feeding

    def forward(self, memory: Memory, y_emb: Tensor, y_mask: Tensor) -> Tensor:
        if not self.parallel:
            return self.forward_by_steps(memory, y_emb)
        x = y_emb
        context = None
        for layer, (cell, connection, h0) in enumerate(zip(self.cells, self.connections, self.init(memory))):
            h, _ = cell(self.dropout(x), y_mask, [cell.initial_state(h0.size(0), h0)], skip=x)
            name = str(layer)
            if name in self.attentions:
                context, _ = self.attend(name, h, memory)
                if name in self.combiners:
                    h = torch.tanh(self.combiners[name](self.dropout(torch.cat([h, context], dim=-1))))
            x = connection(h, x)
        return self.output(x, context, y_emb)
