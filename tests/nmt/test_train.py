"""The training loop and the command lines, end to end on tiny real data.

Modules covered here: ``nmt.checkpoint``, ``nmt.evaluate``, ``nmt.run_dir`` and ``nmt.trainer``."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from study_helpers import in_process

from nmt.checkpoint import BEST, STATE, load_for_inference
from nmt.trainer import Trainer, run

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {"status", "valid_bleu", "test_bleu", "test_chrf", "params", "weight_matrices", "train_tokens_per_s",
            "decode_words_per_s", "epochs", "bleu_signature"}


def cli(*args: str, stdin: str | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", *args], input=stdin, capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def write_config(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


TINY_YAML = """
data: {{preset: synthetic, size: 300, valid_size: 20, test_size: 20, max_len: 60, spm: {{vocab_size: 200}},
       cache_dir: {cache}}}
model: {{cell: {cell}, hidden: 16, emb: 16}}
train: {{max_epochs: 2, batch_tokens: 600, threads: 1}}
decode: {{beam: 2}}
"""


@pytest.mark.slow
def test_train_cli_writes_metrics_hypotheses_and_checkpoint_then_translate_round_trips(tmp_path, cache_dir):
    config = write_config(tmp_path / "tiny.yaml", TINY_YAML.format(cache=cache_dir, cell="atr"))
    out = tmp_path / "run"
    result = cli("nmt.train", "--config", str(config), "--out", str(out))
    assert result.returncode == 0, result.stderr
    epoch_lines = [line for line in result.stdout.splitlines() if line.startswith("epoch ")]
    assert len(epoch_lines) == 2 and all("valid BLEU" in line and "tok/s" in line for line in epoch_lines)

    metrics = json.loads((out / "metrics.json").read_text())
    assert REQUIRED <= set(metrics)
    assert metrics["status"] == "ok" and metrics["epochs"] == 2
    assert 0.0 <= metrics["test_bleu"] <= 100.0 and 0.0 <= metrics["test_chrf"] <= 100.0
    assert metrics["weight_matrices"] == 2 and metrics["params"] > 1000
    assert metrics["train_tokens_per_s"] > 0 and metrics["decode_words_per_s"] > 0
    assert metrics["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    # portable numerics by default, recorded where they hold (nmt.numerics)
    assert (metrics["numerics"], metrics["pinning"], metrics["cpu_capability"], metrics["mkl_cbwr"]) == (
        "portable", 2, "AVX2", "COMPATIBLE")
    assert metrics["kernels"] == "torch"  # the default recurrences (nmt.ops.kernels), recorded
    hypotheses = (out / "test.hyp").read_text(encoding="utf-8").splitlines()
    assert len(hypotheses) == 20
    for name in (STATE, BEST, "config.yaml", "src.model"):
        assert (out / "checkpoint" / name).is_file()

    # nmt.translate with the same beam reproduces test.hyp from the test sources
    sources = next((cache_dir / "synthetic").glob("seed1-300-20-20")) / "test.src"
    translated = cli("nmt.translate", "--checkpoint", str(out), "--beam", "2", stdin=sources.read_text())
    assert translated.returncode == 0, translated.stderr
    assert translated.stdout.splitlines() == hypotheses


def test_checkpoint_reload_gives_identical_outputs(tmp_path, tiny_config, tiny_data):
    cfg = tiny_config("model.cell=srnmt", "model.enc_layers=2", "model.dec_layers=2")
    trainer = Trainer(cfg, tmp_path, log=lambda _: None, data=tiny_data)
    trainer.fit()
    model, loaded_cfg, _, tgt_vocab = load_for_inference(tmp_path / "checkpoint")
    assert loaded_cfg.model == cfg.model and len(tgt_vocab) == len(tiny_data.tgt_vocab)
    trainer.model.load_state_dict(torch.load(tmp_path / "checkpoint" / BEST, weights_only=True)["model"])
    trainer.model.eval()
    batch = next(iter(__import__("nmt.data.batching", fromlist=["x"]).make_batches(tiny_data.valid, 400, False)))
    args = (batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask)
    torch.testing.assert_close(model(*args), trainer.model(*args), rtol=0, atol=0)


class Crash(Exception):
    pass


def test_resume_after_a_crash_continues_exactly(tmp_path, tiny_config, tiny_data):
    """Killed after epoch 1's checkpoint, resumed: the same weights as an uninterrupted run."""
    cfg = tiny_config("model.cell=gru", "train.max_epochs=2", "train.lr_decay=halve")
    straight = Trainer(cfg, tmp_path / "straight", log=lambda _: None, data=tiny_data)
    straight.fit()

    def crash_after_first_epoch(metrics, checkpoint_dir):
        assert (checkpoint_dir / STATE).is_file()
        raise Crash

    crashed = Trainer(cfg, tmp_path / "crashed", report=crash_after_first_epoch, log=lambda _: None, data=tiny_data)
    with pytest.raises(Crash):
        crashed.fit()
    resumed = Trainer(cfg, tmp_path / "crashed", log=lambda _: None, data=tiny_data)
    resumed.resume(tmp_path / "crashed" / "checkpoint")
    assert resumed.progress.epoch == 1
    resumed.fit()
    assert resumed.progress.epoch == 2 and resumed.progress.steps == straight.progress.steps
    for (name, a), (_, b) in zip(straight.model.state_dict().items(), resumed.model.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    assert [h["lr"] for h in resumed.progress.history] == [h["lr"] for h in straight.progress.history]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "missing_keys"])
