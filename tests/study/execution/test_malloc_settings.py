"""glibc keeps freed memory in training processes (nmt.memory): in the environment Ray starts trial
workers with, and set by mallopt in a running process; it saves the kernel's page faults and changes
no number. A value the user set wins."""

from __future__ import annotations

import subprocess
import sys

import pytest
from study_helpers import ROOT, skip_if_ray_node_lost

from nmt.memory import MALLOC_ENV

WORKER_ENVIRONMENT = """
import ray
from study.spec.options import Execution, RunOptions
from study.execution.ray_setup import start_ray

start_ray(RunOptions(how=Execution(cpus=1)))

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
        [f"MALLOC_MMAP_THRESHOLD_={MALLOC_ENV['MALLOC_MMAP_THRESHOLD_']}", "MALLOC_TRIM_THRESHOLD_=12345"])


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
    for extra in ({}, MALLOC_ENV):
        env = {"PATH": "/usr/bin:/bin", "NMT_CACHE_DIR": str(cache_dir), "OMP_NUM_THREADS": "1", **extra}
        script = TRAIN_AND_HASH.replace("{out}", str(tmp_path / "run"))
        result = subprocess.run([sys.executable, "-c", script, *TINY, f"data.cache_dir={cache_dir}"], cwd=ROOT,
                                env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        hashes.append(result.stdout.strip().splitlines()[-1])
    assert hashes[0] == hashes[1] and len(hashes[0]) == 64


FAULTS_OF_TRAINING_STEPS = """
import resource, sys
import torch
from nmt.benchmarks.models import prepare_model
from nmt.memory import keep_freed_memory

print(keep_freed_memory() if sys.argv[1] == "keep" else [])
torch.manual_seed(1)
# a 4,000-piece softmax over 32 x 30 tokens: blocks of 15 MB, freed and allocated again every step
step = prepare_model({"cell": "gru", "hidden": 32, "emb": 32}, 32, 30, 4000, torch.device("cpu"))["train_step"]
for _ in range(6):  # the heap grows to what a step needs
    step()
faults = []
for _ in range(3):  # the fewest of three rounds: a page-out daemon (e.g. DAMON's) only ever adds faults
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        step()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(min(faults))
"""


def page_faults(mode: str, **user_env: str) -> tuple[str, int]:
    """The names ``keep_freed_memory`` set and the page faults of three training steps after it (the
    fewest of three rounds)."""
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", **user_env}
    result = subprocess.run([sys.executable, "-c", FAULTS_OF_TRAINING_STEPS, mode], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    names, faults = result.stdout.strip().splitlines()[-2:]
    return names, int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_running_process_keeps_freed_memory_unless_the_user_set_the_threshold():
    """The reference is a fixed 128 KiB mmap threshold, which the user sets here: every large block is
    mapped anew and faulted in page by page. glibc's own default moves its threshold as blocks are
    freed, so how often it faults them in again depends on how the heap happens to lie (41,000
    faults in one run, 3,723 in another): no number to assert on."""
    names, user_set = page_faults("keep", MALLOC_MMAP_THRESHOLD_="131072")  # the user's 128 KiB wins
    assert names == "['MALLOC_TRIM_THRESHOLD_']" and user_set > 10_000
    names, kept = page_faults("keep")
    assert names == "['MALLOC_MMAP_THRESHOLD_', 'MALLOC_TRIM_THRESHOLD_']" and kept < user_set // 100


def test_the_commands_that_train_or_time_training_keep_freed_memory(tmp_path, cache_dir, monkeypatch, capsys):
    """nmt.train and the study's time estimate run in a process already started: they set it with
    mallopt (the trial workers get it in their environment, and study.speed is checked in
    test_speed), so that they train, and time, as the trials do."""
    from conftest import TINY

    import nmt.memory
    import nmt.train
    import study.execution.dry_run
    from study.run import main as study_main

    calls = []

    def recording_keep_freed_memory():
        calls.append(True)
        return nmt.memory.keep_freed_memory()

    for module in (nmt.train, study.execution.dry_run):
        monkeypatch.setattr(module, "keep_freed_memory", recording_keep_freed_memory)
    overrides = [item for setting in (*TINY, f"data.cache_dir={cache_dir}") for item in ("--set", setting)]
    assert nmt.train.main(["--out", str(tmp_path / "run"), *overrides]) == 0
    assert calls == [True]
    assert study_main(["context_gates", "--smoke", "--dry-run", "--results", str(tmp_path / "results")]) == 0
    assert calls == [True, True] and "estimate: about" in capsys.readouterr().out
