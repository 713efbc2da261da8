"""``python -m study.run NAME --dry-run``: what a study would run and about how long it takes,
without training and without writing results.

It validates the study, prepares its data (cached for the real run), and for every row builds the
model in the trainer a trial runs and times, on the corpus's own batches and with the threads one
trial gets, a few training steps of the first epoch, one validation pass and the test set's beam
search of one batch (``time_row``). A trial's time is its epoch budget times (training steps per
epoch x step time + validation), plus the test set's beam search. A trial that stops by the plateau
rule (``budget.stop: plateau``) is priced at the midpoint between the first epoch the rule can stop
it and its epoch cap: where the rule stops is known only once the curve is trained
(``priced_epochs``). With ``--resume`` or ``--extend`` only what is left counts: finished trials are
left out, and a trial that continues (unfinished, or reopened by a raised epoch budget) counts its
epochs still to train. Early stopping by patience ends trials sooner; trials side by side, Ray and
the checkpoints after every epoch make them slower, and an untrained model decodes to its length
limit. So it is an estimate, not a bound. Ray is not started.
"""

from __future__ import annotations

import heapq
import json
import math
import tempfile
import time

import torch

from nmt.config import config_from_dict
from nmt.memory import keep_freed_memory
from nmt.numerics import apply_numerics
from nmt.plateau import earliest_stop
from study.execution.row_cost import finishing_time
from study.spec.expansion import expand
from study.spec.model import StudySpec, Trial
from study.store.longer_budget import extension_outcome
from study.store.migration import Move
from study.store.trial_store import TrialStore

WARM_UP_STEPS = 2  # the first steps allocate and are left out
STEPS_TIMED = 8


def time_row(config: dict, corpora: dict | None = None) -> dict:
    """Seconds of a training step, a validation pass and the test set's beam search of this row's model,
    and its parameters: the trainer's own code (``nmt.trainer.Trainer``) on the corpus's own batches, steps
    3 to 10 of its first epoch timed, on this machine with the threads one trial gets. ``corpora``: the
    loaded corpora by data section, shared by the rows (each is loaded once)."""
    # torch and the trainer load only where a model is timed, not when the driver starts
    from nmt.data.batching import make_batches
    from nmt.data.pipeline import load_data
    from nmt.trainer import Trainer
    from nmt.translator import translate

    cfg = config_from_dict(config, source="dry run")
    corpora = {} if corpora is None else corpora
    data_key = json.dumps(config.get("data"), sort_keys=True, default=str)
    if data_key not in corpora:
        corpora[data_key] = load_data(cfg.data, log=None)
    data = corpora[data_key]
    with tempfile.TemporaryDirectory(prefix="dry-run-") as scratch:  # the trainer writes nothing here; a guard
        trainer = Trainer(cfg, scratch, log=lambda line: None, data=data)
        trainer.cfg.train.max_steps = WARM_UP_STEPS
        trainer.train_epoch(1, math.inf)
        trainer.cfg.train.max_steps = WARM_UP_STEPS + STEPS_TIMED
        before, began = trainer.progress.steps, time.perf_counter()
        trainer.train_epoch(1, math.inf)
        step = (time.perf_counter() - began) / max(1, trainer.progress.steps - before)
        began = time.perf_counter()
        trainer.validate()
        valid = time.perf_counter() - began
        sources = [src for src, _ in data.test][:cfg.decode.batch_size]
        began = time.perf_counter()
        translate(trainer.model, sources, data.tgt_vocab, cfg.decode)
        beam = (time.perf_counter() - began) / max(1, len(sources))
    return {"params": trainer.model.parameter_count, "step_s": step, "valid_s": valid, "beam_s": beam,
            "steps_per_epoch": len(make_batches(data.train, cfg.train.batch_tokens, shuffle=True, seed=cfg.train.seed,
                                                epoch=1)),
            "epochs": priced_epochs(cfg.train), "cap": cfg.train.max_epochs, "test_pairs": len(data.test)}


