"""The prepared GPU check: one command that measures, on a machine with one CUDA GPU, what the
Triton kernels (nmt.ops.kernels) and packed trials are worth, within about 8 minutes.

Run from the repository root, with the Multi30k files (train.L.gz, val.L.gz, test_2016_flickr.L.gz
for en and de) in DIR:

    python scripts/gpu_check.py --data-dir DIR --out OUT

Its parts, in this order (``--parts`` picks some):

1. ``tests``: the CUDA tests (tests/nmt/test_cuda.py) and the Triton kernels' tests compiled for
   the GPU (tests/nmt/test_triton_kernels.py), as a pytest run.
2. ``bench``: ``nmt.bench``'s cell part (forward + backward, B=64, T=30) for every unit at H=512
   and 1024, once on the torch paths and once with ``NMT_KERNELS=triton``: each unit's speed as a
   ratio to cuDNN's ``nn.LSTM`` measured in the same run.
3. ``epochs``: one Multi30k epoch of each Multi30k study's reference model (its table's
   reference row, seed 1), on the torch paths and, for units with Triton kernels, on those:
   training tokens/s after a few warm-up steps (which also compile the kernels).
4. ``packing``: 1, 2, 4 and 8 trials of the SR-NMT ablation's reference model training at once on
   the one GPU, each its own process as Ray runs them: the GPU's total tokens/s, and the most
   trials that still gained at least 10% when doubled, which ``--gpus-per-trial`` should follow.

Each part's results go into OUT/gpu_check.json as soon as it ends (a run cut short keeps what it
measured), and OUT/gpu_check.md holds them as tables. ``--device cpu`` runs the same parts at
whatever sizes are given, without a GPU: how the tests check this script.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from nmt.cli import run_main
from nmt.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("tests", "bench", "epochs", "packing")
STUDIES = ROOT / "search_spaces" / "multi30k"
PACKING_STUDY = "ablation_srnmt_m30k"
WARMUP_STEPS = 5
GAIN = 1.10  # doubling the trials on the GPU pays while its total throughput rises by at least this much


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python scripts/gpu_check.py",
        description="The prepared GPU check: CUDA and Triton tests, every unit's speed against cuDNN's LSTM "
                    "with and without the Triton kernels, one Multi30k epoch of each study's reference model, "
                    "and how many trials one GPU holds usefully.",
        epilog="Example: python scripts/gpu_check.py --data-dir ../shared/data/multi30k --out gpu-check")
    parser.add_argument("--data-dir", type=Path, required=True, help="the Multi30k en-de files")
    parser.add_argument("--out", type=Path, required=True, help="where gpu_check.json and gpu_check.md go (made)")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="default: all four")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cuda (default; refused without a GPU) or cpu, to try the script without one")
    parser.add_argument("--kernels", nargs="+", choices=("torch", "triton"), default=["torch", "triton"],
                        help="bench and epochs: the kernel settings to time (default both; packing runs on the "
                             "caller's NMT_KERNELS)")
    parser.add_argument("--hidden", type=int, nargs="+", default=[512, 1024], help="bench: cell sizes (default 512 1024)")
    parser.add_argument("--cells", nargs="+", help="bench: units (default: nmt.bench's, every unit)")
    parser.add_argument("--bench-batch", type=batch_shape, default="64x30",
                        help="bench: BxT (default 64x30, as the README's table)")
    parser.add_argument("--repeats", type=int, default=5, help="bench: timed rounds, the fastest counts (default 5)")
    parser.add_argument("--studies", nargs="+", help="epochs: Multi30k study names (default: all six)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="epochs and packing: a change to every study, e.g. data.limit=300 for a quick try")
    parser.add_argument("--trials", type=int, nargs="+", default=[1, 2, 4, 8],
                        help="packing: trials at once (default 1 2 4 8)")
    parser.add_argument("--steps", type=int, default=40, help="packing: timed steps per trial (default 40)")
    parser.add_argument("--packing-worker", help=argparse.SUPPRESS)  # one packed trial (this script, run by itself)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.packing_worker:
        return packing_worker(json.loads(args.packing_worker))
    import torch  # after argument parsing: --help answers without loading torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device here; run this on a GPU machine, or --device cpu to try it")
    if not args.data_dir.is_dir():
        raise UserError(f"--data-dir {args.data_dir}: directory not found; give the folder of the Multi30k files")
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu", "torch": torch.__version__,
              "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    failed = []
    for part in args.parts:
        began = time.perf_counter()
        print(f"== {part}", flush=True)
        try:
            report[part] = PART_RUNNERS[part](args)
        except Exception as error:  # device time is scarce: a part that breaks must not cost the others
            traceback.print_exc()
            report[part] = {"error": f"{type(error).__name__}: {error}"}
            failed.append(part)
        report[f"{part}_seconds"] = round(time.perf_counter() - began, 1)
        write_report(report, args.out)
        print(f"== {part} {'failed' if part in failed else 'done'} in {report[f'{part}_seconds']:.0f} s", flush=True)
    print((args.out / "gpu_check.md").read_text(encoding="utf-8"))
    return 1 if failed else 0


def batch_shape(text: str) -> tuple[int, int]:
    """``BxT`` as (B, T)."""
    match = re.fullmatch(r"(\d+)x(\d+)", text)
    if not match or 0 in (int(match[1]), int(match[2])):
        raise argparse.ArgumentTypeError(f"{text!r}: give the batch as BxT, e.g. 64x30")
    return int(match[1]), int(match[2])


# --- 1. tests -----------------------------------------------------------------------------------

def run_tests(args) -> dict:
    """The CUDA and Triton tests as one pytest run: its counts and the end of its output."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=-ra",
               "tests/nmt/test_cuda.py", "tests/nmt/test_triton_kernels.py"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    counts = {word: int(number) for number, word in re.findall(r"(\d+) (passed|failed|skipped|error)", result.stdout)}
    print(result.stdout[-3000:], flush=True)
    return {"returncode": result.returncode, **counts, "tail": result.stdout[-2000:]}


