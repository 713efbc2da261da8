"""An ASHA study stopped mid-way (Ctrl-C) and resumed makes the stop decisions of one run straight through.

The run straight through is not run: each trial's numbers do not depend on ASHA (a trial seeds itself),
only where it stops does. So Ray's own ``ASHAScheduler``, given every trial's stored epochs in the order
the trials ran, says where each would have stopped; a trial the resumed study trained on past that
epoch, or stopped before it, differs from the run straight through. Unit-level cases:
tests/study/execution/test_asha.py."""

from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace

import pytest
from study_helpers import grid_study, skip_if_ray_node_lost, start_study, study

from study.store.records import experiment_dir
from study.store.trial_store import TrialStore

pytestmark = pytest.mark.slow

EPOCHS = 4
ROWS = ["lr3", "lr1", "lr10"]  # in the order they run, one at a time
VARIANTS = "\n".join(f"  - {{label: {label}, set: {{train.lr: {lr}}}}}"
                     for label, lr in zip(ROWS, ("0.003", "0.001", "0.01"), strict=True))
# the validation perplexity: a model this small scores BLEU 0 at every epoch, and ASHA could decide nothing
ASHA = "scheduler: {type: asha, grace_period: 1, reduction_factor: 2}\nmetric: {name: valid_ppl, mode: min}\n"


def straight_through(histories: list[list[dict]]) -> list[int]:
    """The epoch at which each trial stops when Ray's ASHA sees them in this order, with no resume."""
    from ray.tune.schedulers import ASHAScheduler

    asha = ASHAScheduler(time_attr="epoch", metric="valid_ppl", mode="min", max_t=EPOCHS + 1, grace_period=1,
                         reduction_factor=2)
    stops = []
    for number, history in enumerate(histories):
        trial = SimpleNamespace(trial_id=str(number))
        asha.on_trial_add(None, trial)
        decision = None
        for epoch in history:
            decision = asha.on_trial_result(None, trial, {"epoch": epoch["epoch"], "valid_ppl": epoch["valid_ppl"]})
            if decision == "STOP":
                break
        # a trial that ended short of its budget without ASHA's word was stopped too early: it matches nothing
        ended = int(epoch["epoch"])
        stops.append(ended if decision == "STOP" or ended == EPOCHS else -ended)
    return stops


def test_an_asha_study_stopped_and_resumed_stops_the_trials_a_run_straight_through_stops(tmp_path, cluster_env):
    path, results = tmp_path / "asha.yaml", tmp_path / "results"
    path.write_text(grid_study("asha", VARIANTS, epochs=EPOCHS) + ASHA)
    args = [str(path), "--max-concurrent", "1", "--results", str(results)]
    driver = start_study(*args, env=cluster_env)  # stopped cleanly (Ctrl-C): the shared cluster may serve it
    store = TrialStore(experiment_dir(results, "asha"))
    deadline = time.time() + 300
    while not [key for key in store.keys() if (store.identity(key) or {}).get("row") == 1 and store.history(key)]:
        assert driver.poll() is None and time.time() < deadline, driver.stdout.read()[-3000:]
        time.sleep(0.1)
    os.killpg(driver.pid, signal.SIGINT)  # the second row has trained an epoch or more
    rest, _ = driver.communicate(timeout=120)
    skip_if_ray_node_lost(driver.returncode, rest)
    assert driver.returncode == 130, rest[-3000:]

    resumed = study(*args, "--resume", env=cluster_env)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    by_row = {store.identity(key)["row"]: store.history(key) for key in store.keys()}
    histories = [by_row[row] for row in range(len(ROWS))]
    trained = [len(history) for history in histories]
    assert [[epoch["epoch"] for epoch in history] for history in histories] == [list(range(1, n + 1)) for n in trained]
    assert trained == straight_through(histories)
    assert min(trained) < EPOCHS  # ASHA stopped something: the comparison has decisions to get right
