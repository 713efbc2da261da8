"""Train one NMT model: ``python -m nmt.train --config FILE.yaml --out DIR``.

Prints one line per epoch and writes DIR/metrics.json, DIR/test.hyp and the
checkpoint DIR/checkpoint/ (which ``nmt.translate`` reads).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nmt.checkpoint import read_config
from nmt.cli import command_parser, run_main
from nmt.config import Config, config_from_dict, config_yaml, load_config, smoke
from nmt.data.pipeline import check_vocabulary_size
from nmt.typed_config import apply_overrides, tree_changes
from nmt.units import describe, unit_names
from nmt.errors import UserError
from nmt.fileio import check_writable_dir
from nmt.memory import keep_freed_memory
from nmt.numerics import NUMERICS, apply_numerics
from nmt.ops.kernel_choice import check_kernels
from nmt.run_dir import CHECKPOINT, STATE, check_run_dir, remove_run

DEFAULT_CONFIG = Path(__file__).parent / "configs" / "default.yaml"


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "nmt.train",
        description=f"Train an attentional encoder-decoder with any recurrent unit ({' '.join(unit_names())}; "
                    "python -m nmt.units describes them) and evaluate it with sacreBLEU.",
        epilog="Example: python -m nmt.train --config nmt/configs/multi30k_gru.yaml --set train.max_epochs=5 "
               "--out runs/gru",
    )
    shown_default = DEFAULT_CONFIG.relative_to(Path.cwd()) if DEFAULT_CONFIG.is_relative_to(Path.cwd()) else DEFAULT_CONFIG
    parser.add_argument("--config", type=Path, help="YAML config with sections data/model/train/decode "
                        f"(default: {shown_default}, a small model on the synthetic corpus)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key with a YAML value, e.g. --set model.cell=atr "
                             "--set data.train=[a.en,a.de] (repeatable)")
    parser.add_argument("--out", type=Path, default=Path("runs/default"),
                        help="output directory (default: runs/default)")
    parser.add_argument("--smoke", action="store_true",
                        help="shrink data, model and epochs so any config finishes in well under a minute")
    parser.add_argument("--threads", type=int, help="torch threads (same as --set train.threads=N)")
    parser.add_argument("--numerics", choices=NUMERICS,
                        help="portable (default): the same model on Intel and AMD CPUs with AVX2; native: the CPU's own "
                             "kernels, faster (same as --set train.numerics=...)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    parser.add_argument("--force", action="store_true", help="replace the run in --out (once the new one has finished)")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for bad input")
    return parser


def override_list(args: argparse.Namespace) -> list[str]:
    overrides = list(args.overrides)
    if args.threads is not None:
        overrides.append(f"train.threads={args.threads}")
    if args.numerics is not None:
        overrides.append(f"train.numerics={args.numerics}")
    return overrides


def prepare_config(args: argparse.Namespace) -> Config:
    source = str(args.config) if args.config is not None else str(DEFAULT_CONFIG)
    cfg = load_config(source, override_list(args))
    check_vocabulary_size(cfg.data, source)
    return smoke(cfg) if args.smoke else cfg


def check_out_dir(out: Path, resume: bool, force: bool) -> bool:
    """Whether --out may be used; returns True when a previous run there is to be replaced. It is
    replaced only once the new run has finished: a mistake found on the way (a mistyped corpus
    path, a crash) leaves it as it was. --out must be new, empty, or a run of this tool: a folder
    holding anything else is refused, with or without --force (nmt.run_dir)."""
    check_run_dir(out, "--out")
    finished = (out / "metrics.json").is_file()
    started = (out / CHECKPOINT / STATE).is_file()
    if resume:
        if not started:
            raise UserError(f"--out {out}: no checkpoint to resume from; drop --resume to start a new run")
        return False
    if finished or started:
        if not force:
            what = "a finished run" if finished else "an unfinished run"
            fix = "--force to replace it" if finished else "--resume to continue it or --force to replace it"
            raise UserError(f"--out {out} holds {what}; choose another --out, or pass {fix}")
        check_writable_dir(out.parent, "--out (its folder)")
        for aside in (staging_dir(out), retired_dir(out)):  # removed before the run, so checked now
            check_run_dir(aside, "--out's replacement folder")
        return True
    check_writable_dir(out, "--out")
    return False


def staging_dir(out: Path) -> Path:
    """Where a run that replaces ``out`` trains until it has finished (next to ``out``)."""
    out = out.resolve()
    return out.parent / f".{out.name}.replacing"


def retired_dir(out: Path) -> Path:
    """Where the replaced run lies for the moment between the two renames."""
    out = out.resolve()
    return out.parent / f".{out.name}.replaced"


def replace_run(staged: Path, out: Path) -> None:
    """Put the finished run in ``staged`` in place of the previous run in ``out``. Every folder
    removed here is checked to hold only the trainer's files first (nmt.run_dir.remove_run)."""
    out = out.resolve()
    retired = retired_dir(out)
    remove_run(retired, "--out's replacement folder")
    check_run_dir(out, "--out")  # again: a file may have been put there while the new run trained
    out.rename(retired)
    staged.rename(out)
    remove_run(retired, "--out's replaced run")


