"""FSMN, the feedforward sequential memory network (Hou et al., "Feedforward Sequential Memory
Networks based Encoder-Decoder Model for Machine Translation"): no recurrence at all; each
layer's memory block is a learned filter over the last N positions. Its modules are
``nmt.encoders.fsmn`` (eq. 3, 5, 6), ``nmt.decoders.fsmn`` and ``nmt.modules.memory_block``;
this file declares the unit and its options.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from nmt.decoders.fsmn import FSMNDecoder
from nmt.encoders.fsmn import FSMNEncoder, FSMNLayer
from nmt.typed_config import setting
from nmt.units import Unit


@dataclass
class FSMNOptions:
    memory: Literal["scalar", "vector"] = setting("scalar", "one tap weight per position (scalar) or per element")
    order: int = setting(10, "memory order N: the block reads taps 0..N", ge=0)
    input_window: Literal[1, 2] = setting(1, "words per input position (2: [e(x_t); e(x_{t-1})])")
    # the paper's encoder: 4 hidden layers, memory blocks on layers 2 and 3 only
    memory_layers: Literal["all", "middle"] = setting(
        "all", "all: each encoder layer is two hidden layers with a memory block between them; middle: "
        "enc_layers hidden layers with memory blocks on all but the first and the last, each read by the "
        "layer above (the paper's)")
    memory_lr_scale: float = setting(1.0, "learning rate of the memory taps / the rest (the paper: 0.01)",
                                     gt=0.0, le=1.0, note=", e.g. 0.01 (the paper's)")


def _bench_layer(size: int):
    return FSMNLayer(size, size, order=10, memory="vector", dropout=0.0, has_memory=True)


def _validate(model, fail) -> None:
    options = model.options
    if options.memory_layers == "middle" and model.enc_layers < 3:
        fail("model.fsmn.memory_layers", options.memory_layers, f"the encoder's middle layers are those between the "
             f"first and the last; with enc_layers = {model.enc_layers} there are none. Use enc_layers >= 3 "
             "(the paper: 4)")
    if model.attention == "dot":
        fail("model.attention", model.attention, "the fsmn decoder queries with [v~; v1] (2 x hidden), "
             "which dot attention cannot compare with the encoder states; use general (the paper's) or mlp")


UNIT = Unit(
    name="fsmn", label="FSMN", rank=8, options=FSMNOptions,
    paper="Hou et al., Feedforward Sequential Memory Networks based Encoder-Decoder Model for Machine Translation",
    recurrence="none", defaults={"attention": "general"}, relu_layers=True,
    encoder=FSMNEncoder, decoder=FSMNDecoder, validate=_validate, bench_layer=_bench_layer,
    shrink=lambda options: dataclasses.replace(options, order=min(options.order, 4)),
)
