"""Part 4 of ``nmt.bench``: each speed target of the project with its ratio measured in this run, met
or missed - whole-model training tokens/s of SR-NMT 3L and 4L against LSTM 2L, ATR and FSMN against
GRU (at each of the given sizes), and beam-5 decoding against the old search (part 3's ratios).
The study platform's own target, its fixed cost around the trials, is ``python -m study.bench
--fixed-cost``'s: the core does not measure the platform."""

from __future__ import annotations

import torch

from nmt.benchmarks.models import prepare_model, study_models
from nmt.benchmarks.timing import interleaved_fastest

# (what, model, baseline model, the least ratio wanted): training tokens/s of whole models. The
# SR-NMT paper (Table 1) has SR-NMT 3L at 1.16x its LSTM 2L, the ATR paper (Table 4) ATR at 1.26x
# GRU, the FSMN paper 1.4-2x; the project's targets are set above them.
TRAINING_TARGETS = [
    ("SR-NMT 3L / LSTM 2L", "pair/SR-NMT 3L", "pair/LSTM 2L", 1.3),
    ("SR-NMT 4L / LSTM 2L", "ablation_srnmt/SR-NMT 4L", "pair/LSTM 2L", 1.0),
    ("ATR / GRU", "cells/atr", "cells/gru", 1.3),
    ("FSMN / GRU", "cells/fsmn", "cells/gru", 2.0),
]
BEAM_TARGET = 2.0  # beam-5 words/s against the search that kept finished sentences in the batch


def training_targets(size: dict, device: torch.device, repeats: int) -> list[dict]:
    """Training tokens/s of the models the targets compare, timed in the same interleaved rounds."""
    models = study_models(size["hidden"])
    names = sorted({name for _, a, b, _ in TRAINING_TARGETS for name in (a, b)})
    steps = {name: prepare_model(models[name], size["batch"], size["length"], size["vocab"], device)["train_step"]
             for name in names}
    seconds = interleaved_fastest(steps, repeats)
    rows = []
    for what, model, baseline, wanted in TRAINING_TARGETS:
        ratio = seconds[baseline] / seconds[model]
        rows.append({"target": f"{what} training tokens/s", **size, "ratio": ratio, "wanted": wanted, "bound": ">=",
                     "met": ratio >= wanted,
                     "tokens_per_s": size["batch"] * size["length"] / seconds[model],
                     "baseline_tokens_per_s": size["batch"] * size["length"] / seconds[baseline]})
    return rows


def target_table(sizes: list[dict], decoding: list[dict] | None, device: torch.device, repeats: int,
                 log) -> list[dict]:
    """Every speed target with its ratio measured in this run: met or missed."""
    rows = []
    for size in sizes:
        rows += training_targets(size, device, repeats)
    for row in decoding or []:
        rows.append({"target": "beam-5 words/s / the search that kept finished sentences",
                     "hidden": row["hidden"], "vocab": row["vocab"], "ratio": row["speedup"], "wanted": BEAM_TARGET,
                     "bound": ">=", "met": row["speedup"] >= BEAM_TARGET})
    for row in rows:
        where = f"H={row['hidden']}, vocabulary {row['vocab']:,}"
        if "batch" in row:
            where += f", {row['batch']} x {row['length']} tokens"
        log(f"  {row['target']:58s} x{row['ratio']:.2f}  (wanted {row['bound']} {row['wanted']:.1f}: "
            f"{'met' if row['met'] else 'MISSED'})  {where}")
    if decoding is None:
        log("  beam-5 decoding: not measured (--skip decoding)")
    return rows
