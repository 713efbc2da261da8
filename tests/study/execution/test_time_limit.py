"""--time-limit: a trial is held back at its first report of a run when the limit has passed or its row's
longest trial says it ends after it; a trial let through is not asked again; nothing is held back unpriced while
time is left; a search refuses the option."""

from __future__ import annotations

import pytest
from study_helpers import grid_study, search_study

from nmt.errors import UserError
from study.execution.time_limit import TimeLimit, check_time_limit
from study.execution.trial_prices import TrialPrices
from study.spec.loading import load_study
from study.spec.options import Execution, RunOptions


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def _report(key: str, label: str = "GRU", epochs: float = 0, seconds: float = 0.0, final: int = 0) -> dict:
    return {"trial_key": key, "label": label, "seed": 1.0, "epochs_trained": epochs, "elapsed_s": seconds, "final": final}


def _limit(hours: float, clock: Clock, prices: TrialPrices, caps: dict[str, float] | None = None
           ) -> tuple[TimeLimit, list[str]]:
    said: list[str] = []
    return TimeLimit(hours, started=0.0, prices=prices, say=said.append, caps=caps, now=clock), said


def test_a_trial_starts_only_when_its_rows_longest_trial_ends_within_the_limit():
    prices = TrialPrices()
    prices.note_finished(1000.0, "GRU", 10)
    prices.note_finished(2000.0, "GRU", 20)  # the longest: 2,000 s
    clock = Clock(0.0)
    limit, said = _limit(1.0, clock, prices)
    assert prices.deadline == 3600.0  # shared with the progress line, whose ETA names it
    clock.now = 3600.0 - 2000.0  # just fits
    assert limit("t1", _report("a")) is False
    clock.now = 3600.0 - 1999.0
    assert limit("t2", _report("b")) is True
    assert limit.prices.held_back == {"b": "GRU seed 1"}
    assert said == ["held back by --time-limit: GRU seed 1, not started (it needs 33m20s more, priced by its row's "
                    "finished trials at the longest; 33m19s left); --resume starts it"]
    # a trial let through is not held back at a later epoch, and a held back trial's later results stop nothing new
    clock.now = 3599.0
    assert limit("t1", _report("a", epochs=5, seconds=900.0)) is False


def test_a_continued_trial_is_priced_by_what_it_has_left_and_its_checkpoint_is_named():
    prices = TrialPrices()
    prices.note_finished(2000.0, "GRU", 20)
    clock = Clock(3000.0)  # 600 s left
    limit, said = _limit(1.0, clock, prices)
    assert limit("t1", _report("a", epochs=17, seconds=1500.0)) is False  # 500 s left to train
    assert limit("t2", _report("b", epochs=3, seconds=300.0)) is True
    assert said[-1].startswith("held back by --time-limit: GRU seed 1 at epoch 3 (it needs 28m20s more")
    assert said[-1].endswith("its checkpoint is kept, --resume continues it")


def test_unpriced_trials_start_while_time_is_left_and_none_once_it_passed():
    clock = Clock(10.0)
    limit, said = _limit(0.01, clock, TrialPrices())
    assert limit("t1", _report("a")) is False and not said
    assert limit("t2", _report("b", final=1)) is False  # a finished trial's replay is never held back
    clock.now = 36.0
    assert limit("t3", _report("c")) is True
    assert "(the limit has passed)" in said[-1]
    assert limit.stop_all() is False  # the trials under way always finish


def test_the_option_is_checked_and_refused_for_a_search(tmp_path):
    with pytest.raises(UserError, match=r"--time-limit 0: must be > 0"):
        RunOptions(how=Execution(time_limit=0.0)).check()
    RunOptions(how=Execution(time_limit=2.5)).check()
    path = tmp_path / "s.yaml"
    path.write_text(search_study("s", "    train.lr: {type: loguniform, low: 1.0e-4, high: 1.0e-2}", samples=2))
    spec = load_study(str(path))
    with pytest.raises(UserError, match="--time-limit holds back grid trials only"):
        check_time_limit(spec, RunOptions(how=Execution(time_limit=1.0)))
    check_time_limit(spec, RunOptions())
    path.write_text(grid_study("s", "  - {label: gru, set: {}}") + "scheduler: {type: asha, grace_period: 1}\n")
    with pytest.raises(UserError, match="--time-limit with scheduler asha"):
        check_time_limit(load_study(str(path)), RunOptions(how=Execution(time_limit=1.0)))
    path.write_text(grid_study("s", "  - {label: gru, set: {}}"))
    check_time_limit(load_study(str(path)), RunOptions(how=Execution(time_limit=1.0)))


