"""Attention over the encoder states.

Score functions (Bahdanau et al. 2015; Luong et al. 2015)::

    mlp:      e_ij = v^T tanh(LN(W_q q_i) + LN(W_k h_j))
    general:  e_ij = q_i^T LN(W h_j)
    dot:      e_ij = q_i^T h_j
    α_i = softmax_j(e_ij) over real source positions;  c_i = Σ_j α_ij h_j

LN appears only with ``layer_norm`` (the layer-normalised MLP attention of
SR-NMT); the projections of the encoder states ("keys") are computed once
per source sentence by ``keys`` and reused at every decoder step.
``dropout`` drops the inputs of W_q and W_k (h_j only where it is
projected: the context c_i sums the undropped states); ``key_bias: false``
leaves b out of W_k h_j + b (the SR-NMT paper's LN(W_k h_j)).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nmt.ops.additive_scores import additive_scores


class Attention(nn.Module):
    def __init__(self, query_size: int, memory_size: int, kind: str = "mlp", layer_norm: bool = False,
                 size: int | None = None, dropout: float = 0.0, key_bias: bool = True):
        super().__init__()
        self.kind = kind
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()  # no draw from the RNG at 0
        self.memory_size = memory_size
        self.score_size = (size or query_size) if kind == "mlp" else query_size  # products per scored position
        if kind == "mlp":
            size = size or query_size
            self.query_proj = nn.Linear(query_size, size, bias=False)
            self.key_proj = nn.Linear(memory_size, size, bias=key_bias)
            self.score = nn.Linear(size, 1, bias=False)
            self.query_norm = nn.LayerNorm(size) if layer_norm else nn.Identity()
            self.key_norm = nn.LayerNorm(size) if layer_norm else nn.Identity()
        elif kind == "general":
            self.key_proj = nn.Linear(memory_size, query_size, bias=False)
            self.key_norm = nn.LayerNorm(query_size) if layer_norm else nn.Identity()
        elif kind == "dot":
            if query_size != memory_size:
                raise ValueError(f"dot attention needs equal query and memory sizes ({query_size} != {memory_size})")
        else:
            raise ValueError(f"unknown attention {kind!r}")

    def keys(self, states: Tensor) -> Tensor:
        """Per-sentence precomputation over encoder states (B, S, M)."""
        if self.kind == "dot":
            return states
        return self.key_norm(self.key_proj(self.dropout(states)))

    def forward(self, query: Tensor, keys: Tensor, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """query (B, Dq) or (B, Tq, Dq) -> context (B, [Tq,] M), weights (B, [Tq,] S)."""
        single = query.dim() == 2
        if single:
            query = query.unsqueeze(1)
        if self.kind == "mlp":
            q = self.query_norm(self.query_proj(self.dropout(query)))  # (B, Tq, A)
            scores = additive_scores(q, keys, self.score.weight[0])  # (B, Tq, S)
        else:
            scores = torch.bmm(query, keys.transpose(1, 2))
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        context = torch.bmm(weights, states)
        if single:
            return context.squeeze(1), weights.squeeze(1)
        return context, weights
