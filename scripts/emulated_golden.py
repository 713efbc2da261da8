"""The golden smoke table on an emulated CPU of another vendor: each row of tests/golden/golden_smoke.yaml
under --smoke, trained by ``nmt.train`` inside QEMU's user-mode emulator (``qemu-x86_64 -cpu MODEL``,
Debian's qemu-user), compared with tests/golden/golden.json bit for bit.

The emulator's CPUID names the model's vendor, so MKL takes the paths it takes on that vendor's CPUs;
an emulated EPYC-Milan reproduced a real AMD EPYC's pinning-1 number of the first row (105.69033079709463)
to the last bit. Emulation is slow: about 3.5 minutes a row on one core (the main study's first
trial would take hours, so the golden test's first number is not run here). Run from the repository
root; --numerics pinning-1 runs the rows under the AVX2 pinning portable meant in earlier versions:

    python scripts/emulated_golden.py --cpu EPYC-Milan [--rows 'SR-NMT 4L' '- Highway'] [--numerics pinning-1]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from nmt.cli import run_main
from nmt.errors import UserError
from nmt.numerics import PINNING_1_ENV, PORTABLE_ENV
from study.spec.expansion import expand
from study.spec.loading import load_study

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden"


def row_configs() -> dict[str, dict]:
    """The smoke study's trial config of each row (one seed under --smoke), as the study trains it."""
    spec = load_study(str(GOLDEN / "golden_smoke.yaml"), smoke_run=True)
    return {trial.label: trial.config for trial in expand(spec)}


def train_emulated(config: dict, cpu: str, numerics: str, work: Path) -> dict:
    tree = {**config, "data": {**config["data"], "cache_dir": str(work / "cache")},
            "train": {**config["train"], "numerics": "portable" if numerics == "portable" else "native"}}
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(tree), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in PORTABLE_ENV}
    if numerics == "pinning-1":
        env.update(PINNING_1_ENV)
    out = work / "run"
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run([shutil.which("qemu-x86_64"), "-cpu", cpu, sys.executable, "-m", "nmt.train", "--config",
                           str(path), "--out", str(out)], env={**env, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise UserError(f"nmt.train under qemu-x86_64 -cpu {cpu} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads((out / "metrics.json").read_text(encoding="utf-8"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", default="EPYC-Milan", help="QEMU's CPU model (qemu-x86_64 -cpu help lists them)")
    parser.add_argument("--rows", nargs="+", help="row labels (default: every row)")
    parser.add_argument("--numerics", choices=("portable", "pinning-1"), default="portable")
    args = parser.parse_args(argv)
    if shutil.which("qemu-x86_64") is None:
        raise UserError("qemu-x86_64 not found; install Debian's qemu-user (apt-get install qemu-user)")
    configs = row_configs()
    rows = args.rows or list(configs)
    unknown = [row for row in rows if row not in configs]
    if unknown:
        raise UserError(f"--rows: {unknown} not rows of golden_smoke; its rows: {list(configs)}")
    golden = json.loads((GOLDEN / "golden.json").read_text(encoding="utf-8"))["smoke"]
    print(f"golden smoke rows under numerics {args.numerics} on an emulated {args.cpu} (QEMU user mode), "
          f"against tests/golden/golden.json")
    same = 0
    with tempfile.TemporaryDirectory() as tmp:
        for row in rows:
            started = time.perf_counter()
            metrics = train_emulated(configs[row], args.cpu, args.numerics, Path(tmp))
            got = {"test_chrf": metrics["test_chrf"], "valid_ppl": metrics["valid_ppl"]}
            verdict = "same bits" if got == golden[row] else "DIFFERENT"
            same += got == golden[row]
            print(f"{row:<22} valid ppl {got['valid_ppl']!r:<20} golden {golden[row]['valid_ppl']!r:<20} chrF "
                  f"{got['test_chrf']!r} golden {golden[row]['test_chrf']!r}  {verdict}  "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    print(f"{same} of {len(rows)} rows give the golden numbers")
    return 0 if same == len(rows) else 1


if __name__ == "__main__":
    sys.exit(run_main(main))
