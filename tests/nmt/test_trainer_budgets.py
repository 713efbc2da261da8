"""Counted budgets (epochs, steps, tokens), the wall-time cap, and bit-identical resumption.

A table must measure the model, not the machine: every budget here is a count, so the same
seed gives the same model however fast the machine runs; only the wall-time cap depends on
speed, and a run it stops says so (status ``truncated``).

Modules covered here: ``nmt.trainer``.
"""

from __future__ import annotations

import math

import pytest
import torch

from nmt.data.batching import make_batches
from nmt.trainer import Trainer, run

QUIET = {"log": lambda _: None}
# metrics that measure the machine (speed, time) or the run's history of restarts, not the model
MACHINE_KEYS = {"train_tokens_per_s", "decode_words_per_s", "decode_seconds_per_sentence", "train_seconds",
                "elapsed_seconds", "resumes", "threads", "history"}


class Crash(Exception):
    pass


def batches_per_epoch(cfg, data) -> int:
    return len(make_batches(data.train, cfg.train.batch_tokens, shuffle=True, seed=cfg.train.seed, epoch=1))


def weights(trainer: Trainer) -> dict:
    return {name: tensor.clone() for name, tensor in trainer.model.state_dict().items()}


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)


def test_step_budget_ends_mid_epoch_after_a_validation(tmp_path, tiny_config, tiny_data):
    cfg = tiny_config("model.cell=gru", "train.max_epochs=5", "train.max_steps=3")
    n = batches_per_epoch(cfg, tiny_data)
    assert n > 3
    trainer = Trainer(cfg, tmp_path, **QUIET, data=tiny_data)
    progress = trainer.fit()
    assert progress.steps == 3 and progress.status == "ok" and progress.stop_reason == "max steps"
    assert progress.epoch == 0 and trainer.epochs_trained() == pytest.approx(3 / n)
    assert len(progress.history) == 1 and progress.best_epoch == 1  # the partial epoch was evaluated
    assert progress.history[0]["steps"] == 3


def test_token_budget_stops_at_the_first_batch_that_reaches_it(tmp_path, tiny_config, tiny_data):
    cfg = tiny_config("model.cell=gru", "train.max_epochs=5")
    first_epoch = make_batches(tiny_data.train, cfg.train.batch_tokens, shuffle=True, seed=cfg.train.seed, epoch=1)
    budget = first_epoch[0].ntokens + first_epoch[1].ntokens + 1  # reached during the third batch
    cfg = tiny_config("model.cell=gru", "train.max_epochs=5", f"train.max_tokens={budget}")
    progress = Trainer(cfg, tmp_path, **QUIET, data=tiny_data).fit()
    assert progress.stop_reason == "max tokens" and progress.steps == 3
    assert progress.train_tokens == sum(b.ntokens for b in first_epoch[:3]) >= budget


def test_epoch_budget_comes_first_when_it_is_the_smallest(tmp_path, tiny_config, tiny_data):
    cfg = tiny_config("model.cell=gru", "train.max_epochs=2", "train.max_steps=100000", "train.max_tokens=100000000",
                      "train.patience=0")
    progress = Trainer(cfg, tmp_path, **QUIET, data=tiny_data).fit()
    assert progress.stop_reason == "max epochs" and progress.epoch == 2
    assert progress.steps == 2 * batches_per_epoch(cfg, tiny_data)


def test_wall_time_cap_marks_the_run_truncated(tmp_path, tiny_config):
    cfg = tiny_config("model.cell=gru", "train.max_minutes=0.00001", "train.max_epochs=5")
    metrics = run(cfg, tmp_path, **QUIET)
    assert metrics["status"] == "truncated" and "wall-time cap" in metrics["stop_reason"]
    assert 0 < metrics["epochs"] < 1 and metrics["steps"] >= 1  # stopped inside the first epoch
    assert metrics["best_epoch"] == 1 and math.isfinite(metrics["test_bleu"])  # evaluated all the same


