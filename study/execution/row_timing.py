"""A study's speed columns measured in one pass on one machine (``python -m study.speed NAME``).

Every trial times itself while it trains, so its tok/s and words/s say how busy the machine
was at that hour as much as how fast the model is: a study trained over several sessions, or
beside other work, ranks the load. This command measures every row of a stored study under
the same conditions, one after another in interleaved rounds (the table shows the fastest of
``--repeats``, so a slow spell of the machine touches every row alike; every round is kept, the
samples a claim on a timing is judged from):

- training: target tokens/s of the row's model (its configuration at seed 1, fresh weights:
  speed does not depend on the values) over the same first ``--batches`` batches of the
  study's training data - forward, backward, gradient clipping and the Adam step, as in
  ``nmt.trainer``, with freed memory kept in the process as the trial workers keep it
  (``nmt.memory``);
- decoding: words/s of the row's beam search over the first ``--sentences`` test sentences,
  each search ending at its reference translation's length (an untrained model would end its
  searches at random), counted in the references' words, as the table counts its trials'.

It writes ``speed.json`` into the study's result directory and rebuilds the tables and plots
(as ``python -m study.table``); from then on the table's ``train tok/s`` and ``decode w/s``
columns and the speed plot show these numbers, and a note under the table says where they come
from. Delete ``speed.json`` to go back to the trials' own timings.
"""

from __future__ import annotations

import json
import math
import platform
import queue
import time
from collections.abc import Callable
from pathlib import Path

from nmt.errors import UserError
from nmt.fileio import write_json
from nmt.memory import keep_freed_memory
from nmt.numerics import apply_numerics, numerics_record
from study.analysis.numerics_note import records_numerics
from study.analysis.exports import rebuild_exports
from study.analysis.speed_columns import ROUNDS, SPEED_FILE
from study.analysis.stored_study import load_stored_study
from study.spec.expansion import expand
from study.spec.model import checked_study_name
from study.store.ownership import owned_path
from study.store.provenance import cpu_description


def row_configs(spec, records: list[dict]) -> dict[str, dict]:
    """Each row's configuration at its first seed: the study file's rows (grid, ablation), or the
    sampled configurations its records hold (search)."""

    if spec.kind == "search":
        first: dict[str, dict] = {}
        for record in sorted(records, key=lambda r: (r["row"], r["seed"])):
            first.setdefault(record["label"], record["config"])
        return first
    return {trial.label: trial.config for trial in sorted(expand(spec), key=lambda t: (t.row, t.seed))
            if trial.seed == 1}


class RowTimer:
    """One row's model with its training step and its decoding, on data shared by the rows."""

    def __init__(self, cfg, data, batches: int, sentences: int):
        # torch loads only where a model is built or timed, not when the driver starts
        import torch

        # torch loads only where a model is built or timed, not when the driver starts
        from nmt.benchmarks.decoding import ScriptedEnds
        from nmt.data.batching import make_batches, make_source_batches
        from nmt.model import build_model
        from nmt.trainer import make_optimizer, resolve_device

        torch.manual_seed(1)
        self.cfg = cfg
        self.device = resolve_device(cfg.train.device)  # where the row's trials trained
        self.model = build_model(cfg.model, len(data.src_vocab), len(data.tgt_vocab)).to(self.device)
        self.optimizer = make_optimizer(self.model, cfg.train)
        self.batches = [batch.to(self.device) for batch in
                        make_batches(data.train, cfg.train.batch_tokens, shuffle=True, seed=1, epoch=1)[:batches]]
        self.tokens = sum(batch.ntokens for batch in self.batches)
        test = data.test[:sentences]
        sources = [src for src, _ in test]
        # the search's own limit (nmt.search.max_lengths) over the source with its EOS
        ends = {tuple(src): min(len(tgt) + 1, int((len(src) + 1) * cfg.decode.max_len_ratio) + 10)
                for src, tgt in test}
        self.scripted = ScriptedEnds(self.model, ends)
        self.source_batches = [(src.to(self.device), mask.to(self.device))
                               for src, mask, _ in make_source_batches(sources, cfg.decode.batch_size)]
        self.words = sum(len(reference.split()) for _, reference in data.test_text[:sentences])

    def train(self) -> None:
        # torch loads only where a model is built or timed, not when the driver starts
        import torch

        cfg = self.cfg.train
        self.model.train()
        for batch in self.batches:
            loss, _ = self.model.loss(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_out, batch.tgt_mask,
                                      cfg.label_smoothing)
            self.optimizer.zero_grad(set_to_none=True)
            (loss / batch.ntokens).backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip if cfg.clip > 0 else math.inf)
            self.optimizer.step()
        self._sync()

    def decode(self) -> None:
        # torch loads only where a model is built or timed, not when the driver starts
        import torch

        # torch loads only where a model is built or timed, not when the driver starts
        from nmt.search import beam_search

        decode = self.cfg.decode
        self.model.eval()
        with torch.no_grad():
            for src, src_mask in self.source_batches:
                beam_search(self.scripted, src, src_mask, beam=decode.beam, length_penalty=decode.length_penalty,
                            max_len_ratio=decode.max_len_ratio)
        self._sync()

    def _sync(self) -> None:
        """Wait for the GPU's queued work, so that the clock measures it."""
        if self.device.type == "cuda":
            # torch loads only where a model is built or timed, not when the driver starts
            import torch

            torch.cuda.synchronize(self.device)


