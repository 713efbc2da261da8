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

from nmt.modules.layers import masked_mean

Memory = dict[str, Tensor]
DecoderState = dict[str, Tensor]


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.attentions = nn.ModuleDict()

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
