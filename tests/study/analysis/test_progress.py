"""The study's progress line: its ETA counts the training time trials report, so a resumed study
(finished trials replayed in seconds, others continued from checkpoints) estimates what is left.

Modules covered here: ``nmt.durations``, ``study.execution.callbacks`` and ``study.execution.row_cost``."""

from __future__ import annotations

import re
from types import SimpleNamespace

from nmt.durations import clock
from study.execution.callbacks import ProgressCallback
from study.execution.trainable import TRIAL
from study.execution.trial_prices import TrialPrices
from study.spec.model import MetricSpec

BLEU = MetricSpec("valid_bleu", "max")


def _trial(trial_id: str, seed: int, status: str = "RUNNING", label: str = "GRU") -> SimpleNamespace:
    config = {TRIAL: {"key": f"key{trial_id}", "label": label, "seed": seed, "config": {}}}
    return SimpleNamespace(trial_id=trial_id, config=config, status=status)


def _eta_seconds(line: str) -> int:
    found = re.search(r"ETA (?:(\d+)h)?(\d+)m(\d\d)s", line)
    assert found, line
    hours, minutes, seconds = (int(part or 0) for part in found.groups())
    return hours * 3600 + minutes * 60 + seconds


def test_resumed_study_estimates_from_trial_time_not_from_replay_speed(capsys):
    progress = ProgressCallback(total=6, metric=BLEU, concurrency=2, every=0.0)
    trials = [_trial(str(i), seed=i) for i in range(6)]
    # a resumed study: two trials that trained 6,000 and 8,000 s are replayed within a second
    for trial, cost in zip(trials[:2], (6000.0, 8000.0)):
        progress.on_trial_start(0, trials, trial)
        progress.on_trial_result(0, trials, trial, {"final": 1, "status": "ok", "valid_bleu": 30.0,
                                                    "elapsed_seconds": cost, "epochs": 40, "best_epoch": 36})
        progress.on_trial_complete(0, trials, trial)
    # two continue from checkpoints after 5,000 and 1,000 s of training; two have not started
    for trial, trained in zip(trials[2:4], (5000.0, 1000.0)):
        progress.on_trial_start(0, trials, trial)
        progress.on_trial_result(0, trials, trial, {"final": 0, "valid_bleu": 20.0, "elapsed_s": trained})
    lines = capsys.readouterr().out.strip().splitlines()
    # mean 7,000 s: 2,000 and 6,000 left for the two under way; the other two, 7,000 each, take their workers
    # as they free, at 2,000 and 6,000 s
    assert _eta_seconds(lines[-1]) == 6000 + 7000
    assert "2/6 done" in lines[-1]


def test_trials_finished_before_a_resume_count_as_done_from_the_first_line(capsys):
    # a resumed grid: keys 0 and 4 finished before (7,000 s and 5,000 s of training), so Tune
    # replays key 4 only after two trials of this run have started
    before = {"key0": {"status": "ok", "valid_bleu": 31.0, "elapsed_seconds": 7000.0, "label": "GRU"},
              "key4": {"status": "diverged", "valid_bleu": 0.0, "elapsed_seconds": 5000.0, "label": "GRU"}}
    progress = ProgressCallback(total=6, metric=BLEU, concurrency=2, every=0.0,
                                finished_before=before)
    trials = [_trial(str(i), seed=i, status="RUNNING" if i == 1 else "PENDING") for i in range(6)]
    progress.on_trial_start(0, trials, trials[1])
    first = capsys.readouterr().out.strip().splitlines()[-1]
    assert "1 running, 2/6 done (1 diverged) | best valid_bleu 31.00 (GRU)" in first
    assert _eta_seconds(first) == 4 * 6000 // 2  # the mean of the two finished trials, for the 4 left
    progress.on_trial_result(0, trials, trials[1], {"final": 0, "valid_bleu": 20.0, "elapsed_s": 1000.0})
    for trial in (trials[0], trials[4]):  # replayed: their results were there from the start
        progress.on_trial_result(0, trials, trial, {**before[f"key{trial.trial_id}"], "final": 1})
        progress.on_trial_complete(0, trials, trial)
    lines = capsys.readouterr().out.strip().splitlines()
    assert any(line.endswith("(finished before this run)") and "done: GRU seed 4: diverged" in line for line in lines)
    # 5,000 s left for trial 1; the three others at 6,000 s: two one after the other on the free worker,
    # one after trial 1 (at 5,000 + 6,000), so the second of the two ends last
    assert "2/6 done (1 diverged)" in lines[-1] and _eta_seconds(lines[-1]) == 2 * 6000
    progress.on_trial_result(0, trials, trials[1], {"final": 1, "status": "ok", "valid_bleu": 32.0,
                                                    "elapsed_seconds": 9000.0, "epochs": 40, "best_epoch": 36})
    progress.on_trial_complete(0, trials, trials[1])
    last = capsys.readouterr().out.strip().splitlines()
    assert not last[0].endswith("(finished before this run)") and "3/6 done (1 diverged)" in last[-1]
    assert _eta_seconds(last[-1]) == 2 * 7000  # mean over the three finished now; 3 trials on 2 workers


