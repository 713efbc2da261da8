"""FSMN decoder (Hou et al., Sec. II-B/C): no recurrence, so training computes
all target positions at once. Each layer, eq. (4, 7, 8, 11, 12), f = ReLU::

    v1_t = f(W_v y_t + b_v)
    v~_t = f(Σ_{i=0..N} b_i v1_{t-i})                    (memory block)
    e_it = attn([v~_t; v1_t], h_i)        (``attention: general`` is eq. 11:
                                            v~_t U_e h_i + v1_t W_e h_i)
    H~_t = Σ_i α_it h_i
    v2_t = f(W' v1_t + W~ v~_t + W_H H~_t + b)

y_t is e(y_{t-1}) (``input_window: 2``: [e(y_{t-1}); e(y_{t-2})]). The paper
attends in the last layer only; ``multi_attention`` adds one per layer. For
incremental decoding each layer keeps its last N v1 vectors.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nmt.config import ModelConfig
from nmt.decoders.base import Decoder, DecoderState, Memory
from nmt.encoders.fsmn import previous_word_window
from nmt.modules.memory_block import MemoryBlock, set_memory_lr_scale


class FSMNDecoderLayer(nn.Module):
    def __init__(self, input_size: int, size: int, memory_size: int, order: int, memory: str, attends: bool,
                 dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.hidden = nn.Linear(input_size, size)  # W_v
        self.memory = MemoryBlock(size, order, memory)
        self.out_hidden = nn.Linear(size, size)  # W'
        self.out_memory = nn.Linear(size, size, bias=False)  # W~
        self.out_context = nn.Linear(memory_size, size, bias=False) if attends else None  # W_H

    def relu_inputs(self) -> list[tuple[nn.Linear, ...]]:
        """The matrices feeding each of this layer's ReLUs (``model.init: he``): W_v; W', W~ and W_H."""
        second = (self.out_hidden, self.out_memory) + ((self.out_context,) if self.out_context is not None else ())
        return [(self.hidden,), second]

    def first_half(self, y: Tensor) -> Tensor:
        return torch.relu(self.hidden(self.dropout(y)))

    def second_half(self, v1: Tensor, v_mem: Tensor, context: Tensor | None) -> Tensor:
        pre = self.out_hidden(self.dropout(v1)) + self.out_memory(self.dropout(v_mem))
        if context is not None:
            pre = pre + self.out_context(self.dropout(context))
        return torch.relu(pre)


class FSMNDecoder(Decoder):
    def __init__(self, cfg: ModelConfig, memory_size: int):
        super().__init__(cfg)
        size = cfg.hidden
        self.window = cfg.options.input_window
        self.emb_size = cfg.emb
        self.layers = nn.ModuleList()
        self.connections = nn.ModuleList()
        for layer in range(cfg.dec_layers):
            input_size = cfg.emb * self.window if layer == 0 else size
            self.layers.append(FSMNDecoderLayer(input_size, size, memory_size, cfg.options.order, cfg.options.memory,
                                                layer in self.attending, cfg.dropout))
            self.add_layer(cfg, layer, size, memory_size, query_size=2 * size)  # queries with [v~; v1]
        self.finish(cfg, size, memory_size, initial_state=False)  # no recurrence: no initial state
        set_memory_lr_scale(self, cfg.options.memory_lr_scale)

    def forward(self, memory: Memory, y_emb: Tensor, y_mask: Tensor) -> Tensor:
        x = previous_word_window(y_emb, self.window)
        context = None
        for index, layer in enumerate(self.layers):
            v1 = layer.first_half(x)
            x, context = self._finish_layer(index, v1, layer.memory(v1), x, context, memory)
        return self.output(x, context, y_emb)

    def _finish_layer(self, index: int, v1: Tensor, v_mem: Tensor, x: Tensor, context: Tensor | None,
                      memory: Memory) -> tuple[Tensor, Tensor | None]:
        """Attention (if this layer has one), v2 and the layer connection; returns (output, latest context)."""
        layer_context = None
        if str(index) in self.attentions:
            layer_context, _ = self.attend(str(index), torch.cat([v_mem, v1], dim=-1), memory)
            context = layer_context
        v2 = self.layers[index].second_half(v1, v_mem, layer_context)
        return self.connections[index](v2, x), context

    def init_state(self, memory: Memory) -> DecoderState:
        states = memory["states"]
        state = {f"{i}.buffer": layer.memory.initial_buffer(states.size(0), states) for i, layer in enumerate(self.layers)}
        if self.window == 2:
            state["prev_word"] = states.new_zeros(states.size(0), self.emb_size)
        return state

    def step(self, memory: Memory, y_emb_t: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        new_state: DecoderState = {}
        if self.window == 2:
            x = torch.cat([y_emb_t, state["prev_word"]], dim=-1)
            new_state["prev_word"] = y_emb_t
        else:
            x = y_emb_t
        context = None
        for index, layer in enumerate(self.layers):
            v1 = layer.first_half(x)
            v_mem, new_state[f"{index}.buffer"] = layer.memory.step(v1, state[f"{index}.buffer"])
            x, context = self._finish_layer(index, v1, v_mem, x, context, memory)
        return self.output(x, context, y_emb_t), new_state