def test_only_a_run_whose_other_trials_all_ended_counts_as_stopped_by_the_limit():
    from types import SimpleNamespace

    from study.execution.driver import ended_but_held_back

    run = SimpleNamespace(trials=[SimpleNamespace(key=key) for key in ("a", "b", "c")])
    records = [{"key": "a", "status": "ok"}, {"key": "b", "status": "failed"}, {"key": "c", "status": "running"}]
    assert ended_but_held_back(run, records, {"c": "GRU seed 3"})
    # Ctrl-C while "c" trained: not the limit's doing
    assert not ended_but_held_back(run, records, {"b": "GRU seed 2"})
    assert not ended_but_held_back(run, records[:1], {"b": "GRU seed 2"})  # "c" never started


def test_bad_limits_are_one_line_and_exit_2_before_anything_runs(tmp_path):
    from study_helpers import in_process

    path = tmp_path / "s.yaml"
    path.write_text(search_study("s", "    train.lr: {type: loguniform, low: 1.0e-4, high: 1.0e-2}", samples=2))
    for args, message in (((str(path), "--time-limit", "-1"), "--time-limit -1: must be > 0"),
                          ((str(path), "--time-limit", "nan"), "--time-limit nan: must be a finite number"),
                          ((str(path), "--time-limit", "2", "--dry-run"), "--time-limit holds back grid trials only")):
        result = in_process(*args, "--results", str(tmp_path / "results"))
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert not (tmp_path / "results").exists()


def test_a_trial_started_unpriced_is_priced_by_its_first_epoch_up_to_its_epoch_cap():
    """Nothing has finished: trials start; after an epoch, their own pace times the epochs left to their cap
    decides once whether they go on (the LSTM rows of cells_m30k, 2 minutes an epoch, 60 at most, in 1.8 hours)."""
    clock = Clock(0.0)
    caps = {key: 60.0 for key in ("slow", "fast", "b")}
    limit, said = _limit(1.8, clock, TrialPrices(), caps)
    assert limit("t1", _report("slow", label="LSTM")) is False and limit("t2", _report("fast", label="ATR")) is False
    assert limit("t1", _report("slow", label="LSTM")) is False  # a retry's start report: not yet an epoch
    clock.now = 120.0
    assert limit("t1", _report("slow", label="LSTM", epochs=1, seconds=120.0)) is True  # 59 x 2 min > 1h46m left
    assert limit.prices.held_back == {"slow": "LSTM seed 1"}
    assert said == ["held back by --time-limit: LSTM seed 1 at epoch 1 (it needs 1h58m00s more, priced by its own "
                    "2m00s an epoch up to its cap of 60 epochs; 1h46m00s left); its checkpoint is kept, --resume "
                    "continues it"]
    assert limit("t2", _report("fast", label="ATR", epochs=1, seconds=90.0)) is False  # 59 x 1.5 min fits
    clock.now = 9000.0  # asked once: not again at a later epoch, even when its pace would no longer fit
    assert limit("t2", _report("fast", label="ATR", epochs=2, seconds=9000.0)) is False and len(said) == 1
    # a trial continued from its checkpoint, unpriced, is priced by its own epochs at once
    clock.now = 0.0
    continued, said = _limit(1.0, clock, TrialPrices(), caps)
    assert continued("t4", _report("b", label="LSTM", epochs=20, seconds=6000.0)) is True
    assert said[0].startswith("held back by --time-limit: LSTM seed 1 at epoch 20 (it needs 3h20m00s more, priced by "
                              "its own 5m00s an epoch")


def test_an_unpriced_trial_is_asked_once_more_whatever_prices_it_then():
    clock = Clock(0.0)
    # without a cap nothing prices it after its first epoch either: it is not asked again, even past the limit
    uncapped, said = _limit(1.0, clock, TrialPrices())
    assert uncapped("t1", _report("a", label="LSTM")) is False
    assert uncapped("t1", _report("a", label="LSTM", epochs=1, seconds=100.0)) is False
    clock.now = 4000.0
    assert uncapped("t1", _report("a", label="LSTM", epochs=4, seconds=400.0)) is False and said == []
    # a trial of another row finishes before this one's first epoch: the higher of that price and its own pace counts
    clock.now = 0.0
    prices = TrialPrices()
    limit, said = _limit(1.0, clock, prices, {"a": 60.0})
    assert limit("t1", _report("a", label="LSTM")) is False
    prices.note_finished(600.0, "GRU", 15)  # 40 s an epoch over 15 epochs: prices LSTM at 10 minutes
    clock.now = 61.0  # its own pace: 59 x 61 s, past the limit; the finished trial's price (15 x 61 s) would fit
    assert limit("t1", _report("a", label="LSTM", epochs=1, seconds=61.0)) is True
    assert "(it needs 59m59s more, priced by its own 1m01s an epoch up to its cap of 60 epochs; 58m59s left)" in said[0]
