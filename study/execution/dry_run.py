"""``python -m study.run NAME --dry-run``: what a study would run and about how long it takes,
without training and without writing results.

It validates the study, prepares its data (cached for the real run), and for every row
builds the model and times a few training steps on a batch of the study's size and a greedy
and a beam decoding of one batch, on this machine with the threads one trial gets. A trial's
time is its epoch budget times (training steps per epoch x step time + validation decoding),
plus the test set's beam search. With ``--resume`` or ``--extend`` only what is left counts:
finished trials are left out, and a trial that continues (unfinished, or reopened by a raised
epoch budget) counts its epochs still to train. Early stopping ends trials sooner; trials side by side and
the corpus's real batches (mixed lengths, padding) run slower than the timed steps: the first
converged Multi30k trials took about 1.7x the estimated step time, two at once on 2 cores.
So it is an estimate, not a bound. Ray is not started.
"""

from __future__ import annotations

import math

import torch

from nmt.config import config_from_dict
from nmt.memory import keep_freed_memory
from nmt.numerics import apply_numerics
from study.execution.row_cost import finishing_time, mean_target_length
from study.spec.expansion import expand
from study.spec.model import StudySpec, Trial
from study.store.longer_budget import extension_outcome
from study.store.migration import Move
from study.store.trial_store import TrialStore

STEPS_TIMED = 3


