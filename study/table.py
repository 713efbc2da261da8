"""``python -m study.table NAME``: rebuild a study's tables and plots from its stored trial
results (Ray Tune's storage) without training anything."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nmt.cli import program_name, run_main
from nmt.errors import UserError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=program_name("study.table"),
                                     description="Rebuild results/NAME/ (md, csv, tex, png) from the stored "
                                                 "trial results of a study run, and print the Markdown table "
                                                 "(and an ablation's additivity table).")
    parser.add_argument("name", help="the study's name (or its .yaml file)")
    parser.add_argument("--results", type=Path, default=Path("results"), help="results directory (default: ./results)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for bad input")
    args = parser.parse_args(argv)

    # after parsing: --help and a bad argument answer before pandas, matplotlib and the spec load
    from study.results import experiment_dir, load_records, load_saved_records
    from study.exports import printed_tables, write_command, write_exports
    from study.stored import command_history, read_references, read_study_state
    from study.ownership import check_real_tree, owned_path
    from study.spec import STUDY_NAME, spec_from_dict, study_path
    from study.tables import warnings as table_warnings

    root = args.results.resolve()
    name = study_path(args.name).stem if args.name.endswith((".yaml", ".yml")) else args.name
    if not STUDY_NAME.fullmatch(name):
        raise UserError(f"study name {name!r}: a study name is a plain identifier (letters, digits, _ and -, "
                        f"starting with a letter); see python -m study.list")
    study_dir = owned_path(root, root / name, "study directory")
    check_real_tree(study_dir, "study directory")
    check_real_tree(experiment_dir(root, name), "trial store")
    if not (study_dir / "study.json").exists():
        if (experiment_dir(root, name) / "trials").is_dir():  # the trial store is the source of truth
            raise UserError(f"study {name}: {study_dir / 'study.json'} is missing, but its trial store "
                            f"{experiment_dir(root, name)} is there; python -m study.run STUDY_FILE --resume "
                            f"--results {args.results} rebuilds the study's folder and tables without retraining "
                            f"what finished")
        raise UserError(f"study {name}: no stored results in {root}; run python -m study.run {name} first")
    state = read_study_state(study_dir)
    spec = spec_from_dict(state["spec"], source=f"{study_dir / 'study.json'}")
    if experiment_dir(root, name).is_dir():  # the trial store of a local run is the source of truth
        records = load_records(root, name)
        source = f"the trial store {experiment_dir(root, name)}"
    else:  # committed reference results: the trial records kept next to the tables
        records = load_saved_records(study_dir)
        source = f"the trial records in {study_dir}"
    if not records:
        raise UserError(f"study {name}: {source} holds no trials")
    print(f"rebuilding from {source}")
    references = read_references(study_dir)
    write_command(study_dir, command_history(state))
    outputs, table = write_exports(spec, records, references, study_dir)
    print(printed_tables(study_dir, outputs))
    print("wrote " + ", ".join(str(p) for p in outputs))
    for line in table_warnings(table.rows):
        print(f"warning: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
