"""Shared command-line behaviour: bad input, and a file system that refuses a write (full,
read-only, permissions), are one line on stderr and exit 2."""

from __future__ import annotations

import argparse
import atexit
import errno
import logging
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from nmt.errors import UserError
from nmt.fileio import STORAGE_ERRNOS, refused_write_cause

# module -> the console script that runs it (set by study.cli): usage lines name what the user typed
SCRIPT_NAMES: dict[str, str] = {}


def program_name(module: str) -> str:
    """How the user called a command, for its usage lines: ``python -m MODULE`` or its console
    script (``rnmt-study run``)."""
    return SCRIPT_NAMES.get(module, f"python -m {module}")


def package_version() -> str:
    """The installed package's version (pyproject.toml's), or say that it is not installed."""
    # importlib.metadata loads only when a version is asked for
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rnmt-study")
    except PackageNotFoundError:
        return "(not installed: pip install -e .)"


def command_parser(module: str, **options) -> argparse.ArgumentParser:
    """The argument parser of the command ``python -m MODULE`` (or its console script): usage lines
    name what the user typed, and ``--version`` prints the package's version."""
    parser = argparse.ArgumentParser(prog=program_name(module), **options)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}",
                        help="print the version of rnmt-study and exit")
    return parser


def run_main(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        return main(argv)
    except UserError as err:
        if debug:
            raise
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG and not debug:  # a name the file system refuses (over 255 bytes)
            print(f"error: {err.filename or 'a path'}: {err.strerror}; choose a shorter name", file=sys.stderr)
            return 2
        if debug or err.errno not in STORAGE_ERRNOS:
            raise
        fix = "free some space" if refused_write_cause(err) == "full" else "make it writable"
        print(f"error: cannot write {err.filename or 'a file'} ({err.strerror}); {fix} and run the command again",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def exit_without_teardown(code: int) -> NoReturn:
    """End a finished command's process at once. Tearing down the interpreter's modules (torch,
    Ray, MLflow, pandas) takes about 2 s and does nothing a finished command needs: its files are
    closed and Ray is shut down. The exit functions still run and the output is flushed. Only for
    ``if __name__ == "__main__"``: it would end a test run that called ``main`` itself."""
    atexit._run_exitfuncs()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