def test_killed_after_an_epoch_and_resumed_ends_bit_identical(tmp_path, tiny_config, tiny_data):
    """Dropout on, a halving schedule: weights, every metric of the model and the test
    translations of a run crashed after epoch 2 and resumed equal those of a straight run."""
    cfg = tiny_config("model.cell=lstm", "model.dropout=0.3", "train.max_epochs=3", "train.lr_decay=halve",
                      "train.patience=0")
    straight = run(cfg, tmp_path / "straight", **QUIET)

    def crash_after_second_epoch(metrics, checkpoint_dir):
        if metrics["epoch"] == 2:
            raise Crash

    with pytest.raises(Crash):
        run(cfg, tmp_path / "crashed", report=crash_after_second_epoch, **QUIET)
    resumed = run(cfg, tmp_path / "crashed", resume_from=tmp_path / "crashed" / "checkpoint", **QUIET)
    assert resumed["resumes"] == 1
    assert {k: v for k, v in resumed.items() if k not in MACHINE_KEYS} == \
        {k: v for k, v in straight.items() if k not in MACHINE_KEYS}
    model_keys = ("epoch", "train_loss", "valid_ppl", "valid_bleu", "lr", "steps", "train_tokens")
    assert [[h[k] for k in model_keys] for h in resumed["history"]] == \
        [[h[k] for k in model_keys] for h in straight["history"]]
    assert (tmp_path / "crashed" / "test.hyp").read_text() == (tmp_path / "straight" / "test.hyp").read_text()
    a = torch.load(tmp_path / "straight" / "checkpoint" / "state.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "crashed" / "checkpoint" / "state.pt", weights_only=True)["model"]
    assert_same_weights(a, b)


def test_a_larger_step_budget_continues_inside_the_epoch_exactly(tmp_path, tiny_config, tiny_data):
    """Stopped by a step budget mid-epoch, then resumed with a larger one: the position inside
    the epoch, the data order and the dropout RNG carry on as if it had never stopped."""
    n = batches_per_epoch(tiny_config(), tiny_data)
    total = n + 2  # ends inside epoch 2
    straight = Trainer(tiny_config("model.cell=gru", "model.dropout=0.3", "train.max_epochs=5", f"train.max_steps={total}"),
                       tmp_path / "straight", **QUIET, data=tiny_data)
    straight.fit()

    first = Trainer(tiny_config("model.cell=gru", "model.dropout=0.3", "train.max_epochs=5", "train.max_steps=3"),
                    tmp_path / "parts", **QUIET, data=tiny_data)
    first.fit()
    assert first.progress.batches_into_epoch == 3
    second = Trainer(tiny_config("model.cell=gru", "model.dropout=0.3", "train.max_epochs=5", f"train.max_steps={total}"),
                     tmp_path / "parts", **QUIET, data=tiny_data)
    assert second.resume(tmp_path / "parts" / "checkpoint")
    progress = second.fit()
    assert progress.steps == total and progress.epoch == 1 and progress.batches_into_epoch == 2
    assert second.epochs_trained() == pytest.approx(1 + 2 / n)
    assert progress.train_tokens == straight.progress.train_tokens
    assert_same_weights(weights(straight), weights(second))
    # epoch 1's loss and gradient norms are over all of its batches, though they were trained in two pieces
    for key in ("train_loss", "grad_norm_mean", "grad_norm_max", "clipped_share"):
        assert progress.history[1][key] == pytest.approx(straight.progress.history[0][key], rel=1e-12), key


def test_a_truncated_run_resumed_without_the_cap_equals_an_uncapped_run(tmp_path, tiny_config, tiny_data):
    straight = Trainer(tiny_config("model.cell=gru", "train.max_epochs=2"), tmp_path / "straight", **QUIET,
                       data=tiny_data)
    straight.fit()
    capped = Trainer(tiny_config("model.cell=gru", "train.max_epochs=2", "train.max_minutes=0.00001"),
                     tmp_path / "capped", **QUIET, data=tiny_data)
    assert capped.fit().status == "truncated"
    again = Trainer(tiny_config("model.cell=gru", "train.max_epochs=2"), tmp_path / "capped", **QUIET,
                    data=tiny_data)
    again.resume(tmp_path / "capped" / "checkpoint")
    progress = again.fit()
    assert progress.status == "ok" and progress.epoch == 2 and progress.steps == straight.progress.steps
    assert_same_weights(weights(straight), weights(again))


@pytest.mark.parametrize("key,value,why", [("train.max_steps", 0, ">= 1"), ("train.max_tokens", -5, ">= 1"),
                                           ("train.max_minutes", 0, "> 0")])
def test_bad_budgets_are_one_line(tiny_config, key, value, why):
    from nmt.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        tiny_config(f"{key}={value}")
    assert key in str(err.value) and why in str(err.value) and "\n" not in str(err.value)


# a validation curve that rises, then flattens: the trainer's validation is replaced by it (epoch -> (ppl, BLEU)),
# so the rule is tested on a known curve while the model trains for real
CURVE = [10.0, 30.0, 45.0, 52.0, 55.0, 55.4, 55.1, 55.6, 55.3, 55.5, 55.4, 55.5, 55.6, 55.4, 55.5, 55.5, 55.4, 55.6,
         55.5, 55.5]


@pytest.fixture
def scripted_curve(monkeypatch):
    monkeypatch.setattr(Trainer, "validate", lambda self: (2.0, CURVE[self.progress.epoch - 1]))


def first_plateau(min_epochs: int) -> int:
    from nmt.plateau import on_plateau

    return next(epoch for epoch in range(max(min_epochs, 1), len(CURVE) + 1) if on_plateau(CURVE[:epoch]))


def test_the_plateau_rule_stops_at_the_first_epoch_whose_curve_is_on_a_plateau(tmp_path, tiny_config, tiny_data,
                                                                                scripted_curve):
    """train.early_stop: plateau ends a run at the first epoch (from min_epochs on) whose validation curve
    nmt.plateau calls a plateau, whatever patience says; the epoch budget stays a safety net."""
    cfg = tiny_config("model.cell=gru", "train.batch_tokens=6000", "train.max_epochs=20", "train.early_stop=plateau",
                      "train.min_epochs=6", "train.patience=1")
    progress = Trainer(cfg, tmp_path, **QUIET, data=tiny_data).fit()
    # patience 1 alone would have stopped at epoch 7, the first without a new best
    assert progress.stop_reason == "plateau" and progress.epoch == first_plateau(6) > 7
    capped = tiny_config("model.cell=gru", "train.batch_tokens=6000", "train.max_epochs=9", "train.early_stop=plateau")
    assert Trainer(capped, tmp_path / "capped", **QUIET, data=tiny_data).fit().stop_reason == "max epochs"


def test_a_plateau_stop_before_a_raised_min_epochs_trains_on_after_a_resume(tmp_path, tiny_config, tiny_data,
                                                                             scripted_curve):
    """A run the plateau rule stopped continues, on resume, when train.min_epochs was raised past its epoch,
    to the same weights as a run that had the later min_epochs from the start."""
    first = tiny_config("model.cell=gru", "train.batch_tokens=6000", "train.max_epochs=20", "train.early_stop=plateau")
    stopped = Trainer(first, tmp_path / "run", **QUIET, data=tiny_data).fit()
    assert stopped.stop_reason == "plateau" and stopped.epoch == first_plateau(0)
    later = stopped.epoch + 2
    raised = tiny_config("model.cell=gru", "train.batch_tokens=6000", "train.max_epochs=20", "train.early_stop=plateau",
                         f"train.min_epochs={later}")
    resumed = Trainer(raised, tmp_path / "run", **QUIET, data=tiny_data)
    assert resumed.resume(tmp_path / "run" / "checkpoint")
    progress = resumed.fit()
    straight = Trainer(raised, tmp_path / "straight", **QUIET, data=tiny_data)
    assert progress.epoch == straight.fit().epoch == first_plateau(later)
    assert_same_weights(weights(resumed), weights(straight))
