"""Training speed of the depth study's SR-NMT models against the SR-NMT paper's LSTM baseline.

The SR-NMT paper's Table 1 (one GPU) trains SR-NMT 1L at 7,900 tokens/s, 2L at 5,500, 3L at
4,300 and 4L at 3,600, and its LSTM 2L baseline (OpenNMT-py: input feeding, MLP attention, about
the parameters of SR-NMT 3L) at 3,700: a 3-layer SR-NMT trains 1.16x as fast as a 2-layer LSTM.

This times one training step (forward, backward, Adam) of each model on random batches of the
Multi30k studies' shape (128 sentences of 16 pieces, about the 2,000 target tokens of a batch;
speed does not depend on the values) with the study's vocabulary. The SR-NMT models are the model
section of search_spaces/multi30k/depth_srnmt_m30k.yaml with 1 to N layers; the LSTM 2L is the same
section (size, dropout, initialisation) with the LSTM unit and its own decoder (Luong style with
input feeding, MLP attention, output tanh(W [h; c])). The steps run in interleaved rounds, so a
slow spell of the machine touches every model alike; each of --runs runs takes the fastest of
--repeats rounds per model, and the ranges over the runs are printed beside each model's forward
products per target token (nmt.bench's count: every weight matrix once, each attention over as many
source positions as the batch has; a training step does about 3 times as many). Run from the repository
root, on a quiet machine (the absolute tokens/s depend on it, the ratios much less):

    python results/reference/analysis/depth_speed.py [--layers 8] [--threads 1] [--runs 3]
"""

import argparse
import copy
import pathlib
import statistics
import sys

import torch
import yaml

from nmt.bench import forward_flops_per_token, interleaved_fastest, prepare_model
from nmt.cli import run_main
from nmt.errors import UserError

STUDY_FILE = pathlib.Path("search_spaces/multi30k/depth_srnmt_m30k.yaml")
PAPER_TOKENS_PER_S = {"SR-NMT 1L": 7900, "SR-NMT 2L": 5500, "SR-NMT 3L": 4300, "SR-NMT 4L": 3600,
                      "LSTM 2L": 3700}
SRNMT_ONLY = ("srnmt", "plain_output")  # the LSTM baseline keeps its own output layer


def model_sections(study_file: pathlib.Path, layers: int) -> dict[str, dict]:
    """The study's model section at 1..``layers`` layers, and the LSTM 2L baseline built from it."""
    base = yaml.safe_load(study_file.read_text())["base"]["model"]
    models = {f"SR-NMT {n}L": {**copy.deepcopy(base), "enc_layers": n, "dec_layers": n}
              for n in range(1, layers + 1)}
    lstm = {key: value for key, value in copy.deepcopy(base).items() if key not in SRNMT_ONLY}
    models["LSTM 2L"] = {**lstm, "cell": "lstm", "enc_layers": 2, "dec_layers": 2, "attention": "mlp"}
    return models


def vocabulary(study_file: pathlib.Path) -> int:
    return int(yaml.safe_load(study_file.read_text())["data"]["spm"]["vocab_size"])


def ranges(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return format(low, fmt) if format(low, fmt) == format(high, fmt) else f"{low:{fmt}}-{high:{fmt}}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=8, help="SR-NMT depths 1..N (default 8, as the study)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (default 1, as each study trial)")
    parser.add_argument("--runs", type=int, default=3, help="independent interleaved measurements (default 3)")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds per run, the fastest counts (default 5)")
    parser.add_argument("--batch", default="128x16", help="sentences x pieces per batch (default 128x16)")
    args = parser.parse_args(argv)
    for option in ("layers", "threads", "runs", "repeats"):
        if getattr(args, option) < 1:
            raise UserError(f"--{option} {getattr(args, option)}: give a whole number of 1 or more")
    try:
        batch, length = (int(n) for n in args.batch.split("x"))
    except ValueError:
        raise UserError(f"--batch {args.batch}: give sentences x pieces, e.g. 128x16") from None
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    vocab = vocabulary(STUDY_FILE)
    prepared = {name: prepare_model(section, batch, length, vocab, torch.device("cpu"))
                for name, section in model_sections(STUDY_FILE, args.layers).items()}
    tokens = batch * length
    speeds: dict[str, list[float]] = {name: [] for name in prepared}
    for run in range(args.runs):
        seconds = interleaved_fastest({name: p["train_step"] for name, p in prepared.items()}, args.repeats)
        for name, s in seconds.items():
            speeds[name].append(tokens / s)
        print(f"run {run + 1} of {args.runs}: " + ", ".join(f"{n} {tokens / s:,.0f}" for n, s in seconds.items()),
              flush=True)
    print(f"\n{STUDY_FILE} model section, vocabulary {vocab:,}, batches of {batch}x{length} pieces, "
          f"{args.threads} thread(s), torch {torch.__version__}; the fastest of {args.repeats} interleaved rounds, "
          f"ranges over {args.runs} runs\n")
    print("| model | params | forward MFLOP/token | train tokens/s | step time vs 1L | tokens/s vs LSTM 2L | "
          "paper tokens/s (GPU) | paper step vs 1L | paper vs LSTM 2L |")
    print("|---|---|---|---|---|---|---|---|---|")
    one, lstm = speeds["SR-NMT 1L"], speeds["LSTM 2L"]
    paper_one, paper_lstm = PAPER_TOKENS_PER_S["SR-NMT 1L"], PAPER_TOKENS_PER_S["LSTM 2L"]
    for name, values in speeds.items():
        params = prepared[name]["model"].parameter_count
        mflops = forward_flops_per_token(prepared[name]["model"], length) / 1e6
        vs_one = [a / b for a, b in zip(one, values)]
        vs_lstm = [a / b for a, b in zip(values, lstm)]
        paper = PAPER_TOKENS_PER_S.get(name)
        paper_cells = (f"{paper:,} | {paper_one / paper:.2f}x | {paper / paper_lstm:.2f}x" if paper
                       else "- | - | -")
        print(f"| {name} | {params:,} | {mflops:.2f} | {ranges(values, ',.0f')} | {ranges(vs_one, '.2f')}x | "
              f"{ranges(vs_lstm, '.2f')}x | {paper_cells} |")
    print("\nmedian tokens/s: " + ", ".join(f"{n} {statistics.median(v):,.0f}" for n, v in speeds.items()))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
