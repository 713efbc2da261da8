"""A trial's price from the trials reported so far: its row's finished trials, else its row's time per epoch
(under way, or by its model's size) times the finished trials' epochs, else the study's finished trials; the
mean for the ETA, the longest for --time-limit."""

from __future__ import annotations

import statistics

from study.execution.trial_prices import ANY_ROW, ROW, SIZED, UNDER_WAY, TrialPrices


def test_nothing_is_priced_before_a_trial_finished():
    prices = TrialPrices({"GRU": 1.0})
    prices.note_progress("k1", "GRU", 500.0, 5)
    assert not prices.known() and prices.price("GRU") == (None, "")


def test_a_row_with_finished_trials_is_priced_by_them_mean_or_longest():
    prices = TrialPrices()
    for seconds in (1000.0, 3000.0):
        prices.note_finished(seconds, "GRU", 40)
    prices.note_finished(0.0, "GRU", 40)  # a record without its time prices nothing
    assert prices.price("GRU") == (2000.0, ROW)
    assert prices.price("GRU", max) == (3000.0, ROW)


def test_a_row_under_way_or_sized_is_priced_per_epoch_times_the_finished_trials_epochs():
    prices = TrialPrices({"1L": 1.0, "4L": 4.0})
    prices.note_finished(1000.0, "1L", 10)  # 100 s an epoch for 1 unit of work
    prices.note_finished(3000.0, "1L", 30)
    # 4L not timed: 4 units at 100 s a unit, times the epochs (mean 20, longest 30)
    assert prices.price("4L") == (8000.0, SIZED)
    assert prices.price("4L", max) == (12000.0, SIZED)
    prices.note_progress("k", "4L", 1500.0, 5)  # under way at 300 s an epoch
    assert prices.price("4L", max) == (9000.0, UNDER_WAY)
    prices.forget("k")
    assert prices.price("4L", max)[1] == SIZED
    # a row with no size and no trial: the study's finished trials
    assert prices.price("other", statistics.fmean) == (2000.0, ANY_ROW)
    assert prices.price("other", max) == (3000.0, ANY_ROW)


def test_once_a_trial_timed_on_this_machine_has_finished_only_such_trials_price():
    xeon, epyc = "Intel Xeon (family 6, model 167)", "AMD EPYC (family 25, model 1)"
    prices = TrialPrices({"1L": 1.0, "2L": 2.0}, machine=xeon)
    prices.note_finished(4000.0, "1L", 40, epyc)  # 100 s an epoch elsewhere
    assert prices.price("1L") == (4000.0, ROW) and prices.price("2L") == (8000.0, SIZED)  # nothing of this machine yet
    prices.note_finished(1200.0, "1L", 30, xeon)  # 40 s an epoch here
    assert prices.price("1L", max) == (1200.0, ROW)
    assert prices.price("2L", max) == (30 * 80.0, SIZED)  # this machine's epochs and time per unit of work
    assert prices.trial_costs == [1200.0] and prices.known()
    assert TrialPrices(machine=xeon).price("1L") == (None, "")