def priced_epochs(train) -> float:
    """The epochs a trial of this ``TrainConfig`` is priced at: its epoch budget, or under the plateau rule
    (``early_stop: plateau``) the midpoint between the earliest epoch the rule can stop it
    (``nmt.plateau.earliest_stop``) and the cap. Rows that converge fast stop sooner, rows still rising
    run to the cap; on the README's study the midpoint was within a tenth of the mean epochs trained."""
    if train.early_stop != "plateau":
        return train.max_epochs
    return (earliest_stop(train.min_epochs, train.max_epochs) + train.max_epochs) / 2


def trial_seconds(timing: dict, trained: float = 0.0) -> tuple[float, float]:
    """(one epoch: training and validation, the whole trial at its epoch budget when ``trained``
    of its epochs are already done)."""
    epoch = timing["steps_per_epoch"] * timing["step_s"] + timing["valid_s"]
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


def dry_run(spec: StudySpec, cpus_per_trial: float, concurrency: int, log=print,
            reused: frozenset[str] = frozenset(), stored: dict[str, float | None] | None = None,
            time_limit: float | None = None) -> int:
    """``reused``: keys of trials that --reuse-from would copy; ``stored``: what a resumed run finds
    of the trials (``stored_progress``). Finished and copied trials are left out of the estimate.
    ``time_limit``: --time-limit's hours, for how many trials would end within them (``within_limit``)."""
    every = expand(spec)
    stored = stored or {}
    copied = [t for t in every if t.key in reused]
    finished = {t.key for t in every if t.key not in reused and t.key in stored and stored[t.key] is None}
    trials = [t for t in every if t.key not in reused and t.key not in finished]
    continuing = sum(1 for t in trials if t.key in stored)
    counts = [f"{len(copied)} copied by --reuse-from"] if reused else []
    if stored:
        counts += [f"{len(finished)} finished", f"{continuing} to continue"]
    left_out = f" ({', '.join(counts)}, {len(trials) - continuing} to train)" if counts else ""
    log(f"{spec.kind} study: {len({t.label for t in every})} rows x {spec.fields.seeds} seed(s) = {len(every)} "
        f"trials{left_out}; budget per trial: {_budget_text(spec)}; {concurrency} at once, {cpus_per_trial:g} CPU each")
    if spec.kind == "search":
        log(f"search: {spec.fields.search.num_samples} samples of the space; times below are for the base config")
    if not apply_numerics(spec.fields.numerics, strict=False):  # as the trial workers compute
        log(f"note: this process computed before with other kernels, so the times below are of those, not of "
            f"numerics {spec.fields.numerics}")
    torch.set_num_threads(max(1, int(cpus_per_trial)))
    keep_freed_memory()  # as the trial workers do: without it steps run up to a quarter slower
    costs, priced, capped = _timed_rows(trials, stored, log)
    trials_total = spec.fields.search.num_samples if spec.kind == "search" else len(trials)
    if spec.kind == "search":  # the base config's cost for every sample
        costs = [sum(costs) / max(1, len(costs))] * trials_total
    wall = finishing_time([], costs, max(1, concurrency))
    left = " (the epochs they have left)" if continuing else ""
    if priced:
        epochs = " or ".join(f"{e:g}" for e in sorted(priced))
        priced_at = (f"at {epochs} epochs each{left}, the midpoint between the first epoch the plateau rule can "
                     f"stop a trial and its cap (rows that converge fast stop sooner, rows still rising run to the cap)")
    else:
        priced_at = f"at their full epoch budget{left}"
    sooner = "" if priced else ", early stopping ends trials sooner"
    log(f"estimate: about {_clock(wall)} of wall time for {trials_total} trials ({_clock(sum(costs))} of trial "
        f"time) {priced_at}, from the trainer's steps timed one trial alone on the corpus's own batches; trials "
        f"side by side, Ray and the checkpoints make them slower{sooner}. Nothing was trained or written; run it "
        f"without --dry-run.")
    if time_limit is not None and spec.kind != "search":
        ends, held = within_limit(costs, max(1, concurrency), time_limit * 3600.0, capped)
        late = len(costs) - ends - held
        log(f"--time-limit {time_limit:g}: by these prices {ends} of the {len(costs)} trials would end within it"
            f"{f', {late} would start unpriced and end after it' if late else ''} and {held} wait for --resume (the "
            f"run prices by its own finished trials; until one has finished, a trial starts while time is left and its "
            f"first epoch prices it up to the epoch cap)")
    return 0


