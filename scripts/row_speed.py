"""Training speed of a study's models, row by row, timed in one run without training them.

A study's own tokens/s column times each trial under whatever else the machine ran then. This
builds the model of every row of a study file (its first seed's resolved config) and of any extra
rows given as changes to the study's base, as a study file's variants are written, and times one
training step (forward, backward, Adam) of each on random batches (speed does not depend on the
values) of the studies' shape, 128 sentences of 16 pieces (about the 2,000 target tokens of a
Multi30k batch), with the study's vocabulary. The steps run in interleaved rounds, so a slow spell
of the machine touches every model alike; each of --runs runs takes the fastest of --repeats rounds
per model, and the ranges over the runs are printed, with each model's parameters, the encoder's
weight matrices per layer (as the study tables count them) and its forward products per target
token (nmt.benchmarks.models' count: every weight matrix once, each attention over as many source positions
as the batch has; a training step does about 3 times as many). Run from the repository root, on a
quiet machine (the absolute tokens/s depend on it, the ratios much less); for example

    python scripts/row_speed.py search_spaces/multi30k/cells_m30k.yaml
    python scripts/row_speed.py search_spaces/multi30k/depth_srnmt_m30k.yaml \\
        --extra 'LSTM 2L: {model.cell: lstm, model.enc_layers: 2, model.dec_layers: 2, model.attention: mlp,
                 model.srnmt: null, model.plain_output: false}' --against 'SR-NMT 1L' 'LSTM 2L'
"""

import argparse
import statistics
import sys

import torch
import yaml

from nmt.benchmarks.models import forward_flops_per_token, prepare_model
from nmt.benchmarks.timing import interleaved_fastest
from nmt.cli import run_main
from nmt.config import config_from_dict
from nmt.errors import UserError
from nmt.typed_config import apply_overrides
from study.spec.expansion import expand
from study.spec.loading import load_study


def extra_row(text: str) -> tuple[str, dict]:
    """``'LABEL: {key: value, ...}'`` -> (label, changes to the study's base)."""
    try:
        tree = yaml.safe_load(text)
    except yaml.YAMLError:
        tree = None
    if not (isinstance(tree, dict) and len(tree) == 1 and isinstance(next(iter(tree.values())), dict)):
        raise UserError(f"--extra {text!r}: give one row as 'LABEL: {{model.KEY: VALUE, ...}}', "
                        "e.g. 'LSTM 2L: {model.cell: lstm, model.enc_layers: 2}'")
    (label, changes), = tree.items()
    return str(label), changes


def row_models(study_file: str, extras: list[str]) -> tuple[dict[str, dict], int]:
    """The model section of every row (the study's rows, then the extras) and the vocabulary."""
    spec = load_study(study_file)
    models = {}
    for trial in expand(spec):
        models.setdefault(trial.label, trial.config["model"])
    for text in extras:
        label, changes = extra_row(text)
        if label in models:
            raise UserError(f"--extra {label!r}: the study has a row of that name; choose another label")
        tree = apply_overrides(spec.base_tree(), list(changes.items()))
        models[label] = config_from_dict(tree, source=f"--extra {label!r}").to_dict()["model"]
    spm = spec.base_tree().get("data", {}).get("spm", {})
    if "vocab_size" not in spm:
        raise UserError(f"{study_file}: no data.spm.vocab_size, so no vocabulary size to build the models with")
    return models, int(spm["vocab_size"])


def ranges(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return format(low, fmt) if format(low, fmt) == format(high, fmt) else f"{low:{fmt}}-{high:{fmt}}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", help="a study file (or a built-in study's name)")
    parser.add_argument("--extra", action="append", default=[], metavar="'LABEL: {KEY: VALUE, ...}'",
                        help="a row more: changes to the study's base, as a variant's 'set' (repeatable)")
    parser.add_argument("--against", nargs="+", metavar="LABEL",
                        help="rows whose tokens/s the others are divided by (default: the table's reference)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (default 1, as each study trial)")
    parser.add_argument("--runs", type=int, default=3, help="independent interleaved measurements (default 3)")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds per run, the fastest counts (default 5)")
    parser.add_argument("--batch", default="128x16", help="sentences x pieces per batch (default 128x16)")
    args = parser.parse_args(argv)
    for option in ("threads", "runs", "repeats"):
        if getattr(args, option) < 1:
            raise UserError(f"--{option} {getattr(args, option)}: give a whole number of 1 or more")
    try:
        batch, length = (int(n) for n in args.batch.split("x"))
    except ValueError:
        raise UserError(f"--batch {args.batch}: give sentences x pieces, e.g. 128x16") from None
    models, vocab = row_models(args.study, args.extra)
    against = args.against or [load_study(args.study).fields.table.reference or next(iter(models))]
    for label in against:
        if label not in models:
            raise UserError(f"--against {label!r}: no such row; the rows are {', '.join(models)}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    prepared = {name: prepare_model(section, batch, length, vocab, torch.device("cpu"))
                for name, section in models.items()}
    tokens = batch * length
    speeds: dict[str, list[float]] = {name: [] for name in prepared}
    for run in range(args.runs):
        seconds = interleaved_fastest({name: p["train_step"] for name, p in prepared.items()}, args.repeats)
        for name, s in seconds.items():
            speeds[name].append(tokens / s)
        print(f"run {run + 1} of {args.runs}: " + ", ".join(f"{n} {tokens / s:,.0f}" for n, s in seconds.items()),
              flush=True)
    print(f"\n{args.study}, vocabulary {vocab:,}, batches of {batch}x{length} pieces, {args.threads} thread(s), "
          f"torch {torch.__version__}; the fastest of {args.repeats} interleaved rounds, ranges over {args.runs} runs\n")
    print("| model | params | WM | forward MFLOP/token | train tokens/s | "
          + " | ".join(f"tokens/s vs {label}" for label in against) + " |")
    print("|---" * (5 + len(against)) + "|")
    for name, values in speeds.items():
        model = prepared[name]["model"]
        ratios = [ranges([a / b for a, b in zip(values, speeds[label])], ".2f") + "x" for label in against]
        print(f"| {name} | {model.parameter_count:,} | {model.weight_matrices} | "
              f"{forward_flops_per_token(model, length) / 1e6:.2f} | {ranges(values, ',.0f')} | {' | '.join(ratios)} |")
    print("\nmedian tokens/s: " + ", ".join(f"{n} {statistics.median(v):,.0f}" for n, v in speeds.items()))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
