"""Shared command-line behaviour: bad input is one line on stderr and exit 2."""

from __future__ import annotations

import sys
from collections.abc import Callable

from nmt.errors import UserError


def run_main(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        return main(argv)
    except UserError as err:
        if debug:
            raise
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