def within_limit(costs: list[float], workers: int, limit: float,
                 capped: list[tuple[float, float]] | None = None) -> tuple[int, int]:
    """(trials that end within ``limit`` seconds, trials held back) when ``workers`` take the trials in order and
    --time-limit's rule decides each start: a trial starts while time is left if no trial has ended yet
    (nothing is priced), else only if it ends within the limit; one that starts unpriced counts as ending
    within the limit only if it does. ``capped``: each trial's (seconds until its first epoch prices it, its
    seconds at the study's epoch cap): a trial started unpriced is held back there when the cap would end after
    the limit."""
    free_at = [0.0] * workers  # a heap
    first_end = math.inf
    ends = held = 0
    for index, seconds in enumerate(costs):
        start = free_at[0]
        if start >= limit or (start >= first_end and start + seconds > limit):
            held += 1
            continue
        if capped is not None and start < first_end and start + capped[index][1] > limit:
            heapq.heapreplace(free_at, start + capped[index][0])  # its first epoch, then held back
            held += 1
            continue
        end = start + seconds
        heapq.heapreplace(free_at, end)
        first_end = min(first_end, end)
        ends += end <= limit
    return ends, held

def _budget_text(spec: StudySpec) -> str:
    budget = spec.fields.budget
    parts = [f"{name} {value:g}" for name, value in (("epochs", budget.epochs), ("steps", budget.steps),
                                                     ("tokens", budget.tokens), ("patience", budget.patience),
                                                     ("min_epochs", budget.min_epochs),
                                                     ("minutes (cap)", budget.minutes)) if value is not None]
    if budget.stop:
        parts.append(f"stop {budget.stop}")
    return ", ".join(parts) or "the base config"


def _timed_rows(trials: list[Trial], stored: dict[str, float | None],
                log) -> tuple[list[float], set[float], list[tuple[float, float]]]:
    """Each trial's seconds, in the grid's order as the workers take them, from one timing of its row
    (a line per row), the epochs the plateau-stopped rows are priced at, and each trial's (seconds until
    --time-limit prices it by its own epochs: one epoch, none for a trial continued from its checkpoint; its
    seconds at the study's epoch cap)."""
    rows: dict[str, list[Trial]] = {}
    for trial in trials:
        rows.setdefault(trial.label, []).append(trial)
    costs: list[float] = []
    capped: list[tuple[float, float]] = []
    priced: set[float] = set()
    corpora: dict = {}
    log(f"{'row':<32} {'trials':>6} {'params':>9} {'step':>8} {'epoch':>8} {'trial':>8}")
    for label, group in rows.items():
        timing = time_row(group[0].config, corpora)
        epoch, trial = trial_seconds(timing)
        costs += [trial_seconds(timing, stored.get(t.key) or 0.0)[1] for t in group]
        cap = timing.get("cap", timing["epochs"])  # as the run prices it: training and validation, no test decoding
        capped += [(0.0 if stored.get(t.key) else epoch, epoch * max(cap - (stored.get(t.key) or 0.0), 0.0)) for t in group]
        if timing["epochs"] != timing.get("cap", timing["epochs"]):
            priced.add(timing["epochs"])
        log(f"{label[:32]:<32} {len(group):>6} {timing['params']:>9,} {1000 * timing['step_s']:>6.0f}ms "
            f"{_clock(epoch):>8} {_clock(trial):>8}")
    return costs, priced, capped


def _clock(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes = seconds / 60
    if minutes < 60:
        return f"{minutes:.1f}m"
    return f"{int(minutes // 60)}h{int(minutes % 60):02d}m"
