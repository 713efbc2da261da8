"""``python -m study.speed NAME``: a study's speed columns, measured in one pass on one machine.

Every trial times itself while it trains, so its tok/s and words/s say how busy the machine
was at that hour as much as how fast the model is: a study trained over several sessions, or
beside other work, ranks the load. This command measures every row of a stored study under
the same conditions, one after another in interleaved rounds (the fastest of ``--repeats``
counts, so a slow spell of the machine touches every row alike):

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

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

from nmt.cli import program_name, run_main
from nmt.errors import UserError
from nmt.memory import keep_freed_memory
from study.record_validation import read_json

SPEED_FILE = "speed.json"
TRIAL_TIMINGS_NOTE = ("train tok/s and decode w/s: the trials' own timings (mean over seeds), taken while they "
                      "trained, so they also measure what else the machine ran then; python -m study.speed NAME "
                      "times every row in one pass.")


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give a whole number of at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=program_name("study.speed"),
        description="Time every row of a stored study on this machine in one pass (training tokens/s and "
                    "beam-search words/s, interleaved rounds), write speed.json beside its tables and rebuild "
                    "them: the table's speed columns and the speed plot then show these numbers instead of "
                    "the timings each trial took under whatever load it met.")
    parser.add_argument("name", help="the study's name (its directory under --results)")
    parser.add_argument("--results", type=Path, default=Path("results"), help="results directory (default: ./results)")
    parser.add_argument("--batches", type=positive, default=8,
                        help="training batches timed per row and round (default 8)")
    parser.add_argument("--sentences", type=positive, default=64,
                        help="test sentences translated per row and round (default 64)")
    parser.add_argument("--repeats", type=positive, default=3,
                        help="timed rounds after one warm-up; the fastest counts (default 3)")
    parser.add_argument("--threads", type=positive, default=1,
                        help="torch threads (default 1, as a trial of a study run with one CPU per trial)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for bad input")
    return parser


def row_configs(spec, records: list[dict]) -> dict[str, dict]:
    """Each row's configuration at its first seed: the study file's rows (grid, ablation), or the
    sampled configurations its records hold (search)."""
    from study.spec import expand

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
        import torch

        from nmt.bench import ScriptedEnds
        from nmt.data.batching import make_batches, make_source_batches
        from nmt.model import build_model
        from nmt.trainer import resolve_device

        torch.manual_seed(1)
        self.cfg = cfg
        self.device = resolve_device(cfg.train.device)  # where the row's trials trained
        self.model = build_model(cfg.model, len(data.src_vocab), len(data.tgt_vocab)).to(self.device)
        groups = [{"params": params, "lr": cfg.train.lr * scale} for params, scale in self.model.lr_scales()]
        self.optimizer = torch.optim.Adam(groups, lr=cfg.train.lr)
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
        import torch

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
            import torch

            torch.cuda.synchronize(self.device)


def measure(configs: dict[str, dict], batches: int, sentences: int, repeats: int, log) -> list[dict]:
    """Each row's training tokens/s and decoding words/s, fastest of ``repeats`` interleaved rounds."""
    from nmt.bench import interleaved_fastest
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
    train = interleaved_fastest({label: timer.train for label, timer in timers.items()}, repeats)
    log(f"decoding: {len(timers)} rows, {repeats} interleaved rounds after a warm-up")
    decode = interleaved_fastest({label: timer.decode for label, timer in timers.items()}, repeats)
    return [{"label": label, "train_tokens_per_s": timer.tokens / train[label],
             "decode_words_per_s": timer.words / decode[label], "train_tokens": timer.tokens,
             "decode_words": timer.words, "beam": timer.cfg.decode.beam, "device": str(timer.device)}
            for label, timer in timers.items()]


