"""``python -m study.bench``: does running trials side by side on Ray pay off on this machine?

The same N small trials (one configuration, N seeds, a fixed number of epochs, no time
budget and no early stopping, so both ways do the same work) run twice:

1. through ``python -m study.run`` with one trial per CPU (Ray, MLflow, tables and all), and
2. one after another in this process with ``nmt.trainer.run``, torch using every CPU
   (``--sequential-threads 1``: one thread, which leaves the other CPUs idle and so
   measures the platform's own parallel efficiency: 0.5 would be perfect on 2 CPUs).

It prints both wall times and their ratio (concurrent / sequential; below 1 means the
study platform is faster than a plain loop). Timings only: nothing is asserted.

``--fixed-cost`` measures instead what a study costs around its trials: ``python -m
study.run`` on a study of one trial of one optimizer step, in a new results directory,
timed from the command's start to its first trial's launch and from its trials' end to
its exit (imports, the MLflow store, Ray's start and stop, tables and plots).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nmt.cli import program_name, run_main
from nmt.errors import UserError

STUDY = """name: bench_concurrency
description: the study-level benchmark's trials
data: {{preset: synthetic, size: {size}, valid_size: 100, test_size: 100, spm: {{vocab_size: 400}}}}
base:
  model: {{cell: {cell}, hidden: {hidden}, emb: {hidden}}}
  train: {{batch_tokens: 1500, lr_decay: none, patience: 0}}
  decode: {{beam: 2}}
variants:
  - {{label: bench, set: {{}}}}
seeds: {trials}
budget: {{epochs: {epochs}}}
"""

TRIALS_ANNOUNCED = re.compile(r"\d+ trials? \(")  # study.run's line just before Ray Tune starts the trials

FIXED_COST_STUDY = """name: bench_fixed_cost
description: one trial of one optimizer step, to time what a study costs around its trials
data: {preset: synthetic, size: 300, valid_size: 20, test_size: 20, spm: {vocab_size: 100}}
base:
  model: {cell: gru, hidden: 8, emb: 8}
  train: {batch_tokens: 500, lr_decay: none, patience: 0}
  decode: {beam: 1}
variants:
  - {label: one step, set: {}}