def measure(configs: dict[str, dict], batches: int, sentences: int, repeats: int, log) -> list[dict]:
    """Each row's training tokens/s and decoding words/s in each of ``repeats`` interleaved rounds, and
    the fastest round's (the table's)."""
    # torch loads only where a model is built or timed, not when the driver starts
    from nmt.benchmarks.timing import interleaved_times
    from nmt.config import config_from_dict
    from nmt.data.pipeline import load_data

    loaded: dict[str, object] = {}
    timers: dict[str, RowTimer] = {}
    for label, tree in configs.items():
        cfg = config_from_dict(tree, source=f"row {label!r}")
        data_key = json.dumps(cfg.to_dict()["data"], sort_keys=True)
        if data_key not in loaded:
            loaded[data_key] = load_data(cfg.data, log=None)
        timers[label] = RowTimer(cfg, loaded[data_key], batches, sentences)
        log(f"  {label}: {timers[label].tokens:,} target tokens in {len(timers[label].batches)} batches, "
            f"{timers[label].words:,} test words at beam {cfg.decode.beam}")
    log(f"training: {len(timers)} rows, {repeats} interleaved rounds after a warm-up")
    train = interleaved_times({label: timer.train for label, timer in timers.items()}, repeats)
    log(f"decoding: {len(timers)} rows, {repeats} interleaved rounds after a warm-up")
    decode = interleaved_times({label: timer.decode for label, timer in timers.items()}, repeats)
    rows = []
    for label, timer in timers.items():
        train_rounds = [timer.tokens / seconds for seconds in train[label]]
        decode_rounds = [timer.words / seconds for seconds in decode[label]]
        rows.append({"label": label, "train_tokens_per_s": max(train_rounds), "decode_words_per_s": max(decode_rounds),
                     "train_tokens_per_s" + ROUNDS: train_rounds, "decode_words_per_s" + ROUNDS: decode_rounds,
                     "train_tokens": timer.tokens, "decode_words": timer.words, "beam": timer.cfg.decode.beam,
                     "device": str(timer.device)})
    return rows


