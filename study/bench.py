"""``python -m study.bench``: does running trials side by side on Ray pay off on this machine, and
what does a study cost around its trials (``--fixed-cost``)? The work is
``study.execution.overhead_bench``."""

from __future__ import annotations

import json
import os
import sys

from nmt.cli import command_parser, run_main


def main(argv: list[str] | None = None) -> int:
    parser = command_parser(
        "study.bench",
        description="Wall time of N identical small trials run as a study (one trial per CPU, on Ray) "
                    "against the same trials run one after another in one process using every CPU.",
        epilog="Example: python -m study.bench --trials 4 --epochs 3")
    parser.add_argument("--trials", type=int, default=4, help="trials (seeds of one configuration; default 4)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs per trial (default 3)")
    parser.add_argument("--cell", default="gru", help="recurrent unit of the trials (default gru)")
    parser.add_argument("--hidden", type=int, default=64, help="hidden and embedding size (default 64)")
    parser.add_argument("--size", type=int, default=3000, help="synthetic training pairs (default 3000)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1, help="CPUs to use (default: all)")
    parser.add_argument("--sequential-threads", type=int,
                        help="torch threads of the sequential run (default: --cpus, every CPU it may use)")
    parser.add_argument("--fixed-cost", action="store_true",
                        help="instead: time what a study costs before and after its trials (a one-step study in a "
                             "new results directory; the fastest of --repeats runs)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of --fixed-cost, the fastest counts (default 2)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    args = parser.parse_args(argv)
    if args.fixed_cost:
        from study.api import fixed_cost  # as below

        return fixed_cost(args.repeats, args.json)

    # after parsing: --help and a bad argument answer before torch and Ray load
    from study.api import concurrency_bench

    report = concurrency_bench(trials=args.trials, epochs=args.epochs, cell=args.cell, hidden=args.hidden,
                               size=args.size, cpus=args.cpus, sequential_threads=args.sequential_threads)
    if args.json:
        print(json.dumps(report))
    else:
        print(f"wall time, study.run / sequential: {report['ratio']:.2f}  ({report['concurrent_seconds']:.1f} s / "
              f"{report['sequential_seconds']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