def test_corrupt_checkpoint_restarts_from_scratch_with_a_warning(tmp_path, tiny_config, tiny_data, damage):
    cfg = tiny_config("model.cell=gru", "train.max_epochs=2")
    first = Trainer(cfg, tmp_path / "run", log=lambda _: None, data=tiny_data)
    first.fit()
    state = tmp_path / "run" / "checkpoint" / STATE
    if damage == "truncate":
        state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    elif damage == "garbage":
        state.write_bytes(b"not a checkpoint at all")
    else:
        torch.save({"model": {}}, state)
    lines = []
    again = Trainer(cfg, tmp_path / "run", log=lines.append, data=tiny_data)
    assert again.resume(tmp_path / "run" / "checkpoint") is False
    assert any(line.startswith("warning: cannot resume from") and "starting from scratch" in line for line in lines)
    assert again.progress.epoch == 0 and again.progress.resumes == 0
    again.fit()
    assert again.progress.epoch == 2 and again.progress.steps == first.progress.steps
    intact = Trainer(cfg, tmp_path / "run", log=lambda _: None, data=tiny_data)
    assert intact.resume(tmp_path / "run" / "checkpoint") is True and intact.progress.resumes == 1


def test_report_hook_sees_every_epoch_and_halving_schedule(tmp_path, tiny_config, tiny_data):
    seen = []
    cfg = tiny_config("model.cell=rnn", "train.max_epochs=3", "train.lr_decay=halve", "train.lr=0.004",
                      "train.patience=0")
    Trainer(cfg, tmp_path, report=lambda m, d: seen.append((m, d)), log=lambda _: None, data=tiny_data).fit()
    assert [m["epoch"] for m, _ in seen] == [1, 2, 3]
    assert [m["lr"] for m, _ in seen] == [0.004, 0.002, 0.001]
    assert all(math.isfinite(m["valid_bleu"]) and m["valid_ppl"] > 1 for m, _ in seen)
    assert all(d == tmp_path / "checkpoint" for _, d in seen)