def test_a_trial_replayed_from_an_earlier_run_is_not_counted_as_running(capsys):
    # Tune marks a finished trial RUNNING while it replays the stored result; nothing trains
    before = {"key0": {"status": "ok", "valid_bleu": 31.0, "elapsed_seconds": 7000.0, "label": "GRU"}}
    progress = ProgressCallback(total=3, metric=BLEU, concurrency=2, every=0.0, finished_before=before)
    trials = [_trial("0", seed=0), _trial("1", seed=1), _trial("2", seed=2, status="PENDING")]
    progress.on_trial_start(0, trials, trials[0])
    assert "trials: 1 running, 1/3 done" in capsys.readouterr().out.strip().splitlines()[-1]
    progress.on_trial_result(0, trials, trials[0], {**before["key0"], "final": 1})
    progress.on_trial_complete(0, trials, trials[0])
    assert "trials: 1 running, 1/3 done" in capsys.readouterr().out.strip().splitlines()[-1]


def test_the_last_trials_cost_their_own_length_not_a_share_of_the_workers(capsys):
    # a resumed study on 2 workers whose one unfinished trial trains again from its start (a clone
    # without its checkpoint): the ETA is that trial's length, not half of it
    before = {"key0": {"status": "ok", "valid_bleu": 31.0, "elapsed_seconds": 7000.0, "label": "GRU"},
              "key1": {"status": "ok", "valid_bleu": 32.0, "elapsed_seconds": 9000.0, "label": "GRU"}}
    planned = {"key0": "GRU", "key1": "GRU", "key2": "GRU"}
    progress = ProgressCallback(total=3, metric=BLEU, concurrency=2, every=0.0,
                                finished_before=before, planned=planned)
    trials = [_trial(str(i), seed=i) for i in range(3)]
    progress.on_trial_start(0, trials, trials[2])
    assert _eta_seconds(capsys.readouterr().out.strip().splitlines()[-1]) == 8000
    progress.on_trial_result(0, trials, trials[2], {"final": 0, "valid_bleu": 20.0, "elapsed_s": 3000.0})
    assert _eta_seconds(capsys.readouterr().out.strip().splitlines()[-1]) == 5000


def test_finishing_time_hands_each_queued_trial_the_worker_that_frees_first():
    from study.execution.row_cost import finishing_time

    assert finishing_time([], [], 2) == 0.0
    assert finishing_time([], [10.0, 10.0, 10.0, 10.0], 2) == 20.0
    assert finishing_time([], [10.0, 10.0, 10.0], 2) == 20.0  # not 15: a trial does not split
    assert finishing_time([1.0, 8.0], [5.0, 5.0], 2) == 11.0  # 1 + 5, then 6 + 5 beats 8
    assert finishing_time([4.0], [], 3) == 4.0
    assert finishing_time([4.0], [3.0, 3.0, 3.0], 3) == 6.0  # two free workers take two at once
    assert finishing_time([], [6.0, 1.0, 1.0], 1) == 8.0  # one worker: the sum


def test_a_trial_past_the_mean_adds_nothing_and_no_eta_before_a_finished_trial(capsys):
    progress = ProgressCallback(total=3, metric=BLEU, concurrency=1, every=0.0)
    trials = [_trial(str(i), seed=i) for i in range(3)]
    progress.on_trial_result(0, trials, trials[0], {"final": 0, "valid_bleu": 1.0, "elapsed_s": 50.0})
    assert "ETA" not in capsys.readouterr().out
    progress.on_trial_result(0, trials, trials[1], {"final": 1, "valid_bleu": 2.0, "elapsed_seconds": 40.0})
    progress.on_trial_result(0, trials, trials[0], {"final": 0, "valid_bleu": 3.0, "elapsed_s": 60.0})
    assert _eta_seconds(capsys.readouterr().out.strip().splitlines()[-1]) == 40  # the third trial only