seeds: 1
budget: {epochs: 1, steps: 1}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=program_name("study.bench"),
        description="Wall time of N identical small trials run as a study (one trial per CPU, on Ray) "
                    "against the same trials run one after another in one process using every CPU.",
        epilog="Example: python -m study.bench --trials 4 --epochs 3")
    parser.add_argument("--trials", type=int, default=4, help="trials (seeds of one configuration; default 4)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs per trial (default 3)")
    parser.add_argument("--cell", default="gru", help="recurrent unit of the trials (default gru)")
    parser.add_argument("--hidden", type=int, default=64, help="hidden and embedding size (default 64)")
    parser.add_argument("--size", type=int, default=3000, help="synthetic training pairs (default 3000)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1, help="CPUs to use (default: all)")
    parser.add_argument("--sequential-threads", type=int,
                        help="torch threads of the sequential run (default: --cpus, every CPU it may use)")
    parser.add_argument("--fixed-cost", action="store_true",
                        help="instead: time what a study costs before and after its trials (a one-step study in a "
                             "new results directory; the fastest of --repeats runs)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of --fixed-cost, the fastest counts (default 2)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    args = parser.parse_args(argv)
    threads = args.cpus if args.sequential_threads is None else args.sequential_threads
    for flag, value in (("--trials", args.trials), ("--epochs", args.epochs), ("--hidden", args.hidden),
                        ("--size", args.size), ("--cpus", args.cpus), ("--sequential-threads", threads),
                        ("--repeats", args.repeats)):
        if value < 1:
            raise UserError(f"{flag} {value}: must be >= 1")
    if args.fixed_cost:
        return fixed_cost(args.repeats, args.json)

    from study.spec import expand, load_study

    work = Path(tempfile.mkdtemp(prefix="rnmt-bench-"))
    try:
        study_file = work / "bench_concurrency.yaml"
        study_file.write_text(STUDY.format(size=args.size, cell=args.cell, hidden=args.hidden, trials=args.trials,
                                           epochs=args.epochs), encoding="utf-8")
        spec = load_study(str(study_file))
        configs = [trial.config for trial in expand(spec)]

        _prepare_data(configs[0], work)  # the data cache is warm for both runs
        print(f"{args.trials} trials of {args.cell} H={args.hidden}, {args.epochs} epochs each, {args.cpus} CPUs",
              file=sys.stderr, flush=True)

        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "study.run", str(study_file), "--cpus", str(args.cpus),
                                 "--results", str(work / "results")], capture_output=True, text=True, check=False,
                                env=dict(os.environ, OMP_NUM_THREADS="1"))
        concurrent = time.perf_counter() - started
        if result.returncode != 0:
            raise UserError(f"the study run failed (exit {result.returncode}): "
                            f"{(result.stderr.strip().splitlines() or ['no output'])[-1]}")
        print(f"study.run, {args.cpus} trials at a time: {concurrent:.1f} s", file=sys.stderr, flush=True)

        sequential = _run_sequentially(configs, work / "sequential", threads)
        print(f"one process, one trial after another, {threads} thread(s): {sequential:.1f} s", file=sys.stderr,
              flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratio = concurrent / sequential
    # to the millisecond: rounded to 0.1 s, a 2-second sequential run moved the ratio by over 1%
    report = {"trials": args.trials, "epochs": args.epochs, "cell": args.cell, "hidden": args.hidden,
              "cpus": args.cpus, "sequential_threads": threads, "concurrent_seconds": round(concurrent, 3),
              "sequential_seconds": round(sequential, 3),
              "ratio": round(ratio, 3)}
    if args.json:
        print(json.dumps(report))
    else:
        print(f"wall time, study.run / sequential: {ratio:.2f}  ({concurrent:.1f} s / {sequential:.1f} s)")
    return 0


def fixed_cost(repeats: int, as_json: bool) -> int:
    """``--fixed-cost``: the one-step study ``repeats`` times, each in a new results directory."""
    runs = []
    work = Path(tempfile.mkdtemp(prefix="rnmt-bench-"))
    try:
        study_file = work / "bench_fixed_cost.yaml"
        study_file.write_text(FIXED_COST_STUDY, encoding="utf-8")
        for index in range(repeats):
            runs.append(_time_around_trials(study_file, work / f"results{index}"))
            print(f"run {index + 1}: {runs[-1]['fixed_seconds']:.2f} s around the trials "
                  f"({runs[-1]['before_trials_seconds']:.2f} s before, {runs[-1]['after_trials_seconds']:.2f} s after)",
                  file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {**min(runs, key=lambda run: run["fixed_seconds"]), "runs": runs}
    if as_json:
        print(json.dumps(report))
    else:
        print(f"study fixed cost: {report['fixed_seconds']:.2f} s ({report['before_trials_seconds']:.2f} s before the "
              f"trials, {report['after_trials_seconds']:.2f} s after; fastest of {repeats})")
    return 0


def _time_around_trials(study_file: Path, results: Path) -> dict:
    """Seconds from the command's start to the line announcing the trials and from the line
    announcing their end to its exit, read from its output as it comes."""
    with tempfile.TemporaryFile(mode="w+") as stderr:  # a file: a full stderr pipe would stall the run
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "study.run", str(study_file), "--cpus", "1",
                                    "--results", str(results)], stdout=subprocess.PIPE, stderr=stderr, text=True,
                                   env=dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1"))
        launched = ended = None
        for line in process.stdout:
            if launched is None and TRIALS_ANNOUNCED.match(line):  # "1 trial (grid); tracking ...": Ray Tune next
                launched = time.perf_counter()
            elif line.startswith("trials done"):
                ended = time.perf_counter()
        code = process.wait()
        finished = time.perf_counter()
        stderr.seek(0)
        errors = stderr.read()
    if code != 0 or launched is None or ended is None:
        raise UserError(f"the one-step study failed (exit {code}): {(errors.strip().splitlines() or ['no output'])[-1]}")
    before, after = launched - started, finished - ended
    return {"fixed_seconds": round(before + after, 3), "before_trials_seconds": round(before, 3),
            "after_trials_seconds": round(after, 3), "trials_seconds": round(ended - launched, 3)}


def _prepare_data(tree: dict, work: Path) -> None:
    from nmt.config import config_from_dict
    from nmt.data.pipeline import load_data

    load_data(config_from_dict(tree).data, log=None)


def _run_sequentially(configs: list[dict], out: Path, threads: int) -> float:
    from nmt.config import config_from_dict
    from nmt.trainer import run

    started = time.perf_counter()
    for index, tree in enumerate(configs):
        tree = {**tree, "train": {**tree["train"], "threads": threads}}
        run(config_from_dict(tree), out / str(index), log=lambda line: None)
    return time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(run_main(main))
