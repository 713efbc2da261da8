"""What portable numerics cost: training tokens/s of the Multi30k studies' models, native against
portable (and against pinning 1, the AVX2 pinning portable meant in earlier versions), in one run.

Each setting needs its own process (the CPU kernels are fixed at torch's first computation), so every
round starts one process per setting, in alternating order, each timing the same models' training
steps (forward, backward, Adam; random batches of the studies' shape: 150 sentences of 13 target
pieces, an 8,000-piece vocabulary, one thread). The ratio of the medians over rounds is printed;
the machine's load moves both settings alike within a round. Run from the repository root:

    python scripts/numerics_cost.py [--rounds 5] [--models gru srnmt] [--settings native portable portable-1]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

from nmt.cli import run_main
from nmt.numerics import PINNING_1_ENV, PORTABLE_ENV

SETTINGS = ("native", "portable", "portable-1")

MODELS = {
    "gru": {"cell": "gru", "hidden": 128, "emb": 128},
    "atr": {"cell": "atr", "hidden": 128, "emb": 128},
    "srnmt": {"cell": "srnmt", "hidden": 128, "emb": 128, "enc_layers": 4, "dec_layers": 4},
    "fsmn": {"cell": "fsmn", "hidden": 128, "emb": 128, "enc_layers": 4},
}

# one process: apply the setting first, then time each model's training step (best of 5 after a warm-up)
TIMER = """
import json, sys, time
from nmt.numerics import adam_options, apply_numerics
setting = sys.argv[1]
apply_numerics("portable" if setting == "portable" else "native")
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
from nmt.benchmarks.models import prepare_model
out = {}
for name, section in json.loads(sys.argv[2]).items():
    prepared = prepare_model(section, batch=150, length=13, vocab=8000, device=torch.device("cpu"),
                             adam=adam_options(setting))
    prepared["train_step"]()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        prepared["train_step"]()
        times.append(time.perf_counter() - start)
    out[name] = 150 * 13 / min(times)
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "tokens_per_s": out}))
"""


def one_process(numerics: str, models: dict) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in PORTABLE_ENV}
    env = {**clean, **PINNING_1_ENV} if numerics == "portable-1" else clean
    done = subprocess.run([sys.executable, "-c", TIMER, numerics, json.dumps(models)], capture_output=True, text=True,
                          env=env, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"the {numerics} timing process failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of one process per setting (default 5)")
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=sorted(MODELS))
    parser.add_argument("--settings", nargs="+", choices=SETTINGS, default=list(SETTINGS),
                        help="native, portable (pinning 2) and portable-1 (MKL on AVX2, torch's default Adam)")
    args = parser.parse_args(argv)
    models = {name: MODELS[name] for name in args.models}
    settings = list(dict.fromkeys(args.settings))
    speeds: dict[str, dict[str, list[float]]] = {s: {} for s in settings}
    capability = {}
    for round_number in range(args.rounds):
        shift = round_number % len(settings)  # each setting first in turn: load moves them alike
        for numerics in settings[shift:] + settings[:shift]:
            result = one_process(numerics, models)
            capability[numerics] = result["capability"]
            for name, value in result["tokens_per_s"].items():
                speeds[numerics].setdefault(name, []).append(value)
        print(f"round {round_number + 1} of {args.rounds} done", file=sys.stderr)
    print(f"training tokens/s, median of {args.rounds} rounds, one thread (ATen capability: "
          f"{', '.join(f'{s} {capability[s]}' for s in settings)})")
    base = settings[0]
    print(f"{'model':8} " + " ".join(f"{s:>11}" for s in settings) + " " +
          " ".join(f"{s + '/' + base:>22}" for s in settings[1:]))
    for name in models:
        median = {s: statistics.median(speeds[s][name]) for s in settings}
        print(f"{name:8} " + " ".join(f"{median[s]:11.0f}" for s in settings) + " " +
              " ".join(f"{median[s] / median[base]:22.2f}" for s in settings[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