def test_a_grid_prices_each_trial_left_by_its_own_rows_finished_trials(capsys):
    # an ablation whose rows differ in speed: one fast row, one slow, one with no finished trial yet
    labels = {"0": "fast", "1": "slow", "2": "slow", "3": "slow", "4": "new"}
    planned = {f"key{i}": label for i, label in labels.items()}
    progress = ProgressCallback(total=5, metric=BLEU, concurrency=1, every=0.0, planned=planned)
    trials = {i: _trial(i, seed=1, label=label) for i, label in labels.items()}
    for i, cost in (("0", 1000.0), ("2", 5000.0)):
        progress.on_trial_result(0, list(trials.values()), trials[i], {"final": 1, "status": "ok", "valid_bleu": 30.0,
                                                                       "elapsed_seconds": cost})
    progress.on_trial_result(0, list(trials.values()), trials["3"], {"final": 0, "valid_bleu": 9.0, "elapsed_s": 500.0})
    # slow seed 1 not started: 5,000; the new row: the mean of all, 3,000; slow seed 3 under way: 4,500 left
    # (one mean over every row would say 2 x 3,000 + 2,500)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert _eta_seconds(line) == 5000 + 3000 + 4500
    assert line.endswith("(1 row not timed yet, priced at the mean trial)")


def test_a_row_under_way_is_priced_by_its_own_time_per_epoch(capsys):
    # a depth study: 1L finished (40 epochs of 100 s), 6L's first trial under way at 200 s an epoch, 8L not started
    labels = {"0": "1L", "1": "1L", "2": "6L", "3": "6L", "4": "8L"}
    planned = {f"key{i}": label for i, label in labels.items()}
    progress = ProgressCallback(total=5, metric=BLEU, concurrency=1, every=0.0, planned=planned)
    trials = {i: _trial(i, seed=1, label=label) for i, label in labels.items()}
    for i in ("0", "1"):
        progress.on_trial_result(0, list(trials.values()), trials[i], {"final": 1, "status": "ok", "valid_bleu": 30.0,
                                                                       "elapsed_seconds": 4000.0, "epochs": 40})
    progress.on_trial_result(0, list(trials.values()), trials["2"], {"final": 0, "valid_bleu": 9.0, "elapsed_s": 2000.0,
                                                                     "epochs_trained": 10.0})
    line = capsys.readouterr().out.strip().splitlines()[-1]
    # 6L: 40 epochs x 200 s = 8,000 a trial, 6,000 of it left for the one under way; 8L: the mean trial, 4,000
    # (pricing 6L at the mean trial would say 2,000 + 4,000 + 4,000)
    assert _eta_seconds(line) == 6000 + 8000 + 4000
    assert line.endswith("(1 row not timed yet, priced at the mean trial)")
    progress.on_trial_result(0, list(trials.values()), trials["4"], {"final": 0, "valid_bleu": 9.0, "elapsed_s": 300.0,
                                                                     "epochs_trained": 1.0})
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert _eta_seconds(line) == 6000 + 8000 + 40 * 300 - 300 and "not timed" not in line


def test_a_row_not_started_is_priced_by_its_model_s_size(capsys):
    # a depth study: 1L and 2L finished (40 epochs of 100 and 150 s), 3L under way at 160 s an epoch
    # (slowed by other work), 4L not started
    labels = {"0": "1L", "1": "2L", "2": "3L", "3": "4L"}
    planned = {f"key{i}": label for i, label in labels.items()}
    work = {"1L": 2.0e6, "2L": 3.0e6, "3L": 4.0e6, "4L": 5.0e6}
    trials = {i: _trial(i, seed=1, label=label) for i, label in labels.items()}

    def last_line(progress: ProgressCallback) -> str:
        for i, cost in (("0", 4000.0), ("1", 6000.0)):
            progress.on_trial_result(0, list(trials.values()), trials[i], {"final": 1, "status": "ok",
                                                                           "valid_bleu": 30.0,
                                                                           "elapsed_seconds": cost, "epochs": 40})
        progress.on_trial_result(0, list(trials.values()), trials["2"], {"final": 0, "valid_bleu": 9.0,
                                                                         "elapsed_s": 1600.0, "epochs_trained": 10.0})
        return capsys.readouterr().out.strip().splitlines()[-1]

    line = last_line(ProgressCallback(total=4, metric=BLEU, concurrency=1, every=0.0,
                                      planned=planned, prices=TrialPrices(work)))
    # 3L: 40 x 160 s, 6,400 - 1,600 left; 4L: 5 x the median of 100/2, 150/3, 160/4 seconds an epoch per unit
    # of work, 250 s, 40 epochs (the mean trial, 5,000 s, would underprice it by half)
    assert _eta_seconds(line) == 4800 + 40 * 250
    assert line.endswith("(1 row not timed yet, priced by its model's size)")
    # without sizes the same row is priced at the mean trial, as before
    line = last_line(ProgressCallback(total=4, metric=BLEU, concurrency=1, every=0.0,
                                      planned=planned))
    assert _eta_seconds(line) == 4800 + 5000 and line.endswith("(1 row not timed yet, priced at the mean trial)")


