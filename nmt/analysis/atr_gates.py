"""How ATR's twin gates behave on real text (Zhang et al. 2018, Sec. 5.1 and 5.3).

Runs the model teacher-forced over a test set and records, at every position
of one ATR layer, the input gate i_t = σ(q_t + p_t) and the forget gate
f_t = σ(q_t - p_t). It reports:

- Pearson's r of i and f over all gate elements of the test set (the paper:
  r = -0.9819, without saying over which values), over the per-token means
  (1/d_h) Σ_i i_{t,i} and (1/d_h) Σ_i f_{t,i}, and over the per-position
  means of Figure 3;
- Figure 3: those per-token means averaged over all sentences, per position;
- eq. (10): h_t = Σ_{k<=t} g_k ⊙ W_x x_k with g_k = i_k ⊙ Π_{l=k+1..t} f_l,
  drawn for one sentence as a (t, k) map of the mean weight over units, with
  each position's strongest earlier input (the paper's Figure 4 dependencies).

A conditional decoder (``decoder_style: conditional``, the paper's own) has two
ATR cells per step: the lower one reads the word, s_t = i_t ⊙ W y_t + f_t ⊙ h_{t-1},
the higher one the context, h_t = i'_t ⊙ W' c_t + f'_t ⊙ s_t. The gates reported
are the lower cell's, and eq. (10) unrolls through both, so a word's weight is
g_k = (i_k ⊙ f'_k) ⊙ Π_{l=k+1..t} (f_l ⊙ f'_l); the higher cell's correlation is
reported beside them.

    python -m nmt.analysis.atr_gates --checkpoint runs/atr --out analysis/atr
"""

from __future__ import annotations

import argparse
import sys

import torch

from nmt.analysis.common import (Run, add_run_arguments, evaluation_text, load_run, prepare_out, save_figure,
                                 traced_batches, write_summary)
from nmt.cells.atr import ATRCell
from nmt.cli import command_parser, run_main
from nmt.errors import UserError
from nmt.figures import subplots
from nmt.measures import pearson

MIN_SENTENCES_PER_POSITION = 10  # positions seen in fewer sentences are too noisy to plot


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "nmt.analysis.atr_gates",
        description="ATR input/forget gate correlation (Pearson r), the position-wise "
                    "gate means of Zhang et al. 2018 Figure 3, and the eq. (10) weights "
                    "g_k of one sentence.")
    add_run_arguments(parser)
    parser.add_argument("--side", choices=("decoder", "encoder"), default="decoder",
                        help="which ATR stack to read (default: decoder, as the paper's Figure 4; the encoder's "
                             "left-to-right direction otherwise)")
    parser.add_argument("--layer", type=int, default=1, help="layer of that stack, from 1 (default 1)")
    parser.add_argument("--sentence", type=int, default=0, help="test sentence (0-based) whose g_k weights are drawn")
    return parser


def atr_layer(run: Run, side: str, layer: int) -> tuple[ATRCell, ATRCell | None]:
    """The layer's ATR cell and, in a conditional decoder's attending layer, the higher cell above it."""
    if run.cfg.model.cell != "atr":
        raise UserError(f"--checkpoint {run.directory}: its model.cell is {run.cfg.model.cell}; "
                        "atr_gates needs a model with model.cell: atr")
    cells = run.model.decoder.cells if side == "decoder" else run.model.encoder.cells
    if not 1 <= layer <= len(cells):
        raise UserError(f"--layer {layer}: the {side} has {len(cells)} layer(s); choose 1..{len(cells)}")
    above = run.model.decoder.higher_cells if side == "decoder" else {}
    return cells[layer - 1], above[str(layer - 1)] if str(layer - 1) in above else None