# Keys that may change when a run is resumed: budgets, hardware and decoding.
RESUMABLE_CHANGES = ("train.max_epochs", "train.max_steps", "train.max_tokens", "train.max_minutes", "train.patience",
                     "train.threads", "train.device", "train.numerics", "decode.")


def resume_config(args: argparse.Namespace) -> Config:
    """The stored config of the run in --out with --set applied; only budget, hardware
    and decoding keys may differ from what the run was started with."""
    stored = read_config(args.out / "checkpoint")
    overrides = override_list(args)
    if args.config is not None:
        requested = load_config(args.config, overrides)
    else:
        requested = config_from_dict(apply_overrides(stored.to_dict(), overrides), source="--set")
    if args.smoke:
        requested = smoke(requested)
    blocked = [c for c in tree_changes(stored.to_dict(), requested.to_dict()) if not c.startswith(RESUMABLE_CHANGES)]
    if blocked:
        raise UserError(f"--resume {args.out}: the run was started with another config ({'; '.join(blocked[:3])}); "
                        "resume with the same config, or start a new run with another --out")
    return requested


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cfg = prepare_config(args)
    if args.print_config:
        print(config_yaml(cfg), end="")
        print("# " + "\n# ".join(describe(cfg.model.unit)))  # the unit's options, with what each does
        return 0
    warning = check_kernels()  # a bad NMT_KERNELS is refused before anything is written or trained
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    replace = check_out_dir(args.out, args.resume, args.force)
    if args.resume:
        cfg = resume_config(args)
    asked = cfg.train.numerics
    if not apply_numerics(asked, "train.numerics", strict=False):  # before torch computes anything
        # only a caller that ran torch in this process before (a notebook, a test) gets here: the record says what ran
        cfg.train.numerics = "native"
    from nmt.trainer import run  # the trainer (sacreBLEU with it) after the argument checks: fast --help and errors

    keep_freed_memory()  # the same numbers, up to a quarter sooner (nmt.memory)

    resume_from = args.out / "checkpoint" if args.resume else None
    target = staging_dir(args.out) if replace else args.out
    if replace:
        remove_run(target, "--out's replacement folder")  # a replacement that never finished
    metrics = run(cfg, target, resume_from=resume_from)
    if replace:
        replace_run(target, args.out)
    print(f"wrote {args.out / 'metrics.json'}, {args.out / 'test.hyp'}, checkpoint {args.out / 'checkpoint'}")
    if cfg.train.numerics != asked:
        print(f"warning: train.numerics: {asked} could not be set, since this process computed with torch before; the "
              f"run used the CPU's own kernels and is recorded as native", file=sys.stderr)
    return 0 if metrics["status"] in ("ok", "diverged", "truncated") else 1


if __name__ == "__main__":
    sys.exit(run_main(main))