def test_plateau_restarts_from_best_with_lower_lr(tmp_path, tiny_config, tiny_data):
    cfg = tiny_config("model.cell=gru", "train.lr_decay=plateau", "train.plateau_patience=1")
    trainer = Trainer(cfg, tmp_path, log=lambda _: None, data=tiny_data)
    trainer.fit()  # one epoch: writes best.pt
    best = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(1.0)  # a "bad" epoch moved the weights
    trainer._update_schedule(improved=False)
    assert trainer.progress.lr == pytest.approx(cfg.train.lr * 0.5)
    assert all(torch.equal(best[k], v) for k, v in trainer.model.state_dict().items())


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_fsmn_memory_taps_keep_their_lower_learning_rate_through_decay_and_resume(tmp_path, tiny_config, tiny_data,
                                                                                    optimizer):
    cfg = tiny_config("model.cell=fsmn", "model.enc_layers=3", "model.memory_layers=middle",
                      "model.memory_lr_scale=0.01", "train.lr_decay=halve", f"train.optimizer={optimizer}")
    trainer = Trainer(cfg, tmp_path, log=lambda _: None, data=tiny_data)
    assert type(trainer.optimizer) is {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}[optimizer]
    assert trainer.optimizer.defaults.get("momentum", 0) == 0  # the FSMN paper's SGD has no momentum
    trainer.fit()
    lrs = [group["lr"] for group in trainer.optimizer.param_groups]
    assert lrs == pytest.approx([cfg.train.lr * 0.5, cfg.train.lr * 0.5 * 0.01])  # one epoch, halved once
    resumed = Trainer(cfg, tmp_path, log=lambda _: None, data=tiny_data)
    assert resumed.resume(tmp_path / "checkpoint")
    assert [group["lr"] for group in resumed.optimizer.param_groups] == pytest.approx(lrs)
    taps = {id(p) for p in resumed.optimizer.param_groups[1]["params"]}
    assert taps == {id(m.taps) for m in resumed.model.modules() if hasattr(m, "taps")}


def spy_on_gradient_norms(monkeypatch) -> list[float]:
    """The norms the real ``clip_grad_norm_`` returns, one per training step, in order."""
    norms, clip = [], torch.nn.utils.clip_grad_norm_

    def recording(parameters, max_norm, *args, **kwargs):
        norm = clip(parameters, max_norm, *args, **kwargs)
        norms.append(float(norm))
        return norm

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording)
    return norms


