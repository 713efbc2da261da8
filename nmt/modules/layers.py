"""Small building blocks shared by encoders and decoders."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class LayerConnection(nn.Module):
    """How a stacked layer's output meets its input (GNMT-style deep stacks)::

        none:     y
        residual: y + x
        highway:  g * y + (1 - g) * x,   g = σ(W_g x + b_g)

    The first layer of a stack uses ``none`` (its input has another size)."""

    def __init__(self, kind: str, size: int):
        super().__init__()
        self.kind = kind
        self.gate = nn.Linear(size, size) if kind == "highway" else None

    def forward(self, output: Tensor, layer_input: Tensor) -> Tensor:
        if self.kind == "residual":
            return output + layer_input
        if self.kind == "highway":
            g = torch.sigmoid(self.gate(layer_input))
            return g * output + (1 - g) * layer_input
        return output


class DeepOutput(nn.Module):
    """Attentional output before the softmax::

        deep_output:  o_i = tanh(W_o [t_i; c_i; e(y_{i-1})] + b_o)   (Pascanu et al. 2014)
        otherwise:    o_i = tanh(W_o [t_i; c_i] + b_o)              (Luong's attentional vector)

    o_i has the embedding size, so the target embeddings can be tied to the
    softmax weights. Dropout goes before W_o (the model drops o_i before the
    softmax matrix)."""

    def __init__(self, state_size: int, context_size: int, emb_size: int, deep: bool, dropout: float):
        super().__init__()
        self.deep = deep
        self.size = emb_size
        self.dropout = nn.Dropout(dropout)
        self.proj = nn.Linear(state_size + context_size + (emb_size if deep else 0), emb_size)

    def forward(self, state: Tensor, context: Tensor, prev_word: Tensor) -> Tensor:
        parts = [state, context, prev_word] if self.deep else [state, context]
        return torch.tanh(self.proj(self.dropout(torch.cat(parts, dim=-1))))


class PlainOutput(nn.Module):
    """No output layer: the softmax reads the top decoder state, o_i = t_i (SR-NMT's "standard
    softmax layer over the target vocabulary")."""

    def __init__(self, state_size: int):
        super().__init__()
        self.size = state_size

    def forward(self, state: Tensor, context: Tensor, prev_word: Tensor) -> Tensor:
        return state


def make_output(cfg, state_size: int, context_size: int) -> nn.Module:
    """The output layer a ModelConfig asks for (``plain_output``, ``deep_output``)."""
    if cfg.plain_output:
        return PlainOutput(state_size)
    return DeepOutput(state_size, context_size, cfg.emb, cfg.deep_output, cfg.dropout)


def masked_mean(states: Tensor, mask: Tensor) -> Tensor:
    """Mean over real positions: (B, S, H), (B, S) -> (B, H)."""
    m = mask.unsqueeze(-1).to(states.dtype)
    return (states * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)
