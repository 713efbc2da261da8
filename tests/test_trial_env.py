"""The environment Ray starts trial workers with: glibc keeps freed memory in the process
(study.ray_setup.TRIAL_MALLOC_ENV), which saves the kernel's page faults and changes no number."""

from __future__ import annotations

import subprocess
import sys

from study.ray_setup import TRIAL_MALLOC_ENV
from study_helpers import ROOT, skip_if_ray_node_lost

WORKER_ENVIRONMENT = """
import ray
from study.options import RunOptions
from study.ray_setup import start_ray

start_ray(RunOptions(num_cpus=1))

@ray.remote
def environment_at_start():
    # /proc/self/environ is what the process was started with, what glibc read
    return sorted(item.decode() for item in open("/proc/self/environ", "rb").read().split(b"\\0")
                  if item.startswith(b"MALLOC_"))

print(ray.get(environment_at_start.remote()))
ray.shutdown()
"""


def test_trial_workers_start_with_the_malloc_settings_and_the_users_own_value_wins(ray_env):
    env = dict(ray_env, MALLOC_TRIM_THRESHOLD_="12345")
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    result = subprocess.run([sys.executable, "-c", WORKER_ENVIRONMENT], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=180)
    skip_if_ray_node_lost(result.returncode, result.stdout + result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == str(
        [f"MALLOC_MMAP_THRESHOLD_={TRIAL_MALLOC_ENV['MALLOC_MMAP_THRESHOLD_']}", "MALLOC_TRIM_THRESHOLD_=12345"])


TRAIN_AND_HASH = """
import hashlib, math, sys
from nmt.config import load_config
from nmt.trainer import Trainer

cfg = load_config(None, sys.argv[1:])
trainer = Trainer(cfg, "{out}", log=lambda line: None)
trainer.train_epoch(1, math.inf)
print(hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in trainer.model.parameters())).hexdigest())
"""


def test_the_malloc_settings_change_no_number(tmp_path, cache_dir):
    """An epoch of the tiny model (its softmax batches are above glibc's 128 KiB mmap threshold)
    ends with the same parameters, bit for bit, with and without the settings."""
    from conftest import TINY

    hashes = []
    for extra in ({}, TRIAL_MALLOC_ENV):
        env = {"PATH": "/usr/bin:/bin", "NMT_CACHE_DIR": str(cache_dir), "OMP_NUM_THREADS": "1", **extra}
        script = TRAIN_AND_HASH.replace("{out}", str(tmp_path / "run"))
        result = subprocess.run([sys.executable, "-c", script, *TINY, f"data.cache_dir={cache_dir}"], cwd=ROOT,
                                env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        hashes.append(result.stdout.strip().splitlines()[-1])
    assert hashes[0] == hashes[1] and len(hashes[0]) == 64