def record_gates(run: Run, cell: ATRCell, pairs, side: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per sentence (input order): (i, f), each (length, d_h), padding removed."""
    gates: list = [None] * len(pairs)
    for batch, trace in traced_batches(run, pairs, cell):
        forward = [(i, f) for i, f, direction in trace if direction == 0]
        i = torch.stack([i for i, _ in forward], dim=1)
        f = torch.stack([f for _, f in forward], dim=1)
        lengths = (batch.tgt_mask if side == "decoder" else batch.src_mask).sum(dim=1).tolist()
        for row, (index, length) in enumerate(zip(batch.indices, lengths)):
            gates[index] = (i[row, :length].double(), f[row, :length].double())
    return gates


def dependency_vectors(i: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """g (T, T, d_h) of eq. (10): g[t, k] = i_k ⊙ Π_{l=k+1..t} f_l for k <= t, zero above the diagonal.
    Then h_t = Σ_k g[t, k] ⊙ W_x x_k + (Π_{l<=t} f_l) ⊙ h_0, exactly, for the linear candidate."""
    length = i.size(0)
    g = torch.zeros(length, length, i.size(1), dtype=i.dtype)
    for t in range(length):
        carried = torch.ones_like(i[0])
        for k in range(t, -1, -1):
            g[t, k] = i[k] * carried
            carried = carried * f[k]
    return g


def token_labels(run: Run, pairs, index: int, side: str) -> list[str]:
    source, reference = pairs[index]
    if side == "decoder":  # the state at t reads y_{t-1}: BOS, y_1, ...
        return ["<s>"] + [run.tgt_vocab.piece(t) for t in run.tgt_vocab.encode(reference)]
    return [run.src_vocab.piece(t) for t in run.src_vocab.encode(source)] + ["</s>"]


def chained_gates(lower: tuple[torch.Tensor, torch.Tensor], higher: tuple[torch.Tensor, torch.Tensor]
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """A conditional decoder's step as one cell of eq. (10) for its word inputs: the word enters with
    i ⊙ f' (the higher cell keeps f' of the lower state), the state carries on with f ⊙ f'."""
    (i, f), (_, f_higher) = lower, higher
    return i * f_higher, f * f_higher


def analyse(run: Run, cell: ATRCell, pairs, side: str, layer: int, sentence: int,
            higher: ATRCell | None = None) -> tuple[dict, dict]:
    gates = record_gates(run, cell, pairs, side)
    higher_gates = record_gates(run, higher, pairs, side) if higher is not None else None
    all_i = torch.cat([i.flatten() for i, _ in gates])
    all_f = torch.cat([f.flatten() for _, f in gates])
    token_i = [i.mean(dim=1) for i, _ in gates]
    token_f = [f.mean(dim=1) for _, f in gates]
    longest = max(len(t) for t in token_i)
    positions = []
    for t in range(longest):
        rows = [k for k, values in enumerate(token_i) if len(values) > t]
        if len(rows) >= MIN_SENTENCES_PER_POSITION:
            positions.append({"position": t + 1, "sentences": len(rows),
                              "input_gate": float(torch.stack([token_i[k][t] for k in rows]).mean()),
                              "forget_gate": float(torch.stack([token_f[k][t] for k in rows]).mean())})
    i, f = gates[sentence] if higher_gates is None else chained_gates(gates[sentence], higher_gates[sentence])
    weights = dependency_vectors(i, f).mean(dim=-1)  # the mean weight over units
    labels = token_labels(run, pairs, sentence, side)[: weights.size(0)]
    strongest = [{"token": labels[t], "strongest_earlier": labels[int(weights[t, :t].argmax())],
                  "weight": float(weights[t, :t].max())} for t in range(1, weights.size(0))]
    summary = {
        "checkpoint": str(run.directory), "side": side, "layer": layer, "sentences": len(pairs),
        "gate_elements": all_i.numel(),
        "pearson_r_elements": pearson(all_i, all_f),
        "pearson_r_token_means": pearson(torch.cat(token_i), torch.cat(token_f)),
        "pearson_r_position_means": pearson([p["input_gate"] for p in positions], [p["forget_gate"] for p in positions]),
        "mean_input_gate": float(all_i.mean()), "mean_forget_gate": float(all_f.mean()),
        "positions": positions,
        "example": {"sentence": sentence, "tokens": labels, "dependencies": strongest},
    }
    if higher_gates is not None:
        summary["cell"] = "lower (the conditional decoder's cell that reads the words)"
        summary["pearson_r_elements_higher_cell"] = pearson(torch.cat([i.flatten() for i, _ in higher_gates]),
                                                            torch.cat([f.flatten() for _, f in higher_gates]))
    return summary, {"weights": weights, "labels": labels, "conditional": higher_gates is not None}