def test_every_epoch_records_its_gradient_norms_before_clipping(tmp_path, tiny_config, tiny_data, monkeypatch):
    unclipped = spy_on_gradient_norms(monkeypatch)
    free = Trainer(tiny_config("model.cell=gru", "train.max_epochs=1", "train.clip=0"), tmp_path / "free",
                   log=lambda _: None, data=tiny_data)
    entry = free.fit().history[0]
    assert len(unclipped) == free.progress.steps > 3
    assert entry["grad_norm_mean"] == pytest.approx(sum(unclipped) / len(unclipped), rel=1e-12)
    assert entry["grad_norm_max"] == max(unclipped) and entry["clipped_share"] == 0.0

    # a threshold inside the range of the norms clips some steps, counted against the norm before clipping
    threshold = sorted(unclipped)[len(unclipped) // 2]
    unclipped.clear()
    lines = []
    clipped = Trainer(tiny_config("model.cell=gru", "train.max_epochs=1", f"train.clip={threshold}"),
                      tmp_path / "clipped", log=lines.append, data=tiny_data)
    entry = clipped.fit().history[0]
    share = sum(norm > threshold for norm in unclipped) / len(unclipped)
    assert 0.0 < share < 1.0 and entry["clipped_share"] == pytest.approx(share, rel=1e-12)
    assert entry["grad_norm_max"] == max(unclipped) > threshold
    epoch_line = next(line for line in lines if line.startswith("epoch 1/1"))
    assert f"grad norm {entry['grad_norm_mean']:.2f} (max {entry['grad_norm_max']:.2f}, {share:.1%} clipped)" \
        in epoch_line


def test_huge_learning_rate_ends_as_diverged_not_exception(tmp_path, tiny_config):
    cfg = tiny_config("model.cell=srnmt", "model.layer_norm=false", "model.highway=false", "train.lr=1e30",
                      "train.clip=0", "train.max_epochs=3")
    metrics = run(cfg, tmp_path, log=lambda _: None)
    assert metrics["status"] == "diverged"
    assert "non-finite" in metrics["stop_reason"]
    assert all(math.isfinite(metrics[k]) for k in ("valid_bleu", "test_bleu", "train_tokens_per_s"))
    assert json.loads((tmp_path / "metrics.json").read_text())["status"] == "diverged"


BAD_CONFIGS = [
    ("model: {cell: lstmm}", "model.cell = 'lstmm' is not a known cell", "did you mean 'lstm'"),
    ("model: {cell: gru, hiden: 8}", "unknown key 'model.hiden'", "did you mean 'model.hidden'"),
    ("model: {enc_layers: 0}", "model.enc_layers = 0", "must be >= 1"),
    ("model: {cell: gru, gates: twin}", "model.gates", "does not exist for cell 'gru'"),
    ("train: {lr: -1}", "train.lr = -1.0", "must be > 0"),
    ("model: {dropout: 1.5}", "model.dropout = 1.5", "[0, 1)"),
    ("model: [1, 2", "malformed YAML", ""),
    ("model: {cell: gru, init: he}", "model.init = 'he'", "only fsmn has; use scaled or uniform for gru"),
    ("train: {optimizer: rmsprop}", "train.optimizer", "sgd"),
]


@pytest.mark.parametrize("text,what,fix", BAD_CONFIGS, ids=[b[1].split()[0] for b in BAD_CONFIGS])
def test_bad_config_is_one_line_and_exit_2(tmp_path, text, what, fix):
    config = write_config(tmp_path / "bad.yaml", text)
    out = tmp_path / "run"
    result = in_process("--config", str(config), "--out", str(out), module="nmt.train")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert str(config) in lines[0] and what in lines[0] and fix in lines[0]
    assert not out.exists()


def test_bad_corpus_paths_and_mismatched_lines(tmp_path):
    src, tgt = tmp_path / "a.en", tmp_path / "a.de"
    src.write_text("one\ntwo\nthree\n", encoding="utf-8")
    tgt.write_text("eins\nzwei\n", encoding="utf-8")
    files = f"train: [{src}, {tgt}], valid: [{src}, {src}], test: [{src}, {src}]"
    mismatched = write_config(tmp_path / "m.yaml", f"data: {{{files}}}")
    result = in_process("--config", str(mismatched), "--out", str(tmp_path / "run"), module="nmt.train")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "data.train" in result.stderr and "3 lines" in result.stderr and "2" in result.stderr
    missing = write_config(tmp_path / "x.yaml", f"data: {{train: [{src}, {tmp_path}/nope.de], valid: [{src}, {src}], "
                                                 f"test: [{src}, {src}]}}")
    result = in_process("--config", str(missing), "--out", str(tmp_path / "run"), module="nmt.train")
    assert result.returncode == 2 and "nope.de" in result.stderr and "not found" in result.stderr
    assert not (tmp_path / "run").exists()


def test_translate_rejects_a_missing_checkpoint(tmp_path):
    result = cli("nmt.translate", "--checkpoint", str(tmp_path / "nothing"), stdin="hello\n")
    assert result.returncode == 2 and "not found" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn", "ran", "atr", "sru", "srnmt", "fsmn"])
def test_every_cell_trains_and_evaluates_end_to_end(tmp_path, tiny_config, tiny_data, cell):
    cfg = tiny_config(f"model.cell={cell}", "model.enc_layers=2", "model.dec_layers=2")
    trainer = Trainer(cfg, tmp_path, log=lambda _: None, data=tiny_data)
    trainer.fit()
    metrics = trainer.final_metrics()
    assert metrics["status"] == "ok" and metrics["epochs"] == 1
    assert metrics["history"][0]["valid_ppl"] < len(tiny_data.tgt_vocab)  # better than uniform after one epoch
    assert metrics["test_bleu"] >= 0.0 and metrics["params"] == trainer.model.parameter_count
    assert len((tmp_path / "test.hyp").read_text(encoding="utf-8").splitlines()) == len(tiny_data.test)


@pytest.mark.slow
def test_smoke_flag_shrinks_a_deep_config(tmp_path, cache_dir):
    config = write_config(tmp_path / "deep.yaml", "model: {cell: srnmt, enc_layers: 6, dec_layers: 6, hidden: 512}\n"
                                                  f"data: {{cache_dir: {cache_dir}}}\n")
    result = cli("nmt.train", "--config", str(config), "--smoke", "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["status"] == "ok" and metrics["epochs"] <= 2
    assert "6+6 layers, hidden 32" in result.stdout


@pytest.mark.slow
def test_cli_resume_extends_a_budget_and_refuses_a_changed_model(tmp_path, cache_dir):
    config = write_config(tmp_path / "tiny.yaml", TINY_YAML.format(cache=cache_dir, cell="gru"))
    out = tmp_path / "run"
    assert cli("nmt.train", "--config", str(config), "--out", str(out), "--set", "train.max_epochs=1").returncode == 0
    again = in_process("--config", str(config), "--out", str(out), module="nmt.train")
    assert again.returncode == 2 and "holds a finished run" in again.stderr and "--force" in again.stderr
    changed = in_process("--out", str(out), "--resume", "--set", "model.hidden=32", module="nmt.train")
    assert changed.returncode == 2 and "model.hidden: 16 -> 32" in changed.stderr
    extended = cli("nmt.train", "--out", str(out), "--resume", "--set", "train.max_epochs=2")
    assert extended.returncode == 0, extended.stderr
    assert "resumed from" in extended.stdout and "epoch 2/2" in extended.stdout and "epoch 1/" not in extended.stdout
    assert json.loads((out / "metrics.json").read_text())["epochs"] == 2


def trained(progress):
    """A run's history without its clock readings: what must match between equivalent runs."""
    return [{k: v for k, v in h.items() if k not in ("elapsed_s", "train_tokens_per_s")} for h in progress.history]


def scripted_validation(trainer, results):
    """Replace validation by a script of (valid ppl, valid BLEU) per epoch."""
    script = iter(results)
    trainer.validate = lambda: next(script)


def test_falling_perplexity_counts_as_progress_while_bleu_is_zero(tmp_path, tiny_config, tiny_data):
    cfg = tiny_config("model.cell=rnn", "train.max_epochs=5", "train.lr_decay=plateau", "train.patience=2")
    trainer = Trainer(cfg, tmp_path, log=lambda _: None, data=tiny_data)
    scripted_validation(trainer, [(150.0, 0.0), (90.0, 0.0), (60.0, 0.0), (40.0, 0.0), (30.0, 0.1)])
    progress = trainer.fit()
    assert progress.epoch == 5 and progress.stop_reason == "max epochs"  # no early stop
    assert [h["lr"] for h in progress.history] == [cfg.train.lr] * 5  # no plateau restart
    assert progress.best_epoch == 5


def test_plateau_and_early_stopping_need_both_metrics_to_stall(tmp_path, tiny_config, tiny_data):
    cfg = tiny_config("model.cell=rnn", "train.max_epochs=8", "train.lr_decay=plateau", "train.patience=3")
    trainer = Trainer(cfg, tmp_path, log=lambda _: None, data=tiny_data)
    # epoch 2: only ppl improves (progress); epochs 3-5: nothing improves
    scripted_validation(trainer, [(50.0, 5.0), (40.0, 4.0), (45.0, 4.5), (41.0, 3.0), (42.0, 2.0)])
    progress = trainer.fit()
    lrs = [h["lr"] for h in progress.history]
    assert lrs[:3] == [cfg.train.lr] * 3 and lrs[3] == cfg.train.lr / 2 and lrs[4] == cfg.train.lr / 4
    assert progress.stop_reason == "early stopping" and progress.epoch == 5
    assert progress.best_epoch == 1 and progress.best_valid_bleu == 5.0  # selection is by BLEU


# stage 1: best at epoch 2, then two epochs without progress; stage 2 (restarted from epoch 2): one epoch without
# progress, the best at 6, then two more without
STAGED_VALIDATION = [(50.0, 5.0), (45.0, 6.0), (46.0, 5.5), (47.0, 5.0), (46.0, 5.9), (44.0, 6.5), (45.0, 6.0),
                     (46.0, 6.0), (47.0, 5.0), (48.0, 5.0)]


@pytest.mark.parametrize("per_stage", [False, True])
def test_patience_per_stage_trains_each_lr_stage_to_convergence(tmp_path, tiny_config, tiny_data, per_stage):
    lr = tiny_config().train.lr
    cfg = tiny_config("model.cell=rnn", "train.max_epochs=10", "train.lr_decay=plateau", "train.plateau_patience=2",
                      "train.patience=2", f"train.min_lr={lr / 2}", f"train.patience_per_stage={str(per_stage).lower()}")
    trainer = Trainer(cfg, tmp_path, log=lambda _: None, data=tiny_data)
    scripted_validation(trainer, STAGED_VALIDATION)
    progress = trainer.fit()
    lrs = [h["lr"] for h in progress.history]
    assert progress.stop_reason == "early stopping"
    if per_stage:  # the plateau at epoch 4 restarts from epoch 2 at lr / 2 and a new count; min_lr's stage ends at 8
        assert progress.epoch == 8 and lrs == [lr] * 4 + [lr / 2] * 4
        assert progress.best_epoch == 6 and progress.best_valid_bleu == 6.5
    else:  # the count reaches patience at epoch 4 and stops before any restart
        assert progress.epoch == 4 and lrs == [lr] * 4
        assert progress.best_epoch == 2


def test_patience_per_stage_restores_the_best_epoch_and_resumes_its_count(tmp_path, tiny_config, tiny_data):
    lr = tiny_config().train.lr
    settings = ("model.cell=rnn", "train.lr_decay=plateau", "train.plateau_patience=2", "train.patience=2",
                f"train.min_lr={lr / 2}", "train.patience_per_stage=true")
    first = Trainer(tiny_config(*settings, "train.max_epochs=7"), tmp_path, log=lambda _: None, data=tiny_data)
    scripted_validation(first, STAGED_VALIDATION)
    first.fit()  # stops at the budget in stage 2, one epoch without progress after epoch 6
    assert first.progress.epochs_without_improvement == 1 and first.progress.lr == lr / 2
    resumed = Trainer(tiny_config(*settings, "train.max_epochs=10"), tmp_path, log=lambda _: None, data=tiny_data)
    assert resumed.resume(tmp_path / "checkpoint")
    scripted_validation(resumed, STAGED_VALIDATION[7:])
    progress = resumed.fit()
    assert progress.stop_reason == "early stopping" and progress.epoch == 8 and progress.best_epoch == 6


@pytest.mark.parametrize("min_epochs, stopped_at", [(0, 4), (4, 4), (6, 6), (7, 7)])
def test_min_epochs_holds_early_stopping_back_until_that_epoch(tmp_path, tiny_config, tiny_data, min_epochs,
                                                                stopped_at):
    # epoch 2 is the best, epochs 3-7 make no progress: patience 2 stops at 4 unless min_epochs says later
    cfg = tiny_config("model.cell=rnn", "train.max_epochs=8", "train.lr_decay=none", "train.patience=2",
                      f"train.min_epochs={min_epochs}")
    trainer = Trainer(cfg, tmp_path, log=lambda _: None, data=tiny_data)
    scripted_validation(trainer, [(50.0, 5.0), (45.0, 6.0)] + [(46.0, 5.5)] * 6)
    progress = trainer.fit()
    assert progress.stop_reason == "early stopping" and progress.epoch == stopped_at
    assert progress.best_epoch == 2 and len(progress.history) == stopped_at


def test_min_epochs_leaves_the_schedule_and_every_earlier_epoch_as_they_were(tmp_path, tiny_config, tiny_data):
    """A run that early stopping ends at or after min_epochs trains exactly as without it (a study
    that raises min_epochs keeps such trials, study.longer_budget); one it ends sooner trains on,
    its lr schedule going on as before."""
    lr = tiny_config().train.lr
    settings = ("model.cell=rnn", "train.max_epochs=10", "train.lr_decay=plateau", "train.patience=3",
                f"train.min_lr={lr / 4}")
    runs = {}
    for min_epochs in (0, 5, 8):
        trainer = Trainer(tiny_config(*settings, f"train.min_epochs={min_epochs}"), tmp_path / str(min_epochs),
                          log=lambda _: None, data=tiny_data)
        scripted_validation(trainer, STAGED_VALIDATION)
        runs[min_epochs] = trainer.fit()

    # restarts after epochs 3 and 4; the count reaches 3 at epoch 5
    assert runs[0].epoch == 5 and [h["lr"] for h in runs[0].history] == [lr, lr, lr, lr / 2, lr / 4]
    assert runs[5].epoch == 5 and trained(runs[5]) == trained(runs[0])  # stopped at 5: min_epochs 5 changes nothing
    # held back, it trains on at min_lr, finds a new best at epoch 6 and stops 3 epochs later
    assert runs[8].epoch == 9 and trained(runs[8])[:5] == trained(runs[0])
    assert [h["lr"] for h in runs[8].history] == [lr, lr, lr, lr / 2] + [lr / 4] * 5
    assert runs[8].best_epoch == 6


@pytest.mark.parametrize("restarts", [False, True])
def test_an_early_stopped_checkpoint_resumed_under_a_later_min_epochs_trains_on_as_if_held_back(
        tmp_path, tiny_config, tiny_data, restarts):
    """A run that early stopping ended (its checkpoint saved, its result not yet: a study stopped
    in between, then extended with a later budget.min_epochs) continues exactly as the run that
    had the minimum from the start, the schedule's step the stop skipped included."""
    lr = tiny_config().train.lr
    # with restarts, the plateau count reaches 3 at epoch 5 too: the step the stop skipped restarts at lr / 2
    schedule = (("train.lr_decay=plateau", "train.plateau_patience=3", f"train.min_lr={lr / 4}") if restarts
                else ("train.lr_decay=none",))
    settings = ("model.cell=rnn", "train.max_epochs=10", "train.patience=3", *schedule)
    held = Trainer(tiny_config(*settings, "train.min_epochs=8"), tmp_path / "held", log=lambda _: None,
                   data=tiny_data)
    scripted_validation(held, STAGED_VALIDATION)
    held.fit()  # each run seeds the process's generators, so one at a time
    stopped = Trainer(tiny_config(*settings), tmp_path / "stopped", log=lambda _: None, data=tiny_data)
    scripted_validation(stopped, STAGED_VALIDATION)
    assert stopped.fit().stop_reason == "early stopping" and stopped.progress.epoch == 5
    resumed = Trainer(tiny_config(*settings, "train.min_epochs=8"), tmp_path / "resumed", log=lambda _: None,
                      data=tiny_data)
    assert resumed.resume(tmp_path / "stopped" / "checkpoint")
    scripted_validation(resumed, STAGED_VALIDATION[5:])
    resumed.fit()

    assert resumed.progress.stop_reason == held.progress.stop_reason == "early stopping"
    assert resumed.progress.epoch == held.progress.epoch > 5
    assert trained(resumed.progress) == trained(held.progress)
    assert [h["lr"] for h in held.progress.history][4:6] == [lr, lr / 2 if restarts else lr]
    for (name, a), (_, b) in zip(resumed.model.state_dict().items(), held.model.state_dict().items()):
        assert torch.equal(a, b), name


@pytest.mark.slow
def test_force_replaces_a_run_only_once_the_new_one_has_finished(tmp_path, cache_dir):
    config = write_config(tmp_path / "tiny.yaml", TINY_YAML.format(cache=cache_dir, cell="gru"))
    out = tmp_path / "run"
    assert cli("nmt.train", "--config", str(config), "--out", str(out), "--set", "train.max_epochs=1").returncode == 0
    before = (out / "metrics.json").read_text()
    mistyped = write_config(tmp_path / "typo.yaml", f"""
data: {{train: [{tmp_path}/trian.en, {tmp_path}/trian.de], valid: [{tmp_path}/v.en, {tmp_path}/v.de],
       test: [{tmp_path}/t.en, {tmp_path}/t.de], cache_dir: {cache_dir}}}
model: {{hidden: 16}}
""")
    failed = in_process("--config", str(mistyped), "--out", str(out), "--force", module="nmt.train")
    assert failed.returncode == 2 and "trian.en" in failed.stderr and "Traceback" not in failed.stderr
    assert (out / "metrics.json").read_text() == before and (out / "checkpoint" / "state.pt").is_file()
    replaced = cli("nmt.train", "--config", str(config), "--out", str(out), "--force", "--set", "train.max_epochs=2")
    assert replaced.returncode == 0, replaced.stderr
    assert json.loads((out / "metrics.json").read_text())["epochs"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "tiny.yaml", "typo.yaml"]  # nothing staged is left


# --- never delete what the tool did not write (nmt.run_dir) ---------------------------------


def test_run_dir_names_every_entry_the_trainer_does_not_write(tmp_path):
    from nmt.run_dir import foreign_entries, remove_run

    run = tmp_path / "run"
    (run / "checkpoint").mkdir(parents=True)
    for name in ("metrics.json", "test.hyp", ".metrics.json.abc.tmp", "checkpoint/state.pt", "checkpoint/best.pt",
                 "checkpoint/config.yaml", "checkpoint/src.model"):
        (run / name).write_text("x")
    assert foreign_entries(run) == []
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    canary = elsewhere / "canary.txt"
    canary.write_text("keep me")
    (run / "checkpoint" / "notes.txt").write_text("mine")
    (run / "plots").mkdir()
    (run / "test.hyp").unlink()
    (run / "test.hyp").symlink_to(canary)  # a trainer's name, but a link: not the trainer's file
    os.mkfifo(run / "metrics.json.fifo")
    assert foreign_entries(run) == ["checkpoint/notes.txt", "metrics.json.fifo", "plots", "test.hyp"]
    with pytest.raises(Exception, match=r"did not write \(checkpoint/notes.txt, metrics.json.fifo, plots and 1 more\)"):
        remove_run(run, "--out")
    assert (run / "checkpoint" / "notes.txt").read_text() == "mine" and canary.read_text() == "keep me"


def test_train_refuses_a_folder_it_did_not_make_with_or_without_force(tmp_path, cache_dir):
    config = write_config(tmp_path / "tiny.yaml", TINY_YAML.format(cache=cache_dir, cell="gru"))
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "my_thesis.tex").write_text("years of work")
    for flags in ([], ["--force"], ["--resume"]):
        refused = in_process("--config", str(config), "--out", str(proj), *flags, module="nmt.train")
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert "did not write (my_thesis.tex)" in refused.stderr
    assert sorted(p.name for p in proj.iterdir()) == ["my_thesis.tex"]
    assert (proj / "my_thesis.tex").read_text() == "years of work"
    linked = tmp_path / "linked"
    linked.symlink_to(proj)
    refused = in_process("--config", str(config), "--out", str(linked), module="nmt.train")
    assert refused.returncode == 2 and "is a symbolic link" in refused.stderr


@pytest.mark.slow
def test_force_never_deletes_a_file_put_into_a_run_or_beside_it(tmp_path, cache_dir):
    config = write_config(tmp_path / "tiny.yaml", TINY_YAML.format(cache=cache_dir, cell="gru"))
    out = tmp_path / "run"
    assert cli("nmt.train", "--config", str(config), "--out", str(out), "--set", "train.max_epochs=1").returncode == 0
    notes = out / "checkpoint" / "notes.txt"
    notes.write_text("what I tried")
    refused = in_process("--config", str(config), "--out", str(out), "--force", module="nmt.train")
    assert refused.returncode == 2 and "did not write (checkpoint/notes.txt)" in refused.stderr
    assert notes.read_text() == "what I tried" and (out / "checkpoint" / "state.pt").is_file()
    notes.unlink()
    staged = tmp_path / ".run.replacing"  # the name a replacement trains under, holding a user's file
    staged.mkdir()
    (staged / "draft.txt").write_text("draft")
    refused = in_process("--config", str(config), "--out", str(out), "--force", module="nmt.train")
    assert refused.returncode == 2 and "draft.txt" in refused.stderr and (staged / "draft.txt").read_text() == "draft"
    (staged / "draft.txt").unlink()
    staged.rmdir()
    (tmp_path / "beside.txt").write_text("beside")
    replaced = cli("nmt.train", "--config", str(config), "--out", str(out), "--force")
    assert replaced.returncode == 0, replaced.stderr
    assert (tmp_path / "beside.txt").read_text() == "beside"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["beside.txt", "run", "tiny.yaml"]