def test_epoch_seconds_from_the_rows_timed_so_far():
    from study.execution.row_cost import epoch_seconds_for

    assert epoch_seconds_for(3.0, []) is None
    assert epoch_seconds_for(3.0, [(2.0, 100.0)]) == 150.0  # one timed row: in proportion
    # the median seconds per unit of work: one row slowed 3x by other work barely moves it
    assert epoch_seconds_for(5.0, [(2.0, 100.0), (3.0, 150.0), (4.0, 600.0)]) == 250.0
    assert epoch_seconds_for(5.0, [(2.0, 100.0), (4.0, 240.0)]) == 5.0 * 55.0


def test_row_work_is_each_row_s_products_per_token_before_any_trial_runs():
    """Built on the meta device, each row's model counts what the same model built for training counts."""
    from nmt.benchmarks.models import forward_flops_per_token
    from nmt.config import config_from_dict
    from nmt.model import build_model
    from study.execution.row_cost import row_work
    from study.spec.expansion import expand
    from study.spec.loading import load_study

    trials = expand(load_study("depth_srnmt"))
    stats = {"train_tgt_tokens": 16000, "train_pairs": 1000, "src_vocab": 800, "tgt_vocab": 700}
    work = row_work(trials, stats)
    assert list(work) == list(dict.fromkeys(t.label for t in trials))
    assert all(a < b for a, b in zip(work.values(), list(work.values())[1:]))  # deeper rows, more products
    first = trials[0]
    model = build_model(config_from_dict(first.config, source="test").model, 800, 700)
    assert work[first.label] == forward_flops_per_token(model, 16)


def test_durations_of_an_hour_and_more_show_hours():
    assert clock(59.9) == "0m59s"
    assert clock(7 * 60 + 5) == "7m05s"
    assert clock(3600 + 7 * 60 + 5) == "1h07m05s"
    assert clock(36 * 3600) == "36h00m00s"


def test_a_trial_held_back_by_the_time_limit_is_neither_done_nor_in_the_eta(capsys):
    planned = {"key0": "GRU", "key1": "GRU", "key2": "GRU"}
    prices = TrialPrices()
    prices.held_back["key2"] = "GRU seed 2"
    progress = ProgressCallback(total=3, metric=BLEU, concurrency=1, every=0.0, planned=planned, prices=prices)
    trials = [_trial(str(i), seed=i) for i in range(3)]
    progress.on_trial_result(0, trials, trials[0], {"final": 1, "status": "ok", "valid_bleu": 30.0,
                                                    "elapsed_seconds": 1000.0})
    progress.on_trial_complete(0, trials, trials[0])
    progress.on_trial_result(0, trials, trials[2], {"final": 0, "elapsed_s": 0.0, "epochs_trained": 0})
    progress.on_trial_complete(0, trials, trials[2])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "1/3 done, 1 held back by --time-limit" in line and "stopped" not in line
    assert _eta_seconds(line) == 1000  # the one trial left to this run


def test_an_eta_past_the_time_limit_says_that_the_trials_after_it_wait_for_resume(capsys):
    import time

    planned = {f"key{i}": "GRU" for i in range(4)}
    trials = [_trial(str(i), seed=i) for i in range(4)]

    def last_line(deadline: float) -> str:
        prices = TrialPrices()
        prices.deadline = deadline  # as study.execution.time_limit.TimeLimit sets it
        progress = ProgressCallback(total=4, metric=BLEU, concurrency=1, every=0.0, planned=planned, prices=prices)
        progress.on_trial_result(0, trials, trials[0], {"final": 1, "status": "ok", "valid_bleu": 30.0,
                                                        "elapsed_seconds": 1000.0})
        progress.on_trial_complete(0, trials, trials[0])
        return capsys.readouterr().out.strip().splitlines()[-1]

    within = last_line(time.time() + 10_000)
    assert _eta_seconds(within) == 3000 and "--time-limit" not in within
    line = last_line(time.time() + 1500)  # 3,000 s of trials left, the limit in 1,500
    assert _eta_seconds(line) == 3000  # the ETA still prices every trial; the note says which will wait
    assert re.search(r"\(--time-limit ends in (24m5\ds|25m00s): trials that would end after it wait for --resume\)$",
                     line), line
    assert last_line(time.time() - 1).endswith("(--time-limit has passed: no trial starts, those under way finish)")
