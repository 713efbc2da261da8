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

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from nmt.errors import UserError
from study.spec.expansion import expand
from study.spec.loading import load_study

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


# the target: a study's fixed cost (imports, MLflow store, Ray start and stop, tables) at most half the
# 13 s measured on this project's 2-core machine before the platform's start-up was made lazy
FIXED_COST_TARGET = 0.5
FIXED_COST_BEFORE = 13.0
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


def check_counts(**counts: int) -> None:
    """Each count (``sequential_threads=2``) at least 1, or one line naming its flag (``--sequential-threads``)."""
    for name, value in counts.items():
        if value < 1:
            raise UserError(f"--{name.replace('_', '-')} {value}: must be >= 1")


def fixed_cost(repeats: int, as_json: bool) -> int:
    """``--fixed-cost``: the one-step study ``repeats`` times, each in a new results directory."""
    check_counts(repeats=repeats)
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
    fastest = min(runs, key=lambda run: run["fixed_seconds"])
    ratio = fastest["fixed_seconds"] / FIXED_COST_BEFORE
    report = {**fastest, "runs": runs, "ratio": round(ratio, 3), "wanted": FIXED_COST_TARGET,
              "met": ratio <= FIXED_COST_TARGET}
    if as_json:
        print(json.dumps(report))
    else:
        print(f"study fixed cost: {report['fixed_seconds']:.2f} s ({report['before_trials_seconds']:.2f} s before the "
              f"trials, {report['after_trials_seconds']:.2f} s after; fastest of {repeats})")
        print(f"study fixed cost / {FIXED_COST_BEFORE:.0f} s before {ratio:.2f}x (wanted <= {FIXED_COST_TARGET}: "
              f"{'met' if report['met'] else 'MISSED'})")
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
    # torch loads only where a model is built or timed, not when the driver starts
    from nmt.config import config_from_dict
    from nmt.data.pipeline import load_data

    load_data(config_from_dict(tree).data, log=None)


def _run_sequentially(configs: list[dict], out: Path, threads: int) -> float:
    # torch loads only where a model is built or timed, not when the driver starts
    from nmt.config import config_from_dict
    from nmt.trainer import run

    started = time.perf_counter()
    for index, tree in enumerate(configs):
        tree = {**tree, "train": {**tree["train"], "threads": threads}}
        run(config_from_dict(tree), out / str(index), log=lambda line: None)
    return time.perf_counter() - started


def concurrency_bench(trials: int, epochs: int, cell: str, hidden: int, size: int, cpus: int,
                      sequential_threads: int | None = None,
                      say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)) -> dict:
    """Wall time of ``trials`` identical small trials run as a study (``python -m study.run``, one
    trial per CPU) against the same trials one after another in one process (``sequential_threads``
    torch threads, default ``cpus``); returns the timings and their ratio."""
    threads = cpus if sequential_threads is None else sequential_threads
    check_counts(trials=trials, epochs=epochs, hidden=hidden, size=size, cpus=cpus, sequential_threads=threads)
    work = Path(tempfile.mkdtemp(prefix="rnmt-bench-"))
    try:
        study_file = work / "bench_concurrency.yaml"
        study_file.write_text(STUDY.format(size=size, cell=cell, hidden=hidden, trials=trials, epochs=epochs),
                              encoding="utf-8")
        configs = [trial.config for trial in expand(load_study(str(study_file)))]

        _prepare_data(configs[0], work)  # the data cache is warm for both runs
        say(f"{trials} trials of {cell} H={hidden}, {epochs} epochs each, {cpus} CPUs")

        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "study.run", str(study_file), "--cpus", str(cpus),
                                 "--results", str(work / "results")], capture_output=True, text=True, check=False,
                                env=dict(os.environ, OMP_NUM_THREADS="1"))
        concurrent = time.perf_counter() - started
        if result.returncode != 0:
            raise UserError(f"the study run failed (exit {result.returncode}): "
                            f"{(result.stderr.strip().splitlines() or ['no output'])[-1]}")
        say(f"study.run, {cpus} trials at a time: {concurrent:.1f} s")

        sequential = _run_sequentially(configs, work / "sequential", threads)
        say(f"one process, one trial after another, {threads} thread(s): {sequential:.1f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # to the millisecond: rounded to 0.1 s, a 2-second sequential run moved the ratio by over 1%
    return {"trials": trials, "epochs": epochs, "cell": cell, "hidden": hidden, "cpus": cpus,
            "sequential_threads": threads, "concurrent_seconds": round(concurrent, 3),
            "sequential_seconds": round(sequential, 3), "ratio": round(concurrent / sequential, 3)}
