"""What every decoder offers the model and the search.

- ``prepare(memory)``: per-sentence precomputation (attention keys), once
  per batch and before beam expansion.
- ``forward(memory, y_emb, y_mask)``: teacher forcing over the whole target
  prefix (B, T, E) -> attentional outputs o (B, T, E).
- ``init_state(memory)`` / ``step(memory, y_emb_t, state)``: incremental
  decoding. States are flat dicts of batch-first tensors, so beam search can
  reorder any decoder's state with one ``index_select`` per entry.

``memory`` is a dict with "states" (B, S, M), "mask" (B, S) and, after
``prepare``, "keys.<name>" per attention module.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nmt.config import ModelConfig
from nmt.modules.attention import Attention
from nmt.modules.layers import LayerConnection, make_output, masked_mean

Memory = dict[str, Tensor]
DecoderState = dict[str, Tensor]


class Decoder(nn.Module):
    """The scaffold every decoder shares: which layers attend (every one with
    ``multi_attention``, else the top one), the connection around each layer, an attention
    per attending layer, the initial state and the output layer. A decoder builds each layer
    as ``its own modules, then add_layer(...)`` and ends with ``finish(...)``: that order of
    construction fixes a seed's initial weights, and the order in which modules are first
    assigned fixes the order of the parameters, which a checkpoint's optimizer state follows
    (so a decoder assigns ``self.connections = nn.ModuleList()`` right after its layers)."""

    def __init__(self, cfg: ModelConfig | None = None):
        super().__init__()
        self.attentions = nn.ModuleDict()
        layers = cfg.dec_layers if cfg is not None else 0
        self.attending = list(range(layers)) if cfg is not None and cfg.multi_attention else [layers - 1]

    def add_layer(self, cfg: ModelConfig, layer: int, size: int, memory_size: int, query_size: int | None = None,
                  key_bias: bool = True) -> bool:
        """The connection around ``layer`` and, if it attends, its attention; returns whether it attends."""
        self.connections.append(LayerConnection(cfg.layer_connection if layer > 0 else "none", size))
        if layer not in self.attending:
            return False
        self.attentions[str(layer)] = Attention(query_size or size, memory_size, cfg.attention, cfg.layer_norm,
                                                dropout=cfg.dropout if cfg.attention_dropout else 0.0,
                                                key_bias=key_bias)
        return True

    def finish(self, cfg: ModelConfig, size: int, memory_size: int, initial_state: bool = True) -> None:
        """The learned initial state of every layer (where the decoder has one) and the output layer."""
        if initial_state:
            self.init = InitialState(memory_size, size, cfg.dec_layers)
        self.output = make_output(cfg, size, memory_size)

    def prepare(self, memory: Memory) -> Memory:
        memory = dict(memory)
        for name, attention in self.attentions.items():
            memory[f"keys.{name}"] = attention.keys(memory["states"])
        return memory

    def attend(self, name: str, query: Tensor, memory: Memory) -> tuple[Tensor, Tensor]:
        return self.attentions[name](query, memory[f"keys.{name}"], memory["states"], memory["mask"])

    def forward(self, memory: Memory, y_emb: Tensor, y_mask: Tensor) -> Tensor:
        raise NotImplementedError

    def init_state(self, memory: Memory) -> DecoderState:
        raise NotImplementedError

    def step(self, memory: Memory, y_emb_t: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        raise NotImplementedError

    def forward_by_steps(self, memory: Memory, y_emb: Tensor) -> Tensor:
        """Teacher forcing through ``step``: the reference for parallel forwards."""
        state = self.init_state(memory)
        outputs = []
        for t in range(y_emb.size(1)):
            o, state = self.step(memory, y_emb[:, t], state)
            outputs.append(o)
        return torch.stack(outputs, dim=1)


class InitialState(nn.Module):
    """h^l_0 = tanh(W_l mean_j(h_j) + b_l) for each decoder layer l (Nematus-style)."""

    def __init__(self, memory_size: int, size: int, layers: int):
        super().__init__()
        self.size = size
        self.layers = layers
        self.proj = nn.Linear(memory_size, size * layers)

    def forward(self, memory: Memory) -> list[Tensor]:
        h0 = torch.tanh(self.proj(masked_mean(memory["states"], memory["mask"])))
        return list(h0.split(self.size, dim=-1))
