"""Portable numerics across CPU vendors, tested on one machine: QEMU's user-mode emulator runs this
project's Python on an emulated CPU of the other vendor (an AMD EPYC on an Intel machine, an Intel
Core on an AMD one), whose CPUID sends MKL down that vendor's paths (an emulated EPYC reproduced a
real EPYC's pinning-1 numbers to the last bit: results/reference/analysis/, docs/reliability.md).

A few training steps of every unit and a greedy decoding, under portable numerics, must give the same
bits on the emulated CPU as on this machine; under pinning 1's settings (MKL on its AVX2 branch,
torch's default Adam) they must not, which shows that the emulator does present another vendor.
Skipped where ``qemu-x86_64`` is not installed (.ci/run installs it) or the CPU is neither vendor's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.numerics import PINNING_1_ENV, PORTABLE_ENV, has_avx2

QEMU = shutil.which("qemu-x86_64")
# the other vendor's CPU, as QEMU 7.2 emulates it with AVX2 and FMA (its emulator has no AVX-512)
OTHER_VENDOR = {"GenuineIntel": "EPYC-Milan", "AuthenticAMD": "Skylake-Client"}


def host_vendor() -> str:
    info = Path("/proc/cpuinfo")
    lines = info.read_text(encoding="utf-8", errors="replace").splitlines() if info.is_file() else []
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("vendor_id")), "")


EMULATED = OTHER_VENDOR.get(host_vendor())

pytestmark = [pytest.mark.skipif(QEMU is None, reason="qemu-x86_64 (Debian's qemu-user) is not installed"),
              pytest.mark.skipif(EMULATED is None, reason="neither an Intel nor an AMD CPU: no other vendor to emulate"),
              pytest.mark.skipif(not has_avx2(), reason="portable numerics need an x86-64 CPU with AVX2")]

# sys.argv[1]: "portable", or "pinning-1" (numerics native in an environment that sets pinning 1's variables);
# sys.argv[2]: the units to train, comma-separated
PROBE = """
import hashlib, json, sys
from nmt.numerics import adam_options, apply_numerics
portable = sys.argv[1] == "portable"
apply_numerics("portable" if portable else "native")
import torch
from nmt.benchmarks.models import prepare_model
from nmt.search import greedy_decode
torch.manual_seed(0)
UNITS = {"srnmt": {"cell": "srnmt", "enc_layers": 2, "dec_layers": 2}, "lstm": {"cell": "lstm"}, "gru": {"cell": "gru"},
         "atr": {"cell": "atr"}, "ran": {"cell": "ran"}, "sru": {"cell": "sru"}, "rnn": {"cell": "rnn"},
         "fsmn": {"cell": "fsmn", "enc_layers": 2}, "mingru": {"cell": "mingru"}, "minlstm": {"cell": "minlstm"}}
digests = {}
for name in sys.argv[2].split(","):
    section = UNITS[name]
    prepared = prepare_model({**section, "hidden": 24, "emb": 24}, batch=12, length=9, vocab=90,
                             device=torch.device("cpu"), adam=adam_options("portable" if portable else "native"))
    for _ in range(3):
        prepared["train_step"]()
    model = prepared["model"].eval()
    with torch.no_grad():
        hypotheses = greedy_decode(model, prepared["src"], prepared["src_mask"])
    digest = hashlib.sha256(json.dumps(hypotheses).encode())
    for tensor in model.state_dict().values():
        digest.update(tensor.numpy().tobytes())
    digests[name] = digest.hexdigest()
print(json.dumps({"mkl_cbwr": __import__("os").environ.get("MKL_CBWR"), "digests": digests}))
"""


UNITS = "srnmt,lstm,gru,atr,ran,sru,rnn,fsmn,mingru,minlstm"  # every unit


def probe(setting: str, units: str = UNITS, emulate: str | None = None) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in PORTABLE_ENV}
    env = {**clean, "OMP_NUM_THREADS": "1"}
    if setting == "pinning-1":
        env.update(PINNING_1_ENV)
    command = [sys.executable, "-c", PROBE, setting, units]
    if emulate:  # the emulator runs the same interpreter and packages; warnings about host features go to stderr
        command = [QEMU, "-cpu", emulate, *command]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
def test_portable_numerics_give_the_same_bits_on_an_emulated_cpu_of_the_other_vendor():
    here, other = probe("portable"), probe("portable", emulate=EMULATED)
    assert here["mkl_cbwr"] == other["mkl_cbwr"] == "COMPATIBLE"
    differing = sorted(unit for unit in here["digests"] if here["digests"][unit] != other["digests"][unit])
    assert not differing, (f"under portable numerics these units train or decode to other bits on this {host_vendor()} "
                           f"CPU than on an emulated {EMULATED}: {differing}")


@pytest.mark.slow
def test_pinning_1_gave_other_bits_on_the_other_vendor():
    """The control: the pinning portable meant before (MKL's AVX2 branch holds on Intel CPUs only, and
    torch's default Adam takes MKL's vector square root) trains to other bits on the emulated CPU."""
    here, other = probe("pinning-1", "gru"), probe("pinning-1", "gru", emulate=EMULATED)
    assert here["mkl_cbwr"] == other["mkl_cbwr"] == "AVX2"
    assert here["digests"]["gru"] != other["digests"]["gru"]