def machine_name() -> str:
    """The processor's model name (Linux), else what platform knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def read_speed(study_dir: Path) -> dict | None:
    """The study's timing pass (``speed.json``), or None when it has none."""
    path = study_dir / SPEED_FILE
    speed = read_json(path, f"restore it, or time the study again with python -m study.speed {study_dir.name}")
    if speed is None:
        return None
    try:
        missing = [key for key in ("date", "machine", "threads", "repeats", "rows") if key not in speed]
        if missing:
            raise KeyError(", ".join(missing))
        for row in speed["rows"]:
            if not isinstance(row["label"], str) or not all(
                    isinstance(row[key], (int, float)) for key in ("train_tokens_per_s", "decode_words_per_s")):
                raise ValueError(f"row {row!r}: a label and two speeds expected")
    except (ValueError, KeyError, TypeError) as err:
        raise UserError(f"{path}: not a timing pass of python -m study.speed ({type(err).__name__}: {err}); "
                        f"delete it or run python -m study.speed {study_dir.name} again") from None
    return speed


def speed_note(speed: dict, untimed: list[str]) -> str:
    """The table's note on where its speed columns come from."""
    threads = f"{speed['threads']} thread" + ("s" if speed["threads"] != 1 else "")
    rounds = "one round" if speed["repeats"] == 1 else f"fastest of {speed['repeats']} interleaved rounds"
    note = (f"train tok/s and decode w/s: one timing pass of every row (python -m study.speed, {speed['date']}, "
            f"{speed['machine']}, {threads}, {rounds}), not the trials' own timings.")
    if untimed:
        note += f" Not in that pass (run it again): {', '.join(untimed)}."
    return note


def with_speed(rows, speed: dict | None):
    """The table's rows with the timing pass's speeds (rows it lacks: none) and its note; without a
    pass, the trials' own speeds with a note that says so."""
    rows = rows.copy()
    if speed is None:
        rows.attrs["speed_note"] = TRIAL_TIMINGS_NOTE
        return rows
    timed = {row["label"]: row for row in speed["rows"]}
    rows["train_tokens_per_s"] = [float(timed[label]["train_tokens_per_s"]) if label in timed else math.nan
                                  for label in rows["label"]]
    rows["decode_words_per_s"] = [float(timed[label]["decode_words_per_s"]) if label in timed else math.nan
                                  for label in rows["label"]]
    rows.attrs["speed_note"] = speed_note(speed, [label for label in rows["label"] if label not in timed])
    return rows


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    import torch

    from nmt.fileio import write_json
    from study.ownership import owned_path
    from study.spec import STUDY_NAME
    from study.stored import load_stored_study
    from study.table import main as rebuild_table

    if not STUDY_NAME.fullmatch(args.name):
        raise UserError(f"study name {args.name!r}: a study name is a plain identifier (letters, digits, _ and -, "
                        f"starting with a letter); see python -m study.list")
    root = args.results.resolve()
    study_dir = owned_path(root, root / args.name, "study directory")
    if not (study_dir / "study.json").is_file():
        raise UserError(f"study {args.name}: no stored results in {root}; run python -m study.run {args.name} first")
    stored = load_stored_study(study_dir)
    configs = row_configs(stored.spec, stored.records)
    torch.set_num_threads(args.threads)
    keep_freed_memory()  # as the trial workers do: the rows run as fast as they trained
    print(f"timing {len(configs)} rows of {args.name} on {machine_name()} with {args.threads} torch thread"
          f"{'s' if args.threads != 1 else ''}", flush=True)
    started = time.perf_counter()
    rows = measure(configs, args.batches, args.sentences, args.repeats, log=lambda line: print(line, flush=True))
    for row in rows:
        print(f"  {row['label']:<40} {row['train_tokens_per_s']:>9,.0f} train tok/s {row['decode_words_per_s']:>9,.0f} "
              f"decode w/s", flush=True)
    machine = machine_name()
    if any(row["device"].startswith("cuda") for row in rows):
        machine += f" with {torch.cuda.get_device_name()}"
    write_json(study_dir / SPEED_FILE, {
        "date": time.strftime("%Y-%m-%d"), "machine": machine, "threads": args.threads,
        "torch": torch.__version__, "batches": args.batches, "sentences": args.sentences, "repeats": args.repeats,
        "seconds": round(time.perf_counter() - started, 1), "rows": rows})
    print(f"wrote {study_dir / SPEED_FILE} ({time.perf_counter() - started:.0f} s); rebuilding the tables", flush=True)
    return rebuild_table([args.name, "--results", str(args.results)])


if __name__ == "__main__":
    sys.exit(run_main(main))
