"""``python -m study.run NAME``: run a whole study (ablation, grid or Optuna search) on Ray Tune,
track it in MLflow and export paper-style tables to results/NAME/."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from nmt.cli import exit_without_teardown, program_name, run_main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=program_name("study.run"),
        description="Run a named study from search_spaces/ (or a study .yaml file): every configuration and "
                    "seed is a Ray Tune trial of the nmt core, tracked in MLflow; the tables and plots go to "
                    "results/NAME/. python -m study.list shows the built-in studies.",
        epilog="Examples: python -m study.run ablation_srnmt | python -m study.run cells --smoke | "
               "python -m study.run depth_srnmt --data-dir ../shared/data/multi30k --langs en-de --seeds 2")
    parser.add_argument("name", help="a built-in study (python -m study.list) or a path to a study .yaml file")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny data, model and budget, one seed: any study finishes in about 2 minutes")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a study key (seeds=3, budget.epochs=4) or a trial config key "
                             "(model.hidden=128, train.lr=1e-3, data.size=10000); repeatable")
    parser.add_argument("--seeds", type=int, help="seeds per configuration (same as --set seeds=N)")
    parser.add_argument("--max-concurrent", type=int, help="at most this many trials at once")
    parser.add_argument("--max-trials", type=int, default=None, metavar="N",
                        help="refuse a study of more than N trials (default: 2000, against typos such as "
                             "seeds: 100000000)")
    parser.add_argument("--gpus-per-trial", type=float, help="GPU share per trial, e.g. 0.25 (default: the study's)")
    parser.add_argument("--cpus", type=int, help="CPUs of the local Ray instance (default: all)")
    parser.add_argument("--address", help="join an existing Ray cluster (e.g. 10.0.0.5:6379 or auto) instead of "
                                          "starting a local one")
    parser.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite:///<results>/mlflow.db)")
    parser.add_argument("--storage", metavar="URI",
                        help="also keep the trial store (records, checkpoints, finished trials) and the exports in "
                             "an object store, s3://BUCKET/PREFIX (AWS_ENDPOINT_URL for an S3-compatible one), for a "
                             "cluster without a shared file system: a trial retried on another node continues from "
                             "its last uploaded epoch, and --resume with the same URI continues the study from any "
                             "machine, even from an empty --results directory"),
    parser.add_argument("--results", type=Path, default=None,
                        help="results directory (default: ./results, and ./results/smoke for --smoke runs, so a "
                             "check never mixes with a full run's results)")
    parser.add_argument("--data-dir", type=Path, help="use the parallel corpus in DIR (train.L, val.L, test*.L, "
                                                      "optionally .gz) instead of the study's data")
    parser.add_argument("--langs", help="with --data-dir: the language pair SRC-TGT, e.g. en-de")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted study; finished trials "
                                                              "are not run again")
    parser.add_argument("--extend", action="store_true",
                        help="continue a finished or interrupted study that gained rows, seeds (e.g. --seeds 5), "
                             "search samples or epochs (--set budget.epochs=60): its finished trials are kept, those "
                             "the old epoch budget stopped continue from their final checkpoints, the new ones train")
    parser.add_argument("--fresh", action="store_true", help="delete the study's previous results and start over")
    parser.add_argument("--reuse-from", action="append", default=[], metavar="STUDY",
                        help="before training, copy the finished trials of STUDY (run in the same --results "
                             "directory) that are trials of this study - the same config, seed and data - so they "
                             "are not trained twice; repeatable")
    parser.add_argument("--dry-run", action="store_true",
                        help="show the rows, trials, budget per trial and an estimate of the total time (from a few "
                             "timed training steps of each row's model on this machine; with --resume or --extend, of what a grid "
                             "or ablation study has left to train); train and write nothing")
    parser.add_argument("--verbose", action="store_true", help="show the trials' own output")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for bad input")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # after parsing: --help and a bad argument answer before Ray, torch and the study load
    from study.api import StudyRequest, run_request

    typed = argv if argv is not None else sys.argv[1:]
    request = StudyRequest(study=args.name, smoke=args.smoke, overrides=list(args.overrides), seeds=args.seeds,
                           results=args.results, resume=args.resume, extend=args.extend, fresh=args.fresh,
                           cpus=args.cpus, max_concurrent=args.max_concurrent, gpus_per_trial=args.gpus_per_trial,
                           address=args.address, tracking_uri=args.tracking_uri, storage=args.storage, data_dir=args.data_dir,
                           langs=args.langs, max_trials=args.max_trials, reuse_from=tuple(args.reuse_from),
                           verbose=args.verbose,
                           command="python -m study.run " + " ".join(shlex.quote(a) for a in typed))
    return run_request(request, dry_run=args.dry_run)


if __name__ == "__main__":
    exit_without_teardown(run_main(main))
