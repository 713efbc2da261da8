"""SR-NMT decoder (Di Gangi & Federico 2018, Sec. 3.2). Each layer::

    [y~_i, g_i, z_i] = LN(y_i W),              W in R^{d x 3d}
    s~_i = (1 - σ(g_i)) * s~_{i-1} + σ(g_i) * y~_i
    c_i  = attn(s~_i, H)                        (this layer's own attention)
    o_i  = tanh(LN(s~_i W_s) + LN(c_i W_c))
    s_i  = (1 - σ(z_i)) * o_i + σ(z_i) * y_i    (highway)

with the layer-normalised MLP attention
a_ij = v tanh(LN(s~_i W_as) + LN(h_j W_ah)). Nothing feeds back across
steps, so training computes every position at once (a linear scan per layer
and batched attention). Ablations (paper Table 4): ``layer_norm: false``
removes every LN; ``highway: false`` gives s_i = o_i;
``multi_attention: false`` keeps one attention, in the last layer, and the
other layers use o_i = tanh(LN(s~_i W_s)). Without the highway, W has no z
block (W in R^{d x 2d}).

The paper divides c_i by sqrt(d) to damp the encoder's gradient from many
attentions, c_i = attn(s~_i, H) / sqrt(d); ``context_scale: true`` does so.
It is off by default (our models train well without it). By default every
matrix a LN reads has a bias (LN(y_i W + b), LN(c_i W_c + b_c), ...);
``norm_bias: false`` leaves them out, as the paper's equations do. Then the
LN after c_i W_c cancels the factor (up to its epsilon), and the factor acts
only without LN and on what a deep output reads of c_i; with the bias it
changes how much of LN(c_i W_c + b_c) comes from the context.
The paper's output is "a standard softmax layer over the target vocabulary"
on s_i (``plain_output: true, deep_output: false``); our default is the
deep output of the other decoders, so that the units share one output layer.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nmt.config import ModelConfig
from nmt.decoders.base import Decoder, DecoderState, Memory
from nmt.ops.linear_scan import linear_scan


def _norm(size: int, enabled: bool) -> nn.Module:
    return nn.LayerNorm(size) if enabled else nn.Identity()


class SRNMTDecoderLayer(nn.Module):
    def __init__(self, input_size: int, d: int, memory_size: int, attends: bool, layer_norm: bool, highway: bool,
                 dropout: float, norm_bias: bool = True):
        super().__init__()
        self.d = d
        self.dropout = nn.Dropout(dropout)
        width = 3 * d if highway else 2 * d  # [y~, g] (+ z)
        bias = norm_bias or not layer_norm
        self.linear = nn.Linear(input_size, width, bias=bias)
        self.norm = _norm(width, layer_norm)
        self.state_proj = nn.Linear(d, d, bias=bias)  # W_s
        self.state_norm = _norm(d, layer_norm)
        self.context_proj = nn.Linear(memory_size, d, bias=bias) if attends else None  # W_c
        self.context_norm = _norm(d, layer_norm) if attends else None
        self.highway = highway
        self.highway_proj = nn.Linear(input_size, d, bias=False) if highway and input_size != d else None

    def gates(self, y: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """[y~, g, z] = LN(y W) for (B, [T,] D) inputs (z is None without the highway)."""
        parts = self.norm(self.linear(self.dropout(y))).split(self.d, dim=-1)
        return parts if self.highway else (*parts, None)

    def combine(self, y: Tensor, z: Tensor | None, s_tilde: Tensor, context: Tensor | None) -> Tensor:
        """o = tanh(LN(s~ W_s) [+ LN(c W_c)]); s = (1 - σ(z)) o + σ(z) y."""
        pre = self.state_norm(self.state_proj(self.dropout(s_tilde)))
        if context is not None:
            pre = pre + self.context_norm(self.context_proj(self.dropout(context)))
        o = torch.tanh(pre)
        if not self.highway:
            return o
        y_highway = self.highway_proj(self.dropout(y)) if self.highway_proj is not None else y
        gate = torch.sigmoid(z)
        return (1 - gate) * o + gate * y_highway


class SRNMTDecoder(Decoder):
    def __init__(self, cfg: ModelConfig, memory_size: int):
        super().__init__(cfg)
        d = cfg.hidden
        self.layers = nn.ModuleList()
        self.connections = nn.ModuleList()
        norm_bias = cfg.options.norm_bias
        for layer in range(cfg.dec_layers):
            input_size = cfg.emb if layer == 0 else d
            self.layers.append(SRNMTDecoderLayer(input_size, d, memory_size, layer in self.attending, cfg.layer_norm,
                                                 cfg.options.highway, cfg.dropout, norm_bias))
            self.add_layer(cfg, layer, d, memory_size, key_bias=norm_bias or not cfg.layer_norm)
        self.finish(cfg, d, memory_size)
        self.context_factor = d ** -0.5 if cfg.options.context_scale else 1.0

    def attend_scaled(self, name: str, query: Tensor, memory: Memory) -> Tensor:
        """c_i = attn(query, H), divided by sqrt(d) with ``context_scale``."""
        context = self.attend(name, query, memory)[0]
        return context * self.context_factor if self.context_factor != 1.0 else context

    def forward(self, memory: Memory, y_emb: Tensor, y_mask: Tensor) -> Tensor:
        x, context = y_emb, None
        m = y_mask.unsqueeze(-1)
        for index, (layer, connection, s0) in enumerate(zip(self.layers, self.connections, self.init(memory))):
            y_tilde, g, z = layer.gates(x)
            a = torch.where(m, torch.sigmoid(-g), 1.0)
            b = torch.where(m, torch.sigmoid(g) * y_tilde, 0.0)
            s_tilde = linear_scan(a, b, s0)
            name = str(index)
            layer_context = self.attend_scaled(name, s_tilde, memory) if name in self.attentions else None
            if layer_context is not None:
                context = layer_context
            x = connection(layer.combine(x, z, s_tilde, layer_context), x)
        return self.output(x, context, y_emb)

    def init_state(self, memory: Memory) -> DecoderState:
        return {f"{index}.s": s0 for index, s0 in enumerate(self.init(memory))}

    def step(self, memory: Memory, y_emb_t: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        x, context = y_emb_t, None
        new_state: DecoderState = {}
        for index, (layer, connection) in enumerate(zip(self.layers, self.connections)):
            y_tilde, g, z = layer.gates(x)
            gate = torch.sigmoid(g)
            s_tilde = (1 - gate) * state[f"{index}.s"] + gate * y_tilde
            new_state[f"{index}.s"] = s_tilde
            name = str(index)
            layer_context = self.attend_scaled(name, s_tilde, memory) if name in self.attentions else None
            if layer_context is not None:
                context = layer_context
            x = connection(layer.combine(x, z, s_tilde, layer_context), x)
        return self.output(x, context, y_emb_t), new_state