# --- 2. bench -----------------------------------------------------------------------------------

def run_bench(args) -> dict:
    """nmt.bench's cell part on the torch paths and under NMT_KERNELS=triton."""
    batch, length = args.bench_batch
    command = [sys.executable, "-m", "nmt.bench", "--device", args.device, "--hidden", *map(str, args.hidden),
               "--threads", "1", "--batch", str(batch), "--length", str(length), "--repeats", str(args.repeats),
               "--skip", "models", "--skip", "decoding", "--skip", "targets", "--json"]
    if args.cells:
        command += ["--cells", *args.cells]
    measured = {}
    for kernels in args.kernels:
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False,
                                env={**os.environ, "NMT_KERNELS": kernels})
        if result.returncode != 0:
            measured[kernels] = {"error": result.stderr.strip().splitlines()[-1:]}
            continue
        measured[kernels] = {f"{row['cell']} H={row['hidden']}": row["vs_lstm"]
                             for row in json.loads(result.stdout)["cells"]}
    return measured


# --- 3. epochs ----------------------------------------------------------------------------------

def reference_config(study: str, args):
    """The Multi30k study's reference row, seed 1, as an nmt Config on ``args.device`` (data from --data-dir)."""
    # study.spec validates the study file as study.run does; it imports neither Ray nor MLflow
    from nmt.config import config_from_dict
    from nmt.data.corpus import discover_corpus
    from study.spec.expansion import expand
    from study.spec.loading import load_study

    spec = load_study(str(STUDIES / f"{study}.yaml"), args.overrides, corpus=discover_corpus(args.data_dir, "en", "de"))
    trials = expand(spec)
    reference = spec.fields.table.reference
    trial = next((t for t in trials if t.label == reference), trials[0])
    cfg = config_from_dict(trial.config, source=f"{study} ({trial.label})")
    cfg.train.device = args.device
    return trial.label, cfg


def run_epochs(args) -> list[dict]:
    from nmt.ops.kernels import KERNELS_ENV, triton_units

    callers = os.environ.get(KERNELS_ENV)
    try:
        return epoch_rows(args, triton_units())
    finally:  # the packing part runs on the caller's setting
        os.environ.pop(KERNELS_ENV, None)
        if callers is not None:
            os.environ[KERNELS_ENV] = callers