def plot_positions(summary: dict, path) -> None:
    fig, ax = subplots(figsize=(6, 3.5))
    xs = [p["position"] for p in summary["positions"]]
    ax.plot(xs, [p["input_gate"] for p in summary["positions"]], marker="o", ms=3, label="input gate i")
    ax.plot(xs, [p["forget_gate"] for p in summary["positions"]], marker="s", ms=3, label="forget gate f")
    ax.set_xlabel(f"position in the sentence ({summary['side']})")
    ax.set_ylabel("mean gate value")
    which = "ATR gates of the conditional decoder's lower cell" if "cell" in summary else "ATR gates"
    ax.set_title(f"{which} per position\nr = {summary['pearson_r_elements']:.3f} (elements), "
                 f"{summary['pearson_r_token_means']:.3f} (token means)", fontsize=9)
    ax.legend()
    save_figure(fig, path)


def plot_dependencies(example: dict, path) -> None:
    weights, labels = example["weights"].numpy(), example["labels"]
    size = max(4.0, 0.35 * len(labels) + 2)
    fig, ax = subplots(figsize=(size, size))
    masked = weights.copy()
    masked[masked == 0] = float("nan")
    image = ax.imshow(masked, cmap="viridis")
    for t in range(1, len(labels)):
        k = int(weights[t, :t].argmax())
        ax.plot(k, t, marker="x", color="red", ms=6)
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel("input k")
    ax.set_ylabel("state t")
    through = " through both cells of the conditional decoder" if example["conditional"] else ""
    ax.set_title(f"ATR eq. (10){through}: mean g_k per state (x = strongest earlier input)", fontsize=9)
    fig.colorbar(image, ax=ax, shrink=0.7)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run = load_run(args.checkpoint, args.threads)
    cell, higher = atr_layer(run, args.side, args.layer)
    pairs = evaluation_text(run.cfg, args.source, args.reference, args.limit)
    if not 0 <= args.sentence < len(pairs):
        raise UserError(f"--sentence {args.sentence}: the test set has {len(pairs)} sentences; "
                        f"choose 0..{len(pairs) - 1}")
    print(f"atr_gates: {len(pairs)} sentences, {args.side} layer {args.layer} of {run.directory}", file=sys.stderr)
    summary, example = analyse(run, cell, pairs, args.side, args.layer, args.sentence, higher)
    out = prepare_out(args.out)
    plot_positions(summary, out / "atr_gates_positions.png")
    plot_dependencies(example, out / "atr_dependencies.png")
    write_summary(out / "atr_gates.json", summary)
    print(f"Pearson r(input gate, forget gate) = {summary['pearson_r_elements']:.4f} over "
          f"{summary['gate_elements']:,} gate elements; {summary['pearson_r_token_means']:.4f} over token means; "
          f"{summary['pearson_r_position_means']:.4f} over the per-position means of the plot (paper: -0.9819)")
    print(f"mean input gate {summary['mean_input_gate']:.3f}, mean forget gate {summary['mean_forget_gate']:.3f}")
    if "cell" in summary:
        print(f"conditional decoder: the gates above are its {summary['cell']}; its higher cell's r over gate "
              f"elements is {summary['pearson_r_elements_higher_cell']:.4f}")
    print("strongest earlier input (eq. 10): " + ", ".join(
        f"{d['token']}<-{d['strongest_earlier']}" for d in summary["example"]["dependencies"][:12]))
    print(f"wrote {out}/atr_gates_positions.png, atr_dependencies.png (and .pdf), atr_gates.json")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
