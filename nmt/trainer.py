"""The training loop: one config in, a trained model and ``metrics.json`` out.

Each epoch: token-bucketed batches in a (seed, epoch)-determined order, Adam (or SGD)
with gradient-norm clipping, then validation (teacher-forced perplexity and
BLEU of greedy or beam translations), the lr schedule, a checkpoint, and a
call of ``report(metrics, checkpoint_dir)`` - the hook through which Ray Tune
(or anything else) follows the run. A NaN/inf loss or gradient ends the run
with status ``diverged`` instead of an exception; every epoch records the
gradient norms before clipping (mean, largest, share of steps clipped), so an
exploding gradient shows before it turns the loss non-finite. At the end the best
validation model translates the test set (beam search) and is scored with
sacreBLEU, and takes the unit's measurements on the validation set, if it has
any (``nmt.measures``: ATR's gate correlation).

The best epoch (kept in best.pt and used for the test set) is the one with
the best ``train.valid_metric``. An epoch "improves" when validation BLEU or
perplexity reaches a new best: early in training BLEU can sit at 0 while
perplexity falls, and that is progress.

Schedules (``train.lr_decay``):
- ``halve``: lr *= decay_factor after every epoch (ATR paper).
- ``plateau``: after ``plateau_patience`` epochs without improvement the
  model and optimiser restart from the best epoch with lr *= decay_factor
  (the SR-NMT paper's second training stage).
- ``none``.
Early stopping (``early_stop``): after ``patience`` epochs without improvement, or
with ``plateau`` at the first epoch whose validation curve is on a plateau by
``nmt.plateau``'s test (the one that marks a study's rows); either acts only from
``min_epochs`` on.

Budgets are counted, never timed, so the same seed gives the same model on an
idle or a busy machine: ``max_epochs`` (passes over the training data),
``max_steps`` (optimizer updates) and ``max_tokens`` (training target tokens
seen); training ends at whichever comes first. A step or token budget that
ends mid-epoch is followed by a validation of that point, so every run ends
on an evaluated model. ``max_minutes`` is only a safety cap on wall time
(training and validation, checked after every batch): a run it stops ends
with status ``truncated``, because what it learned then depends on how fast
the machine happened to be.

A checkpoint holds everything that decides what comes next - weights,
optimizer state, the torch and Python RNG states, the progress counters and
the position inside an epoch (batch order is a function of seed and epoch) -
so a resumed run ends bit-identical to an uninterrupted one.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from nmt.checkpoint import BEST, STATE, CheckpointError, atomic_save, load_file, write_static_files
from nmt.config import EARLY_STOP_REASONS, Config, TrainConfig
from nmt.data.batching import make_batches
from nmt.data.pipeline import ParallelData, load_data
from nmt.durations import clock
from nmt.errors import ConfigError
from nmt.evaluate import corpus_bleu, corpus_chrf
from nmt.fileio import write_json, write_lines
from nmt.measures import take_measures
from nmt.model import Seq2Seq, build_model
from nmt.translator import translate
from nmt.numerics import adam_options, arithmetic, numerics_record
from nmt.ops.kernels import kernels_run
from nmt.plateau import on_plateau

ReportFn = Callable[[dict, Path], None]
BUDGET_REASONS = ("max epochs", "max steps", "max tokens")
Log = Callable[[str], None]


@dataclass
class Progress:
    """Everything about the run that is not a tensor; saved in every checkpoint."""

    epoch: int = 0  # completed epochs
    # A step/token budget or the wall-time cap can end training inside an epoch: how many of that
    # epoch's batches were trained (and of how many), and the epoch's loss sums so far.
    batches_into_epoch: int = 0
    epoch_batches: int = 0
    epoch_nll: float = 0.0
    epoch_tokens: int = 0
    # the epoch's gradient norms before clipping (sum, largest, steps counted, steps clipped): the
    # evidence for or against an exploding gradient, carried across a resume inside the epoch
    epoch_grad_norm_sum: float = 0.0
    epoch_grad_norm_max: float = 0.0
    epoch_grad_steps: int = 0
    epoch_clipped_steps: int = 0
    steps: int = 0
    lr: float = 0.0
    best_score: float | None = None  # valid BLEU, or -ppl with valid_metric: ppl
    best_epoch: int = 0
    lowest_valid_ppl: float | None = None
    highest_valid_bleu: float | None = None
    best_valid_bleu: float = 0.0  # valid BLEU of the selected epoch (best by train.valid_metric)
    best_valid_ppl: float = 0.0
    epochs_without_improvement: int = 0
    plateau_count: int = 0
    train_tokens: int = 0
    train_seconds: float = 0.0
    elapsed_seconds: float = 0.0
    status: str = "ok"
    stop_reason: str = ""
    resumes: int = 0  # restarts from a checkpoint (a retried trial, a resumed study)
    history: list = field(default_factory=list)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device = 'cuda': no CUDA device is available here; use train.device: auto or cpu")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def make_optimizer(model: Seq2Seq, train: TrainConfig) -> torch.optim.Optimizer:
    """``train.optimizer`` over the model's parameter groups, each at its ``lr_scale`` times ``train.lr``
    (FSMN taps with ``memory_lr_scale``): Adam (fused under portable numerics) or plain SGD."""
    groups = [{"params": params, "lr": train.lr * scale, "lr_scale": scale} for params, scale in model.lr_scales()]
    if train.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=train.lr)
    return torch.optim.Adam(groups, lr=train.lr, **adam_options(train.numerics))


class Trainer:
    def __init__(self, cfg: Config, out_dir: str | Path, report: ReportFn | None = None, log: Log = print,
                 data: ParallelData | None = None):
        self.cfg = cfg
        self.out_dir = Path(out_dir)
        self.checkpoint_dir = self.out_dir / "checkpoint"
        self.report = report
        self.log = log
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        self.device = resolve_device(cfg.train.device)
        self.kernels = kernels_run(cfg.model.cell, self.device)  # a bad NMT_KERNELS is refused before any work
        seed_everything(cfg.train.seed)
        self.data = data if data is not None else load_data(cfg.data, log=log)
        self._fresh_state()

    def _fresh_state(self) -> None:
        """A newly initialised model, optimiser and progress (the start of every run)."""
        cfg = self.cfg
        self.model: Seq2Seq = build_model(cfg.model, len(self.data.src_vocab), len(self.data.tgt_vocab)).to(self.device)
        self.optimizer = make_optimizer(self.model, cfg.train)
        self.progress = Progress(lr=cfg.train.lr)

    # --- state -------------------------------------------------------------------

    def _set_lr(self, lr: float) -> None:
        self.progress.lr = lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)

    def save_checkpoint(self) -> None:
        rng = {"torch": torch.get_rng_state(), "python": random.getstate()}
        if self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state()
        atomic_save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                     "progress": asdict(self.progress), "rng": rng, "arithmetic": arithmetic(self.cfg.train.numerics)},
                    self.checkpoint_dir / STATE)

    def resume(self, checkpoint_dir: str | Path) -> bool:
        """Continue from a checkpoint directory written by ``save_checkpoint``.

        A truncated or corrupt checkpoint (a crash mid-copy, a full disk) is not fatal: the
        run starts from scratch with a warning and returns False."""
        checkpoint_dir = Path(checkpoint_dir)
        try:
            state = load_file(checkpoint_dir / STATE)
            # a checkpoint from before the pinning's version was recorded: pinning 1 when portable
            saved, this_run = state.get("arithmetic") or arithmetic(self.cfg.train.numerics, None), \
                arithmetic(self.cfg.train.numerics)
            if saved != this_run:
                raise ValueError(f"its epochs computed with numerics {saved}, and this run computes with {this_run}; "
                                 f"a run keeps one")
            best = load_file(checkpoint_dir / BEST) if (checkpoint_dir / BEST).is_file() else None
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            progress = Progress(**state["progress"])
        except (CheckpointError, TypeError, ValueError, KeyError, RuntimeError) as err:
            self.log(f"warning: cannot resume from {checkpoint_dir} ({err}); starting from scratch")
            seed_everything(self.cfg.train.seed)
            self._fresh_state()
            return False
        self.progress = progress
        if progress.status == "truncated":  # the wall-time cap is checked again from here
            progress.status, progress.stop_reason = "ok", ""
        if progress.stop_reason in BUDGET_REASONS and progress.status == "ok":
            progress.stop_reason = ""  # a resumed run may have been given a larger budget
        # a run may also have been given a later train.min_epochs than the epoch early stopping ended it at
        held_back = progress.stop_reason in EARLY_STOP_REASONS and progress.epoch < self.cfg.train.min_epochs
        torch.set_rng_state(state["rng"]["torch"])
        random.setstate(_as_tuple(state["rng"]["python"]))
        if "cuda" in state["rng"] and self.device.type == "cuda":
            torch.cuda.set_rng_state(state["rng"]["cuda"])
        self.progress.resumes += 1
        if checkpoint_dir.resolve() != self.checkpoint_dir.resolve() and best is not None:
            self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
            atomic_save(best, self.checkpoint_dir / BEST)
        if held_back:
            # go on as a run held back at that epoch did: the stop skipped the schedule's step for it
            progress.stop_reason = ""
            if progress.batches_into_epoch == 0:
                # the step the stop skipped (patience stops only after an epoch without progress)
                self._update_schedule(improved=progress.epochs_without_improvement == 0)
        self.log(f"resumed from {checkpoint_dir} after epoch {self.progress.epoch}")
        return True

    def _restore_best(self) -> None:
        best = load_file(self.checkpoint_dir / BEST)
        self.model.load_state_dict(best["model"])
        self.optimizer.load_state_dict(best["optimizer"])

    # --- loop --------------------------------------------------------------------

    def epochs_trained(self) -> float:
        """Completed epochs plus the trained share of an epoch a budget or the cap cut short."""
        p = self.progress
        return p.epoch + (p.batches_into_epoch / p.epoch_batches if p.epoch_batches else 0.0)

    def budget_reached(self) -> str:
        """The counted budget that is used up ("" while training may go on)."""
        cfg, p = self.cfg.train, self.progress
        if p.epoch >= cfg.max_epochs:
            return "max epochs"
        if cfg.max_steps is not None and p.steps >= cfg.max_steps:
            return "max steps"
        if cfg.max_tokens is not None and p.train_tokens >= cfg.max_tokens:
            return "max tokens"
        return ""

    def train_epoch(self, epoch: int, deadline: float) -> tuple[float, bool]:
        """Train epoch ``epoch`` from where it stands (``progress.batches_into_epoch``) until its
        end, a step or token budget, or ``deadline`` (a ``time.perf_counter`` value). Returns
        (mean loss over the epoch's batches so far, whether the deadline stopped it)."""
        cfg, p = self.cfg.train, self.progress
        self.model.train()
        batches = make_batches(self.data.train, cfg.batch_tokens, shuffle=True, seed=cfg.seed, epoch=epoch)
        done_before = p.batches_into_epoch
        if not done_before:
            p.epoch_nll, p.epoch_tokens = 0.0, 0
            p.epoch_grad_norm_sum, p.epoch_grad_norm_max, p.epoch_grad_steps, p.epoch_clipped_steps = 0.0, 0.0, 0, 0
        p.epoch_batches = len(batches)
        segment_tokens = 0
        segment_start = last_print = time.perf_counter()
        out_of_time = False
        for index, batch in enumerate(batches[done_before:], done_before + 1):
            batch = batch.to(self.device)
            loss, nll = self.model.loss(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_out, batch.tgt_mask,
                                        cfg.label_smoothing)
            tokens = batch.ntokens
            self.optimizer.zero_grad(set_to_none=True)
            (loss / tokens).backward()
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip if cfg.clip > 0 else math.inf)
            loss_value, norm_value = float(loss.detach()), float(norm)
            if not (math.isfinite(loss_value) and math.isfinite(norm_value)):
                what = "loss" if not math.isfinite(loss_value) else "gradient norm"
                p.status, p.stop_reason = "diverged", f"non-finite {what} at epoch {epoch} batch {index}"
                break
            self.optimizer.step()
            p.steps += 1
            p.train_tokens += tokens
            p.epoch_nll += float(nll)
            p.epoch_tokens += tokens
            p.epoch_grad_norm_sum += norm_value
            p.epoch_grad_norm_max = max(p.epoch_grad_norm_max, norm_value)
            p.epoch_grad_steps += 1
            p.epoch_clipped_steps += int(cfg.clip > 0 and norm_value > cfg.clip)
            p.batches_into_epoch = index
            segment_tokens += tokens
            now = time.perf_counter()
            if now - last_print > 30:
                rate = segment_tokens / (now - segment_start)
                self.log(f"  epoch {epoch}: {index}/{len(batches)} batches, loss {p.epoch_nll / p.epoch_tokens:.3f}, "
                         f"{rate:,.0f} tok/s")
                last_print = now
            if index < len(batches):
                if self.budget_reached():
                    break
                if now > deadline:
                    out_of_time = True
                    break
        p.train_seconds += time.perf_counter() - segment_start
        if p.batches_into_epoch == len(batches):  # the epoch is complete
            p.batches_into_epoch = 0
        return p.epoch_nll / max(p.epoch_tokens, 1), out_of_time

    @torch.no_grad()
    def validate(self) -> tuple[float, float]:
        """(valid perplexity, valid BLEU)."""
        self.model.eval()
        total_nll, total_tokens = 0.0, 0
        for batch in make_batches(self.data.valid, self.cfg.train.batch_tokens, shuffle=False):
            batch = batch.to(self.device)
            _, nll = self.model.loss(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_out, batch.tgt_mask)
            total_nll += float(nll)
            total_tokens += batch.ntokens
        sources = [src for src, _ in self.data.valid]
        hyps = translate(self.model, sources, self.data.tgt_vocab, self.cfg.decode, beam=self.cfg.decode.valid_beam,
                         device=self.device)
        bleu = corpus_bleu(hyps.texts, [ref for _, ref in self.data.valid_text]).score
        ppl = math.exp(min(total_nll / max(total_tokens, 1), 50.0))
        return ppl, bleu

    def _update_schedule(self, improved: bool) -> None:
        cfg, p = self.cfg.train, self.progress
        if cfg.lr_decay == "halve":
            self._set_lr(max(p.lr * cfg.decay_factor, cfg.min_lr))
        elif cfg.lr_decay == "plateau" and not improved:
            p.plateau_count += 1
            if p.plateau_count >= cfg.plateau_patience and p.lr > cfg.min_lr:
                self._restore_best()
                self._set_lr(max(p.lr * cfg.decay_factor, cfg.min_lr))
                p.plateau_count = 0
                if cfg.patience_per_stage:
                    p.epochs_without_improvement = 0
                self.log(f"  plateau: restart from epoch {p.best_epoch} with lr {p.lr:.2e}")

    def fit(self) -> Progress:
        """Train until a counted budget, the wall-time cap, early stopping or divergence ends the run.
        Each epoch (or the part of one that a budget or the cap leaves) is trained, validated, logged,
        checkpointed and reported. Changes the trainer's own model, optimiser and ``progress`` only,
        never the config or data it was given; returns ``progress``."""
        cfg, p = self.cfg.train, self.progress
        write_static_files(self.checkpoint_dir, self.cfg, self.data.src_vocab, self.data.tgt_vocab)
        started = time.perf_counter()
        elapsed_before = p.elapsed_seconds
        deadline = started + cfg.max_minutes * 60 - elapsed_before if cfg.max_minutes else math.inf

        def elapsed() -> float:
            return elapsed_before + time.perf_counter() - started

        while not p.stop_reason:
            reached = self.budget_reached()
            if reached:
                p.stop_reason = reached
                break
            if time.perf_counter() >= deadline:
                self._truncate()
                break
            epoch = p.epoch + 1
            loss, out_of_time = self.train_epoch(epoch, deadline)
            p.elapsed_seconds = elapsed()
            if p.status == "diverged":
                self._report_divergence(epoch)
                break
            complete = p.batches_into_epoch == 0
            if complete:
                p.epoch = epoch
            valid_ppl, valid_bleu = self.validate()
            selected, improved = self._record_validation(epoch, valid_ppl, valid_bleu)
            p.elapsed_seconds = elapsed()
            metrics = self._epoch_metrics(epoch, loss, valid_ppl, valid_bleu)
            p.history.append(metrics)
            self._log_epoch(epoch, complete, selected, metrics)
            self._stop_or_go_on(improved, complete, out_of_time)
            metrics["status"] = p.status
            self.save_checkpoint()
            if self.report is not None:
                self.report(dict(metrics), self.checkpoint_dir)
        return p

    def _report_divergence(self, epoch: int) -> None:
        p = self.progress
        self.log(f"epoch {epoch}: diverged ({p.stop_reason})")
        if self.report is not None:
            self.report({"epoch": epoch, "status": "diverged", "valid_bleu": p.best_valid_bleu,
                         "best_valid_bleu": p.best_valid_bleu, "lr": p.lr,
                         "elapsed_s": p.elapsed_seconds}, self.checkpoint_dir)

    def _record_validation(self, epoch: int, valid_ppl: float, valid_bleu: float) -> tuple[bool, bool]:
        """(whether the epoch is the new best by ``train.valid_metric``, saved as best.pt; whether it
        improved on anything: that, or the lowest perplexity or highest BLEU so far). Counts the
        epochs without improvement."""
        cfg, p = self.cfg.train, self.progress
        score = valid_bleu if cfg.valid_metric == "bleu" else -valid_ppl
        selected = p.best_score is None or score > p.best_score
        if selected:
            p.best_score, p.best_epoch = score, epoch
            p.best_valid_bleu, p.best_valid_ppl = valid_bleu, valid_ppl
            atomic_save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                         "epoch": epoch}, self.checkpoint_dir / BEST)
        improved = selected
        if p.lowest_valid_ppl is None or valid_ppl < p.lowest_valid_ppl:
            p.lowest_valid_ppl, improved = valid_ppl, True
        if p.highest_valid_bleu is None or valid_bleu > p.highest_valid_bleu:
            p.highest_valid_bleu, improved = valid_bleu, True
        if improved:
            p.epochs_without_improvement = p.plateau_count = 0
        else:
            p.epochs_without_improvement += 1
        return selected, improved

    def _epoch_metrics(self, epoch: int, loss: float, valid_ppl: float, valid_bleu: float) -> dict:
        """The epoch's entry of the history and of the report."""
        p = self.progress
        rate = p.train_tokens / p.train_seconds if p.train_seconds else 0.0
        return {"epoch": epoch, "status": "ok", "train_loss": loss, "train_ppl": math.exp(min(loss, 50.0)),
                "valid_ppl": valid_ppl, "valid_bleu": valid_bleu, "best_valid_bleu": p.best_valid_bleu,
                "best_epoch": p.best_epoch, "epochs_trained": self.epochs_trained(), "steps": p.steps,
                "train_tokens": p.train_tokens, "lr": p.lr, "train_tokens_per_s": rate,
                "elapsed_s": p.elapsed_seconds, **self._gradient_stats()}

    def _log_epoch(self, epoch: int, complete: bool, selected: bool, metrics: dict) -> None:
        p, max_epochs = self.progress, self.cfg.train.max_epochs
        shown = f"{epoch}/{max_epochs}" if complete else f"{metrics['epochs_trained']:.2f}/{max_epochs}"
        self.log(f"epoch {shown}  loss {metrics['train_loss']:.3f}  ppl {metrics['train_ppl']:.2f}  "
                 f"valid ppl {metrics['valid_ppl']:.2f}  valid BLEU {metrics['valid_bleu']:.2f}"
                 f"{' *' if selected else ''}  lr {p.lr:.2e}  grad norm {metrics['grad_norm_mean']:.2f} "
                 f"(max {metrics['grad_norm_max']:.2f}, {metrics['clipped_share']:.1%} clipped)  "
                 f"{metrics['train_tokens_per_s']:,.0f} tok/s  elapsed {clock(p.elapsed_seconds)}")

    def _stop_or_go_on(self, improved: bool, complete: bool, out_of_time: bool) -> None:
        """After a validated epoch: early stopping, or the lr schedule's step (after a complete epoch)
        and then the wall-time cap or a used-up budget (``progress.stop_reason``)."""
        cfg, p = self.cfg.train, self.progress
        # per stage, a plateau that can still lower the lr restarts instead of stopping
        restart_pending = cfg.patience_per_stage and complete and p.lr > cfg.min_lr
        stoppable = not restart_pending and p.epoch >= cfg.min_epochs
        reason = self._early_stop_reason()
        if reason and stoppable:
            p.stop_reason = reason
            return
        if complete:  # also after the last epoch: a resumed run with a larger budget continues the schedule
            self._update_schedule(improved)
        if out_of_time:
            self._truncate()
        else:
            p.stop_reason = self.budget_reached()

    def _early_stop_reason(self) -> str:
        """Why the run stops early after this epoch, or "": ``train.early_stop: patience`` after ``patience``
        epochs without improvement, ``plateau`` once the validation curve (``train.valid_metric``, higher is
        better) is on a plateau by ``nmt.plateau``'s test."""
        cfg, p = self.cfg.train, self.progress
        if cfg.early_stop == "plateau":
            scores = [h["valid_bleu"] if cfg.valid_metric == "bleu" else -h["valid_ppl"] for h in p.history]
            return "plateau" if on_plateau(scores) else ""
        if cfg.patience and p.epochs_without_improvement >= cfg.patience:
            return "early stopping"
        return ""

    def _gradient_stats(self) -> dict:
        """The epoch's gradient norms of the per-token loss before clipping: mean, largest, and the
        share of steps that ``train.clip`` scaled down (0 without clipping)."""
        p = self.progress
        steps = max(p.epoch_grad_steps, 1)
        return {"grad_norm_mean": p.epoch_grad_norm_sum / steps, "grad_norm_max": p.epoch_grad_norm_max,
                "clipped_share": p.epoch_clipped_steps / steps}

    def _truncate(self) -> None:
        p = self.progress
        p.status, p.stop_reason = "truncated", f"wall-time cap (train.max_minutes = {self.cfg.train.max_minutes:g})"
        self.log(f"stopped by the wall-time cap after {self.epochs_trained():.2f} epochs: status truncated "
                 "(how far it trained depends on the machine's speed, not only on the config)")

    def evaluate_test(self) -> dict:
        """Translate the test set with the best model; sacreBLEU and chrF against the raw references."""
        if (self.checkpoint_dir / BEST).is_file():
            self.model.load_state_dict(load_file(self.checkpoint_dir / BEST)["model"])
        sources = [src for src, _ in self.data.test]
        hyps = translate(self.model, sources, self.data.tgt_vocab, self.cfg.decode, device=self.device)
        refs = [ref for _, ref in self.data.test_text]
        bleu, chrf = corpus_bleu(hyps.texts, refs), corpus_chrf(hyps.texts, refs)
        write_lines(self.out_dir / "test.hyp", hyps.texts)
        return {"test_bleu": bleu.score, "test_chrf": chrf.score, "bleu_signature": bleu.signature,
                "chrf_signature": chrf.signature, "decode_words_per_s": hyps.words_per_second,
                "decode_seconds_per_sentence": hyps.seconds_per_sentence, "decode_beam": self.cfg.decode.beam}

    def final_metrics(self) -> dict:
        p = self.progress
        trained = (self.checkpoint_dir / BEST).is_file()
        metrics = {
            "status": p.status,
            "stop_reason": p.stop_reason,
            "valid_bleu": p.best_valid_bleu,
            "valid_ppl": p.best_valid_ppl if trained else None,
            "test_bleu": 0.0,
            "test_chrf": 0.0,
            "bleu_signature": "",
            "params": self.model.parameter_count,
            "weight_matrices": self.model.weight_matrices,
            "train_tokens_per_s": p.train_tokens / p.train_seconds if p.train_seconds else 0.0,
            "decode_words_per_s": 0.0,
            "epochs": round(self.epochs_trained(), 4),
            "best_epoch": p.best_epoch,
            "steps": p.steps,
            "train_tokens": p.train_tokens,
            "resumes": p.resumes,
            "train_seconds": p.train_seconds,
            "elapsed_seconds": p.elapsed_seconds,
            "train_pairs": len(self.data.train),
            "device": str(self.device),
            "threads": torch.get_num_threads(),
            **numerics_record(self.cfg.train.numerics),  # how the CPU computed: where these numbers hold
            "kernels": self.kernels,  # what the recurrences ran on: Triton's equal torch's to rounding only
            "cell": self.cfg.model.cell,
            "history": p.history,
        }
        if trained:
            metrics.update(self.evaluate_test())
            metrics.update(self.take_measures())
        return metrics

    def take_measures(self) -> dict:
        """The unit's measurements of the model the test set was translated by, on the validation set
        (``nmt.measures``; none for most units). One that fails is logged and left out: a trained and
        scored run is not lost to it."""
        try:
            measured = take_measures(self.model, self.cfg.model.cell, self.data.valid, self.cfg.train.batch_tokens,
                                     self.device)
        except Exception as error:  # noqa: BLE001 - whatever a measurement raises, the run's scores stand
            self.log(f"warning: measuring the trained model failed ({type(error).__name__}: {error}); "
                     "its metrics.json has no measurements")
            return {}
        if measured:
            self.log("measured on the validation set: " + ", ".join(
                f"{name} {'undefined' if value is None else f'{value:.4f}'}" for name, value in measured.items()))
        return measured


