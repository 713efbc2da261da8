"""Paper-style names for components and cells, used in table row labels."""

from __future__ import annotations

from nmt.units import label, units

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


def component_names(key: str) -> tuple[str, str]:
    """A unit's option goes by its name alone: model.srnmt.highway is "Highway", as model.highway."""
    parts = key.split(".")
    if len(parts) == 3 and parts[0] == "model" and parts[1] in units():
        key = f"model.{parts[2]}"
    if key in COMPONENTS:
        return COMPONENTS[key]
    name = key.split(".")[-1].replace("_", " ")
    return name.capitalize(), name


def display_value(key: str, value) -> str:
    if key == "model.cell":
        return label(value)
    return str(value)


# config keys as a figure's axis names
AXES = {
    "model.enc_layers": "encoder layers", "model.dec_layers": "decoder layers", "model.hidden": "hidden size",
    "model.emb": "embedding size", "model.dropout": "dropout", "model.cell": "recurrent unit",
    "train.lr": "learning rate", "train.batch_tokens": "batch size (tokens)", "train.max_epochs": "epochs",
    "model.enc_layers+model.dec_layers": "encoder and decoder layers (each)",
}


def axis_name(key: str) -> str:
    """A readable name of a config key or of a grid axis that links keys: "model.enc_layers" ->
    "encoder layers"; "model.hidden+model.emb" -> "hidden size = embedding size"."""
    if key not in AXES and "+" in key:
        return " = ".join(axis_name(part) for part in key.split("+"))
    return AXES.get(key, key.split(".")[-1].replace("_", " "))