def time_row(config: dict, stats: dict) -> dict:
    """Seconds of one training step, one greedy and one beam batch of this row's model, and its
    parameters, on random data shaped like the corpus (``nmt.benchmarks``' model set-up and timing)."""
    # torch loads only where a model is built or timed, not when the driver starts
    from nmt.benchmarks.models import prepare_model
    from nmt.benchmarks.timing import best_time
    from nmt.search import beam_search, greedy_decode

    cfg = config_from_dict(config, source="dry run")
    length = mean_target_length(stats)
    batch = max(1, cfg.train.batch_tokens // (length + 1))
    torch.manual_seed(0)
    prepared = prepare_model(config["model"], batch, length, stats["tgt_vocab"], torch.device("cpu"))
    step = best_time(prepared["train_step"], STEPS_TIMED)
    model = prepared["model"].eval()
    sentences = min(cfg.decode.batch_size, batch)
    src, src_mask = prepared["src"][:sentences], prepared["src_mask"][:sentences]
    with torch.no_grad():
        greedy = best_time(lambda: greedy_decode(model, src, src_mask, cfg.decode.max_len_ratio), 1) / sentences
        beam = best_time(lambda: beam_search(model, src, src_mask, cfg.decode.beam, cfg.decode.length_penalty,
                                             cfg.decode.max_len_ratio), 1) / sentences
    return {"params": model.parameter_count, "step_s": step, "greedy_s": greedy, "beam_s": beam,
            "steps_per_epoch": math.ceil(stats["train_tgt_tokens"] * (length + 1) / length / cfg.train.batch_tokens),
            "epochs": cfg.train.max_epochs, "valid_pairs": stats["valid_pairs"], "test_pairs": stats["test_pairs"]}


def trial_seconds(timing: dict, trained: float = 0.0) -> tuple[float, float]:
    """(one epoch: training and validation, the whole trial at its epoch budget when ``trained``
    of its epochs are already done)."""
    epoch = timing["steps_per_epoch"] * timing["step_s"] + timing["valid_pairs"] * timing["greedy_s"]
    return epoch, max(0.0, timing["epochs"] - trained) * epoch + timing["test_pairs"] * timing["beam_s"]


def stored_progress(store: TrialStore, trials: list[Trial], plan: list[Move]) -> dict[str, float | None]:
    """What a resumed run finds of each trial in ``store``, by the trial's key: None when it is
    finished and stays so, else the epochs it has trained, which it continues from its checkpoint.
    ``plan``: the stored trials that move to new keys (study.store.migration). Trials that train from
    the start (not stored, or stored without a checkpoint, as on a clone) are left out."""
    moves = {move.trial.key: move for move in plan}
    progress: dict[str, float | None] = {}
    for trial in trials:
        move = moves.get(trial.key)
        key = move.old if move else trial.key
        if move and move.budget_raised:
            outcome = extension_outcome(store, key, trial.config["train"])
        else:  # the same trial, under its key or adopted under a new one
            outcome = "kept" if store.finished_metrics(key) is not None else "continued"
        if outcome == "kept":
            progress[trial.key] = None
        elif outcome == "reopened" or (outcome == "continued" and store.resume_point(key)):
            last = store.last_progress(key)
            progress[trial.key] = float(last.get("epochs_trained", last.get("epoch", 0.0)) or 0.0)
    return progress


def dry_run(spec: StudySpec, stats: dict, cpus_per_trial: float, concurrency: int, log=print,
            reused: frozenset[str] = frozenset(), stored: dict[str, float | None] | None = None) -> int:
    """``reused``: keys of trials that --reuse-from would copy; ``stored``: what a resumed run finds
    of the trials (``stored_progress``). Finished and copied trials are left out of the estimate."""
    every = expand(spec)
    stored = stored or {}
    copied = [t for t in every if t.key in reused]
    finished = {t.key for t in every if t.key not in reused and t.key in stored and stored[t.key] is None}
    trials = [t for t in every if t.key not in reused and t.key not in finished]
    continuing = sum(1 for t in trials if t.key in stored)
    rows: dict[str, list] = {}
    for trial in trials:
        rows.setdefault(trial.label, []).append(trial)
    row_count = len({t.label for t in every})
    budget = spec.fields.budget
    parts = [f"{name} {value:g}" for name, value in (("epochs", budget.epochs), ("steps", budget.steps),
                                                     ("tokens", budget.tokens), ("patience", budget.patience),
                                                     ("min_epochs", budget.min_epochs),
                                                     ("minutes (cap)", budget.minutes)) if value is not None]
    counts = [f"{len(copied)} copied by --reuse-from"] if reused else []
    if stored:
        counts += [f"{len(finished)} finished", f"{continuing} to continue"]
    left_out = f" ({', '.join(counts)}, {len(trials) - continuing} to train)" if counts else ""
    log(f"{spec.kind} study: {row_count} rows x {spec.fields.seeds} seed(s) = {len(every)} trials{left_out}; "
        f"budget per trial: {', '.join(parts) or 'the base config'}; {concurrency} at once, "
        f"{cpus_per_trial:g} CPU each")
    if spec.kind == "search":
        log(f"search: {spec.fields.search.num_samples} samples of the space; times below are for the base config")
    if not apply_numerics(spec.fields.numerics, strict=False):  # as the trial workers compute
        log(f"note: this process computed before with other kernels, so the times below are of those, not of "
            f"numerics {spec.fields.numerics}")
    torch.set_num_threads(max(1, int(cpus_per_trial)))
    keep_freed_memory()  # as the trial workers do: without it steps run up to a quarter slower
    costs: list[float] = []  # each trial's seconds, in the grid's order, as the workers take them
    log(f"{'row':<32} {'trials':>6} {'params':>9} {'step':>8} {'epoch':>8} {'trial (max)':>12}")
    for label, group in rows.items():
        timing = time_row(group[0].config, stats)
        epoch, trial = trial_seconds(timing)
        costs += [trial_seconds(timing, stored.get(t.key) or 0.0)[1] for t in group]
        log(f"{label[:32]:<32} {len(group):>6} {timing['params']:>9,} {1000 * timing['step_s']:>6.0f}ms "
            f"{_clock(epoch):>8} {_clock(trial):>12}")
    trials_total = spec.fields.search.num_samples if spec.kind == "search" else len(trials)
    if spec.kind == "search":  # the base config's cost for every sample
        costs = [sum(costs) / max(1, len(costs))] * trials_total
    total = sum(costs)
    wall = finishing_time([], costs, max(1, concurrency))
    left = " (the epochs they have left)" if continuing else ""
    log(f"estimate: about {_clock(wall)} of wall time for {trials_total} trials at their full epoch budget{left} "
        f"({_clock(total)} of trial time), from steps timed one trial alone on batches of the corpus's mean "
        f"length; trials side by side and real batches have run up to about 2x slower, early stopping ends "
        f"trials sooner. Nothing was trained or written; run it without --dry-run.")
    return 0


def _clock(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes = seconds / 60
    if minutes < 60:
        return f"{minutes:.1f}m"
    return f"{int(minutes // 60)}h{int(minutes % 60):02d}m"
