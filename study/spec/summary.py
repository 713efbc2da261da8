"""One-line descriptions of a study for listings: its shape and its trial budget."""

from __future__ import annotations

from nmt.plateau import earliest_stop
from study.spec.expansion import expand


def shape(spec) -> str:
    """"8 rows x 3 seeds" or "10 samples"."""

    f = spec.fields
    if f.search is not None:
        return f"{f.search.num_samples} samples"
    return f"{len({t.label for t in expand(spec)})} rows x {f.seeds} seed{'s' if f.seeds > 1 else ''}"


def budget(spec) -> str:
    """"12 epochs, patience 3", "plateau rule, epochs 10-50" and the trial budget's other limits."""
    train = spec.base_tree()["train"]
    if train.get("early_stop") == "plateau":  # the cap is a safety net; the rule acts from min_epochs on
        cap = train.get("max_epochs", 10)
        limits = [f"plateau rule, epochs {earliest_stop(train.get('min_epochs') or 0, cap)}-{cap}"]
    else:
        limits = [f"{train.get('max_epochs', 10)} epochs"]
    limits += [f"{train[k]} {unit}" for k, unit in (("max_steps", "steps"), ("max_tokens", "tokens")) if train.get(k)]
    if train.get("patience") and train.get("early_stop") != "plateau":
        limits.append(f"patience {train['patience']}")
        if train.get("min_epochs"):
            limits.append(f"not before epoch {train['min_epochs']}")
    return ", ".join(limits)