def epoch_rows(args, triton_units: tuple[str, ...]) -> list[dict]:
    rows = []
    for study in args.studies or sorted(path.stem for path in STUDIES.glob("*.yaml")):
        label, cfg = reference_config(study, args)
        for kernels in args.kernels if cfg.model.cell in triton_units else args.kernels[:1]:
            os.environ["NMT_KERNELS"] = kernels  # read at each recurrence's call (nmt.ops.kernels)
            row = {"study": study, "row": label, "cell": cfg.model.cell, "kernels": kernels}
            try:
                row.update(time_epoch(cfg))
            except Exception as error:  # e.g. a kernel this GPU's Triton cannot build: the other rows still count
                traceback.print_exc()
                row.update(steps=0, tokens=0, error=f"{type(error).__name__}: {error}")
            rows.append(row)
            print(f"  {study} {label} [{kernels}]: "
                  f"{row.get('error') or format(row['tokens_per_s'], ',.0f') + ' tok/s'}", flush=True)
    return rows


def time_epoch(cfg) -> dict:
    """One epoch's training: WARMUP_STEPS steps first (they compile the kernels), then the rest timed."""
    import torch

    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        trainer = warmed_up_trainer(cfg, scratch)
        began = time.perf_counter()
        tokens = train_until(trainer, None)
        seconds = time.perf_counter() - began
        steps = trainer.progress.steps
    del trainer
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return {"steps": steps, "tokens": tokens, "seconds": round(seconds, 2), "tokens_per_s": tokens / seconds}


def warmed_up_trainer(cfg, scratch: str):
    """A Trainer of ``cfg`` (writing to ``scratch``) after WARMUP_STEPS steps of epoch 1, its device idle."""
    from nmt.trainer import Trainer

    trainer = Trainer(cfg, scratch, log=lambda line: None)
    train_until(trainer, WARMUP_STEPS)
    return trainer


def train_until(trainer, max_steps: int | None) -> int:
    """Train on in epoch 1 until ``max_steps`` steps in all (None: the epoch's end), the device idle
    after; the tokens trained."""
    trainer.cfg.train.max_steps = max_steps
    before = trainer.progress.train_tokens
    trainer.train_epoch(1, math.inf)
    synchronize(trainer.device)
    return trainer.progress.train_tokens - before


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --- 4. packing ---------------------------------------------------------------------------------

def run_packing(args) -> dict:
    """1, 2, 4, 8 trials at once, each a process: they warm up, wait for each other, then time --steps."""
    rows = []
    for count in args.trials:
        rows.append(packed_run(count, args))
        print(f"  {count} at once: {rows[-1]['total_tokens_per_s']:,.0f} tok/s in all, "
              f"{rows[-1]['per_trial_tokens_per_s']:,.0f} each", flush=True)
    return {"study": PACKING_STUDY, "kernels": os.environ.get("NMT_KERNELS") or "torch", "steps": args.steps,
            "rows": rows, "trials_per_gpu": trials_per_gpu(rows)}


