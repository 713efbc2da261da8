"""The console scripts of the package (``[project.scripts]`` in pyproject.toml).

``rnmt-study COMMAND`` runs ``python -m study.COMMAND``; ``rnmt-train``, ``rnmt-translate``,
``rnmt-bench`` and ``rnmt-analyze COMMAND`` run the ``nmt`` commands. Each script calls the
module's own ``main(argv)`` through ``nmt.cli.run_main``, as its ``python -m`` form does, so the
options, the help, the exit codes and the one-line errors are the same; only the program name
in usage lines is the script's (``nmt.cli.program_name``).

A new subcommand is one line in ``STUDY_COMMANDS`` (or ``ANALYSIS_COMMANDS``): a module with
``main(argv) -> int`` and a one-line summary.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass

from nmt.cli import SCRIPT_NAMES, package_version, run_main
from nmt.typed_config import suggest


@dataclass(frozen=True)
class Command:
    module: str  # has main(argv) -> int; runs as python -m MODULE
    summary: str  # one line in the command list


STUDY_COMMANDS = {
    "run": Command("study.run", "run a study on Ray Tune, tracked in MLflow (--dry-run: estimate its time first; "
                                "--smoke: a quick check)"),
    "list": Command("study.list", "the built-in studies: kind, trials, budget per trial, which results exist; "
                                  "with NAME, where each of its trials stands"),
    "table": Command("study.table", "rebuild a study's tables and plots from its stored results, without training"),
    "speed": Command("study.speed", "time every row of a stored study in one pass, for speed columns that "
                                    "measure the models, not the load each trial met"),
    "compare": Command("study.compare", "one table and one bar figure across several studies"),
    "report": Command("study.report", "(re)write a study's self-contained HTML report"),
    "bench": Command("study.bench", "does running trials side by side on Ray pay off on this machine?"),
}

ANALYSIS_COMMANDS = {
    "atr_gates": Command("nmt.analysis.atr_gates", "how ATR's input and forget gates behave on a test set"),
    "context_gates": Command("nmt.analysis.context_gates", "context-gate values against sentence BLEU"),
    "fsmn_filters": Command("nmt.analysis.fsmn_filters", "the learned FSMN memory filters"),
    "length_buckets": Command("nmt.analysis.length_buckets", "BLEU and length ratio by source-sentence length"),
}

OTHER_SCRIPTS = "rnmt-train, rnmt-translate, rnmt-bench (unit speed), rnmt-analyze (trained models)"


def main(argv: list[str] | None = None) -> int:
    """``rnmt-study COMMAND [ARGS]``."""
    return dispatch("rnmt-study", "Recurrent-NMT studies on Ray Tune, tracked in MLflow, made into paper-style "
                                  "tables.", STUDY_COMMANDS, argv, see_also=f"other commands: {OTHER_SCRIPTS}")


def analyze(argv: list[str] | None = None) -> int:
    """``rnmt-analyze COMMAND [ARGS]``: the ``python -m nmt.analysis.*`` commands."""
    return dispatch("rnmt-analyze", "Look inside trained models and their translations; each command writes "
                                    "figures (PNG and PDF) and a JSON summary into --out.", ANALYSIS_COMMANDS, argv)


def train(argv: list[str] | None = None) -> int:
    """``rnmt-train``: ``python -m nmt.train``."""
    return run_module("nmt.train", "rnmt-train", arguments(argv))


def translate(argv: list[str] | None = None) -> int:
    """``rnmt-translate``: ``python -m nmt.translate``."""
    return run_module("nmt.translate", "rnmt-translate", arguments(argv))


def bench(argv: list[str] | None = None) -> int:
    """``rnmt-bench``: ``python -m nmt.bench``."""
    return run_module("nmt.bench", "rnmt-bench", arguments(argv))


def arguments(argv: list[str] | None) -> list[str]:
    # explicit, never None: run_main and the modules would read sys.argv, which for a
    # subcommand still holds the subcommand's name
    return list(sys.argv[1:] if argv is None else argv)


def dispatch(prog: str, description: str, commands: dict[str, Command], argv: list[str] | None,
             see_also: str = "") -> int:
    """Run ``commands[argv[0]]`` with the rest of ``argv``. ``--help`` lists the commands; no
    command, or an unknown one, is a one-line error (exit 2) like every bad input."""
    args = arguments(argv)
    if args and args[0] in ("-h", "--help"):
        print(overview(prog, description, commands, see_also))
        return 0
    if args and args[0] == "--version":
        print(f"{prog} {package_version()}")
        return 0
    names = ", ".join(commands)
    if not args:
        print(f"error: {prog} needs a command: {names} ({prog} --help says what each does)", file=sys.stderr)
        return 2
    name, rest = args[0], args[1:]
    if name not in commands:
        print(f"error: unknown command {name!r}{suggest(name, list(commands), '', quote=True)}; {prog} has: "
              f"{names} ({prog} --help says what each does)", file=sys.stderr)
        return 2
    return run_module(commands[name].module, f"{prog} {name}", rest)


def overview(prog: str, description: str, commands: dict[str, Command], see_also: str) -> str:
    width = max(len(name) for name in commands)
    lines = [f"usage: {prog} COMMAND [ARGS ...]", "", description, "", "commands:"]
    lines += [f"  {name:<{width}}  {command.summary}" for name, command in commands.items()]
    lines += ["", f"{prog} COMMAND --help shows a command's options (the same as python -m MODULE --help); "
                  f"{prog} --version, the version."]
    if see_also:
        lines.append(see_also)
    return "\n".join(lines)


def run_module(module: str, prog: str, argv: list[str]) -> int:
    """``python -m MODULE ARGV`` in this process, its usage lines naming ``prog``."""
    command_main = importlib.import_module(module).main
    SCRIPT_NAMES[module] = prog
    try:
        return run_main(command_main, argv)
    finally:
        del SCRIPT_NAMES[module]


if __name__ == "__main__":
    sys.exit(main())