def machine_name() -> str:
    """The processor's model name (Linux), else what platform knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def measure_as_trials_run(configs: dict[str, dict], batches: int, sentences: int, repeats: int, threads: int,
                          numerics: str, say: Callable[[str], None] = print) -> dict:
    """``measure`` in a new process that starts as a trial worker does, with the study's numerics in its
    environment from its first instruction (``apply_numerics`` here sets it; the child inherits it): MKL takes
    its code path from ``MKL_CBWR`` once, at its first call, so a process that has computed anything keeps the
    path it took then (in this one, loading the study can have), and a pass timed there would run other kernels
    than the trials (on an AVX-512 Xeon, portable numerics' training ran at a quarter of the native speed).
    The child's progress lines reach ``say`` as it writes them. Returns the rows, the child's numerics record
    and its malloc settings."""
    # multiprocessing's spawn starts a fresh interpreter: nothing of this process's kernels carries over
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    apply_numerics(numerics, strict=False)  # the environment the child starts with
    context = multiprocessing.get_context("spawn")
    lines = context.Queue()
    try:
        with ProcessPoolExecutor(1, mp_context=context, initializer=_say_through, initargs=(lines,)) as pool:
            timing = pool.submit(_measure_here, configs, batches, sentences, repeats, threads, numerics)
            _relay(lines, timing, say)
            return timing.result()
    except BrokenProcessPool:
        raise UserError("the timing pass's process ended without a result (killed, out of memory, or a script that "
                        "calls study.api.time_study outside an if __name__ == '__main__' block, which a new "
                        "process runs again); fewer --batches or --sentences need less memory") from None
    finally:
        lines.close()


_LINES = None  # in the timing pass's process: the queue its progress lines go to (``_say_through``)
_DONE = None  # the last item the child puts: no more lines


def _say_through(lines) -> None:
    global _LINES
    _LINES = lines


def _relay(lines, timing, say: Callable[[str], None]) -> None:
    """The child's lines to ``say`` until its end mark, or until it ended without one (it died, or failed before
    its first line)."""
    while True:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            if timing.done() and timing.exception() is not None:
                return
            continue
        if line is _DONE:
            return
        say(line)


def _measure_here(configs: dict[str, dict], batches: int, sentences: int, repeats: int, threads: int,
                  numerics: str) -> dict:
    """The child of ``measure_as_trials_run``: numerics checked (strictly: nothing has computed yet), one
    trial's threads, freed memory kept as the trial workers keep it; each progress line sent as it is written."""
    # the child's torch, after the numerics are set
    import torch

    try:
        apply_numerics(numerics, "the timing pass", strict=True)
        torch.set_num_threads(threads)
        kept = keep_freed_memory()
        rows = measure(configs, batches, sentences, repeats, log=_LINES.put)
        return {"rows": rows, "numerics": numerics_record(numerics), "malloc": kept}
    finally:
        _LINES.put(_DONE)


def time_study(name: str, results: Path, threads: int, batches: int, sentences: int, repeats: int,
               say: Callable[[str], None] = lambda line: print(line, flush=True)) -> Path:
    """Time every row of the stored study ``name`` (in a new process with the trials' numerics:
    ``measure_as_trials_run``), write ``speed.json`` beside its tables and rebuild them (their speed
    columns then show these numbers). Returns the ``speed.json`` path."""
    # torch loads only when something is timed: the command answers --help and bad names first
    import torch

    checked_study_name(name)
    root = results.resolve()
    study_dir = owned_path(root, root / name, "study directory")
    if not (study_dir / "study.json").is_file():
        raise UserError(f"study {name}: no stored results in {root}; run python -m study.run {name} first")
    stored = load_stored_study(study_dir)
    configs = row_configs(stored.spec, stored.records)
    numerics = records_numerics(stored.records) or stored.spec.fields.numerics  # as the trials computed
    say(f"timing {len(configs)} rows of {name} on {machine_name()} with {threads} torch thread"
        f"{'s' if threads != 1 else ''} and numerics {numerics}, in a new process")
    started = time.perf_counter()
    timed = measure_as_trials_run(configs, batches, sentences, repeats, threads, numerics, say=say)
    rows = timed["rows"]
    for row in rows:
        say(f"  {row['label']:<40} {row['train_tokens_per_s']:>9,.0f} train tok/s {row['decode_words_per_s']:>9,.0f} "
            f"decode w/s")
    machine, cpu = machine_name(), cpu_description()
    if any(row["device"].startswith("cuda") for row in rows):
        machine += f" with {torch.cuda.get_device_name()}"
        cpu += f" with {torch.cuda.get_device_name()}"
    write_json(study_dir / SPEED_FILE, {
        "date": time.strftime("%Y-%m-%d"), "machine": machine, "cpu": cpu, "threads": threads,
        "torch": torch.__version__, "numerics": timed["numerics"], "malloc": timed["malloc"], "batches": batches,
        "sentences": sentences, "repeats": repeats, "seconds": round(time.perf_counter() - started, 1), "rows": rows})
    say(f"wrote {study_dir / SPEED_FILE} ({time.perf_counter() - started:.0f} s); rebuilding the tables")
    rebuild_exports(results, name, say=say)
    return study_dir / SPEED_FILE