def packed_run(count: int, args) -> dict:
    barrier = Path(tempfile.mkdtemp(prefix="gpu-check-packing-"))
    try:
        job = {"study": PACKING_STUDY, "device": args.device, "data_dir": str(args.data_dir), "steps": args.steps,
               "overrides": args.overrides, "barrier": str(barrier)}
        workers = [subprocess.Popen([sys.executable, __file__, "--data-dir", str(args.data_dir), "--out", str(barrier),
                                     "--packing-worker", json.dumps({**job, "index": index})],
                                    cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for index in range(count)]
        while len(list(barrier.glob("ready-*"))) < count:  # every trial has loaded and warmed up
            if any(worker.poll() not in (None, 0) for worker in workers):
                break
            time.sleep(0.2)
        (barrier / "go").touch()
        outputs = [worker.communicate() for worker in workers]
    finally:
        shutil.rmtree(barrier, ignore_errors=True)
    failed = [err.strip().splitlines()[-1:] for worker, (_, err) in zip(workers, outputs) if worker.returncode]
    if failed:
        raise UserError(f"packing with {count} trials: a trial failed: {failed[0]}")
    spans = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    window = max(s["end"] for s in spans) - min(s["start"] for s in spans)
    total = sum(s["tokens"] for s in spans)
    return {"trials": count, "total_tokens_per_s": total / window,
            "per_trial_tokens_per_s": sum(s["tokens"] / (s["end"] - s["start"]) for s in spans) / count}


def packing_worker(job: dict) -> int:
    """One packed trial: load, warm up, say ready, wait for the others, time ``steps`` steps."""
    args = argparse.Namespace(data_dir=Path(job["data_dir"]), overrides=job["overrides"], device=job["device"])
    _, cfg = reference_config(job["study"], args)
    cfg.train.seed = 1 + job["index"]  # the seeds of a study's row, as its trials run side by side
    barrier = Path(job["barrier"])
    with tempfile.TemporaryDirectory(prefix="gpu-check-trial-") as scratch:
        trainer = warmed_up_trainer(cfg, scratch)
        (barrier / f"ready-{job['index']}").touch()
        while not (barrier / "go").exists():
            time.sleep(0.05)
        start = time.time()
        tokens = train_until(trainer, WARMUP_STEPS + job["steps"])  # a Multi30k epoch holds them: about 200 steps
        end = time.time()
    print(json.dumps({"start": start, "end": end, "tokens": tokens}))
    return 0


def trials_per_gpu(rows: list[dict]) -> int:
    """The most trials at once such that each doubling up to it raised the GPU's total throughput by GAIN."""
    best = rows[0]
    for row in rows[1:]:
        if row["total_tokens_per_s"] < GAIN * best["total_tokens_per_s"]:
            break
        best = row
    return best["trials"]


# --- the report ---------------------------------------------------------------------------------

def write_report(report: dict, out: Path) -> None:
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (out / "gpu_check.md").write_text(markdown(report), encoding="utf-8")


def markdown(report: dict) -> str:
    lines = [f"# GPU check: {report['device']}, torch {report['torch']}, {report['started']}", ""]
    broken = [part for part in PARTS if isinstance(report.get(part), dict) and set(report[part]) == {"error"}]
    lines += [f"Part {part} failed: {report[part]['error']}" for part in broken] + ([""] if broken else [])
    report = {key: value for key, value in report.items() if key not in broken}
    if "tests" in report:
        tests = report["tests"]
        counts = ", ".join(f"{tests[k]} {k}" for k in ("passed", "failed", "skipped", "error") if k in tests)
        lines += [f"Tests (CUDA, Triton): {counts or 'no counts'}, exit {tests['returncode']}.", ""]
    if "bench" in report:
        torch_ratios, triton_ratios = report["bench"].get("torch", {}), report["bench"].get("triton", {})
        lines += ["Forward + backward, ratio to nn.LSTM (cuDNN) in the same run:", "",
                  "| unit | torch paths | NMT_KERNELS=triton |", "|---|---:|---:|"]
        for name in torch_ratios if "error" not in torch_ratios else []:
            triton = triton_ratios.get(name)
            lines.append(f"| {name} | {torch_ratios[name]:.2f} | {f'{triton:.2f}' if triton is not None else '-'} |")
        lines += [f"{kernels} failed: {ratios['error']}" for kernels, ratios in report["bench"].items()
                  if "error" in ratios] + [""]
    if "epochs" in report:
        lines += ["One Multi30k epoch of each study's reference model (training tokens/s after "
                  f"{WARMUP_STEPS} warm-up steps):", "", "| study | row | kernels | steps | tokens/s |",
                  "|---|---|---|---:|---:|"]
        lines += [f"| {r['study']} | {r['row']} | {r['kernels']} | {r['steps']} | "
                  f"{r.get('error') or format(r['tokens_per_s'], ',.0f')} |" for r in report["epochs"]] + [""]
    if "packing" in report:
        packing = report["packing"]
        lines += [f"Trials at once on one GPU ({packing['study']}'s reference model, {packing['steps']} timed steps "
                  f"each, {packing['kernels']} kernels):", "",
                  "| trials | tokens/s in all | tokens/s per trial |", "|---:|---:|---:|"]
        lines += [f"| {r['trials']} | {r['total_tokens_per_s']:,.0f} | {r['per_trial_tokens_per_s']:,.0f} |"
                  for r in packing["rows"]]
        lines += ["", f"Trials per GPU that still paid (each doubling +{GAIN - 1:.0%} in all): "
                      f"{packing['trials_per_gpu']} (--gpus-per-trial {1 / packing['trials_per_gpu']:g})", ""]
    return "\n".join(lines)


PART_RUNNERS = {"tests": run_tests, "bench": run_bench, "epochs": run_epochs, "packing": run_packing}

if __name__ == "__main__":
    sys.exit(run_main(main))