def run(cfg: Config, out_dir: str | Path, report: ReportFn | None = None, resume_from: str | Path | None = None,
        log: Log = print) -> dict:
    """Train, evaluate and write ``metrics.json`` and ``test.hyp`` into ``out_dir``."""
    trainer = Trainer(cfg, out_dir, report=report, log=log)
    trainer.out_dir.mkdir(parents=True, exist_ok=True)
    if resume_from is not None:
        trainer.resume(resume_from)
    model = trainer.model
    log(f"model: {cfg.model.cell}, {model.parameter_count:,} parameters, {model.weight_matrices} weight matrices "
        f"per unit, {cfg.model.enc_layers}+{cfg.model.dec_layers} layers, hidden {cfg.model.hidden}; "
        f"device {trainer.device}, {torch.get_num_threads()} threads")
    trainer.fit()
    metrics = trainer.final_metrics()
    write_json(trainer.out_dir / "metrics.json", metrics)
    log(f"done: {metrics['status']} ({metrics['stop_reason']}), valid BLEU {metrics['valid_bleu']:.2f}, "
        f"test BLEU {metrics['test_bleu']:.2f}, chrF {metrics['test_chrf']:.2f}, "
        f"{metrics['train_tokens_per_s']:,.0f} train tok/s, {metrics['decode_words_per_s']:,.0f} decode words/s")
    return metrics


def _as_tuple(value):
    """random.setstate wants the tuples that a weights-only load turns into lists."""
    if isinstance(value, list):
        return tuple(_as_tuple(v) for v in value)
    return value
