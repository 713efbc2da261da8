"""Paper-style names for components and cells, used in table row labels."""

from __future__ import annotations

# key -> (name when it is the only component removed, short name in combinations)
COMPONENTS = {
    "model.layer_norm": ("LayerNorm", "LN"),
    "model.multi_attention": ("Multi Attention", "MA"),
    "model.highway": ("Highway", "highway"),
    "model.peephole": ("Peephole", "PH"),
    "model.input_feeding": ("Input feeding", "IF"),
    "model.deep_output": ("Deep output", "DO"),
    "model.bidirectional": ("Bidirectional encoder", "BiEnc"),
    "model.tie_embeddings": ("Tied embeddings", "TE"),
}

CELLS = {"lstm": "LSTM", "gru": "GRU", "rnn": "RNN", "ran": "RAN", "atr": "ATR", "sru": "SRU", "srnmt": "SR-NMT",
         "fsmn": "FSMN"}


def component_names(key: str) -> tuple[str, str]:
    if key in COMPONENTS:
        return COMPONENTS[key]
    name = key.split(".")[-1].replace("_", " ")
    return name.capitalize(), name


def display_value(key: str, value) -> str:
    if key == "model.cell":
        return CELLS.get(value, str(value))
    return str(value)
