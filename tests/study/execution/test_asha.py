"""ASHA across a resume: a study stopped mid-way and resumed makes the stop decisions of one run
straight through (study.execution.asha): the rungs count the trial's own epochs, know a trial by its
study key, and are refilled from the stored epochs in the order they were reported, deciding again (a
stop the driver never delivered is made at the trial's first report). End to end, with real trials:
tests/e2e/test_asha_resume.py."""

from __future__ import annotations

from types import SimpleNamespace

from study.execution.asha import ResumableASHA, stored_epochs
from study.execution.trainable import TRIAL

# three trials' valid BLEU per epoch, run one at a time in this order
CURVES = {"a": [10, 12, 14, 16, 17, 18, 19, 20],
          "b": [11, 13, 15, 15.5, 16, 16.5, 17, 17.5],
          "c": [10.5, 12.5, 14.5, 15.8, 17, 18, 19, 19.5]}


def trial(key: str, attempt: int = 1):
    """A Tune trial as the scheduler sees it: a new Tune id on every run, the study key in its config."""
    return SimpleNamespace(trial_id=f"{key}-{attempt}", config={TRIAL: {"key": key}})


def run(scheduler, key: str, epochs, attempt: int = 1) -> list[tuple[int, str]]:
    """Report ``epochs`` of ``key``'s curve; the (epoch, decision) pairs up to the first STOP."""
    tune_trial = trial(key, attempt)
    scheduler.on_trial_add(None, tune_trial)
    decisions = []
    for epoch in epochs:
        decision = scheduler.on_trial_result(None, tune_trial, {"epoch": epoch, "valid_bleu": CURVES[key][epoch - 1]})
        decisions.append((epoch, decision))
        if decision == "STOP":
            break
    return decisions


def asha(stored=None) -> ResumableASHA:
    return ResumableASHA("valid_bleu", "max", max_t=9, grace_period=1, reduction_factor=2, stored=stored)


def test_a_resumed_study_stops_the_trials_that_one_run_straight_through_stops():
    straight = asha()
    whole = {key: run(straight, key, range(1, 9)) for key in CURVES}
    assert any(decisions[-1][1] == "STOP" for decisions in whole.values())  # the scenario has stops to get right
    # the same study stopped while "b" was at epoch 3, then resumed: "b" continues from epoch 4, "c" starts
    first = asha()
    before = {"a": run(first, "a", range(1, 9)), "b": run(first, "b", range(1, 4))}
    assert before["a"] == whole["a"] and before["b"] == whole["b"][:3]
    history = {key: [{"epoch": epoch, "valid_bleu": CURVES[key][epoch - 1]} for epoch, _ in decisions]
               for key, decisions in before.items()}
    resumed = asha(stored_epochs(history, "valid_bleu"))
    after = {"b": run(resumed, "b", range(4, 9), attempt=2), "c": run(resumed, "c", range(1, 9), attempt=2)}
    assert before["b"] + after["b"] == whole["b"] and after["c"] == whole["c"]
    # without the stored epochs the resumed run decides otherwise: the replay is what makes them equal
    forgetful = asha()
    assert [run(forgetful, "b", range(4, 9), 2), run(forgetful, "c", range(1, 9), 2)] != [after["b"], after["c"]]


def test_a_stop_the_driver_never_delivered_is_made_when_the_trial_resumes():
    straight = asha()
    whole = {key: run(straight, key, range(1, 9)) for key in CURVES}
    stopped, decisions = next((key, d) for key, d in whole.items() if d[-1][1] == "STOP")
    last = decisions[-1][0]
    # the first run stored every epoch up to the stopped trial's last, and its driver went away before ASHA's
    # STOP reached the trial; each epoch's record keeps when it was reported, which orders the replay
    order = list(CURVES)[:list(CURVES).index(stopped) + 1]
    clock = iter(range(1, 1000))
    history = {key: [{"epoch": epoch, "valid_bleu": CURVES[key][epoch - 1], "reported_at": float(next(clock))}
                     for epoch, _ in whole[key]] for key in order}
    replayed = stored_epochs(dict(reversed(history.items())), "valid_bleu")  # the store lists keys in its own order
    assert [key for key, _, _ in replayed] == [key for key in order for _ in whole[key]]
    resumed = asha(replayed)
    # the resumed trial first reports the epoch it continues from: stopped there, as straight through
    first_report = {"epoch": last, "valid_bleu": CURVES[stopped][last - 1]}
    assert resumed.on_trial_result(None, trial(stopped, 2), first_report) == "STOP"
    # a trial the first run let continue is not stopped by its first report
    going_on = next(key for key in order if whole[key][-1][1] != "STOP")
    assert asha(replayed).on_trial_result(None, trial(going_on, 2), {"epoch": 8, "valid_bleu": 99.0}) != "STOP"


def test_a_replayed_stop_waits_for_its_epoch_in_a_trial_trained_again_from_the_start():
    straight = asha()
    whole = {key: run(straight, key, range(1, 9)) for key in CURVES}
    stopped, decisions = next((key, d) for key, d in whole.items() if d[-1][1] == "STOP")
    last = decisions[-1][0]
    assert last > 1  # the scenario stops a trial after its first rung
    order = list(CURVES)[:list(CURVES).index(stopped) + 1]
    history = {key: [{"epoch": epoch, "valid_bleu": CURVES[key][epoch - 1]} for epoch, _ in whole[key]] for key in order}
    resumed = asha(stored_epochs(history, "valid_bleu"))
    # its checkpoint gone (a clone of committed records), it trains from epoch 1 and stops where it stopped before
    again = [resumed.on_trial_result(None, trial(stopped, 2), {"epoch": epoch, "valid_bleu": CURVES[stopped][epoch - 1]})
             for epoch in range(1, last + 1)]
    assert again == ["CONTINUE"] * (last - 1) + ["STOP"]
