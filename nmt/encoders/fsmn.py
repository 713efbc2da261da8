"""FSMN encoder (Hou et al., Sec. II-C and III): two feedforward networks with
memory blocks, one reading the sentence left to right and one reading it
reversed, concatenated (no recurrence; all positions at once).

Each layer, eq. (3, 5, 6) with f = ReLU::

    h1_t = f(W_h x_t + b_h)
    m_t  = f(Σ_{i=0..N} a_i h1_{t-i})                  (memory block)
    h2_t = f(W h1_t + W~ m_t + b)

``memory_layers: all`` (the default) makes each of the ``enc_layers`` layers
the block above: two hidden layers with a memory block between them.
``memory_layers: middle`` counts hidden layers as the paper does ("the
encoder contains 4 hidden layers and is equipped with two memory blocks in
the second and third layer"): ``enc_layers`` hidden layers, the first two
plain, h^l_t = f(W^l h^{l-1}_t + b^l), and each later one reading the
memory block of the hidden layer below it, eq. (1, 2)::

    h~^{l-1}_t = f(Σ_{i=0..N} a_i h^{l-1}_{t-i})
    h^l_t      = f(W^l h^{l-1}_t + W~^l h~^{l-1}_t + b^l)

so the memory blocks sit on hidden layers 2 .. L-1, all but the first and
the last. ``input_window: 2`` feeds two words per position ([e(x_t);
e(x_{t-1})] in each network's reading order). ``dir_size: half`` gives each
network H/2; ``full`` gives H each, projected back to H.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nmt.config import ModelConfig
from nmt.modules.layers import LayerConnection
from nmt.modules.memory_block import MemoryBlock, set_memory_lr_scale


class FSMNLayer(nn.Module):
    """One layer of an FSMN network, in one of three shapes:

    - ``has_memory`` (the block of eq. 3, 5, 6): h1 = f(W_h x + b_h), m = its memory block,
      out = f(W h1 + W~ m + b);
    - not ``has_memory``: one plain hidden layer, out = f(W_h x + b_h);
    - ``has_memory`` without ``own_hidden`` (eq. 1, 2): the hidden layer above a memory block
      of the input, which is the hidden layer below: m = memory block of x, out = f(W x + W~ m + b).
    """

    def __init__(self, input_size: int, size: int, order: int, memory: str, dropout: float, has_memory: bool = True,
                 own_hidden: bool = True):
        super().__init__()
        if not (has_memory or own_hidden):
            raise ValueError("an FSMN layer needs its own hidden layer, a memory block, or both")
        self.dropout = nn.Dropout(dropout)
        self.hidden = nn.Linear(input_size, size) if own_hidden else None
        remembered = size if own_hidden else input_size
        self.memory = MemoryBlock(remembered, order, memory) if has_memory else None
        self.out_hidden = nn.Linear(remembered, size) if has_memory else None
        self.out_memory = nn.Linear(remembered, size, bias=False) if has_memory else None

    def relu_inputs(self) -> list[tuple[nn.Linear, ...]]:
        """The matrices feeding each of this layer's ReLUs (``model.init: he``): W_h; W and W~."""
        feeding = [(self.hidden,)] if self.hidden is not None else []
        return feeding + ([(self.out_hidden, self.out_memory)] if self.memory is not None else [])

    @property
    def memory_on_input(self) -> bool:
        """True when the memory block reads the hidden layer below (the paper's numbering puts it there)."""
        return self.memory is not None and self.hidden is None

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        # the memory block reads back in time only, and padding follows the words in either reading order
        h1 = x if self.hidden is None else torch.relu(self.hidden(self.dropout(x))) * mask.unsqueeze(-1)
        if self.memory is None:
            return h1
        m = self.memory(h1)
        return torch.relu(self.out_hidden(self.dropout(h1)) + self.out_memory(self.dropout(m)))


def previous_word_window(x: Tensor, window: int) -> Tensor:
    """[x_t; x_{t-1}] per position (zeros before the first word) when window == 2."""
    if window == 1:
        return x
    shifted = torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], dim=1)
    return torch.cat([x, shifted], dim=-1)


def reverse_padded(x: Tensor, mask: Tensor) -> Tensor:
    """Reverse each sequence within its length, keeping padding at the end."""
    lengths = mask.sum(dim=1, keepdim=True)
    positions = torch.arange(x.size(1), device=x.device).unsqueeze(0)
    index = torch.where(positions < lengths, lengths - 1 - positions, positions)
    return x.gather(1, index.unsqueeze(-1).expand_as(x))


class FSMNEncoder(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        hidden = cfg.hidden
        self.window = cfg.options.input_window
        directions = 2 if cfg.bidirectional else 1
        size = hidden // 2 if cfg.bidirectional and cfg.dir_size == "half" else hidden
        self.networks = nn.ModuleList()
        for _ in range(directions):
            layers = nn.ModuleList()
            connections = nn.ModuleList()
            for layer in range(cfg.enc_layers):
                input_size = cfg.emb * self.window if layer == 0 else size
                if cfg.options.memory_layers == "all":
                    has_memory, own_hidden = True, True
                else:  # hidden layers 1 and 2 plain, each later one above the memory block of the one below
                    has_memory = layer >= 2
                    own_hidden = not has_memory
                layers.append(FSMNLayer(input_size, size, cfg.options.order, cfg.options.memory, cfg.dropout,
                                        has_memory, own_hidden))
                connections.append(LayerConnection(cfg.layer_connection if layer > 0 else "none", size))
            self.networks.append(nn.ModuleDict({"layers": layers, "connections": connections}))
        total = size * directions
        self.projection = nn.Linear(total, hidden) if total != hidden else nn.Identity()
        self.output_size = hidden
        set_memory_lr_scale(self, cfg.options.memory_lr_scale)

    @property
    def weight_matrices(self) -> int:
        return 3  # W_h, W, W~ per memory block

    def _run(self, network: nn.ModuleDict, x: Tensor, mask: Tensor) -> Tensor:
        x = previous_word_window(x, self.window)
        for layer, connection in zip(network["layers"], network["connections"]):
            x = connection(layer(x, mask), x)
        return x

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        outputs = [self._run(self.networks[0], x, mask)]
        if len(self.networks) == 2:
            backward = self._run(self.networks[1], reverse_padded(x, mask), mask)
            outputs.append(reverse_padded(backward, mask))
        out = self.projection(torch.cat(outputs, dim=-1))
        return out * mask.unsqueeze(-1).to(out.dtype)
