"""The learned FSMN memory filters (Hou et al., Fig. 3).

Every memory block m_t = f(Σ_{i=0..N} a_i h_{t-i}) has one learned filter
a_0..a_N (scalar memory) or one per dimension (vector memory, drawn as the
mean over dimensions with its spread). The paper draws the last block of the
forward encoder ('FSMNEnc'), the reverse encoder ('FSMNEnc-R') and the
decoder ('FSMNDec') and finds the taps falling off with distance from the
current word.

    python -m nmt.analysis.fsmn_filters --checkpoint runs/fsmn --out analysis/fsmn
"""

from __future__ import annotations

import argparse
import sys

import torch

from nmt.analysis.common import Run, add_run_arguments, load_run, prepare_out, save_figure, write_summary
from nmt.cli import command_parser, run_main
from nmt.errors import UserError
from nmt.figures import subplots


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "nmt.analysis.fsmn_filters",
        description="Plot the learned FSMN memory filters a_0..a_N of the last memory "
                    "block of the forward encoder, the reverse encoder and the decoder "
                    "(Hou et al., Fig. 3).")
    add_run_arguments(parser, text=False)
    parser.add_argument("--all-layers", action="store_true", help="draw every memory block, not only the last of each")
    return parser


def memory_blocks(run: Run, all_layers: bool) -> dict[str, torch.Tensor]:
    """{name: taps (N+1,) or (N+1, H)} in the paper's naming."""
    if run.cfg.model.cell != "fsmn":
        raise UserError(f"--checkpoint {run.directory}: its model.cell is {run.cfg.model.cell}; "
                        "fsmn_filters needs a model with model.cell: fsmn")
    stacks = {}
    for d, network in enumerate(run.model.encoder.networks):
        # a block that the layer above reads (memory_layers: middle) is numbered by the hidden layer it reads
        stacks["FSMNEnc-R" if d == 1 else "FSMNEnc"] = [
            (number - 1 if layer.memory_on_input else number, layer.memory) for number, layer in enumerate(network["layers"], 1)]
    stacks["FSMNDec"] = list(enumerate((layer.memory for layer in run.model.decoder.layers), 1))
    blocks = {}
    for name, layers in stacks.items():
        numbered = [(number, block) for number, block in layers if block is not None]
        chosen = numbered if all_layers else [numbered[-1]]
        for number, block in chosen:
            blocks[f"{name} layer {number}"] = block.taps.detach().double()
    return blocks


def describe(taps: torch.Tensor) -> dict:
    if taps.dim() == 1:
        return {"kind": "scalar", "taps": taps.tolist()}
    return {"kind": "vector", "taps": taps.mean(dim=1).tolist(), "taps_std": taps.std(dim=1).tolist(),
            "taps_abs_mean": taps.abs().mean(dim=1).tolist()}


def plot(filters: dict[str, dict], path) -> None:
    fig, ax = subplots(figsize=(6, 3.8))
    for name, info in filters.items():
        xs = list(range(len(info["taps"])))
        ax.plot(xs, info["taps"], marker="o", ms=3, label=name)
        if info["kind"] == "vector":
            low = [m - s for m, s in zip(info["taps"], info["taps_std"])]
            high = [m + s for m, s in zip(info["taps"], info["taps_std"])]
            ax.fill_between(xs, low, high, alpha=0.15)
    ax.axhline(0.0, color="grey", lw=0.5)
    ax.set_xlabel("tap i (distance from the current word)")
    ax.set_ylabel("a_i" + (" (mean over dimensions ± std)" if any(f["kind"] == "vector" for f in filters.values()) else ""))
    ax.set_title("Learned FSMN memory filters (cf. Hou et al., Fig. 3)", fontsize=10)
    ax.legend(fontsize=8)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run = load_run(args.checkpoint, args.threads)
    filters = {name: describe(taps) for name, taps in memory_blocks(run, args.all_layers).items()}
    out = prepare_out(args.out)
    plot(filters, out / "fsmn_filters.png")
    order = run.cfg.model.options.order
    write_summary(out / "fsmn_filters.json", {"checkpoint": str(run.directory), "order": order,
                                               "memory": run.cfg.model.options.memory, "filters": filters})
    for name, info in filters.items():
        print(f"{name:<22} " + " ".join(f"{a:+.3f}" for a in info["taps"]))
    print(f"wrote {out}/fsmn_filters.png (and .pdf), fsmn_filters.json")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
