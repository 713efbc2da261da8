"""Records read back from a results directory are input: checked like a study file before the
platform acts on them.

A results directory is shared, copied, edited by hand and damaged by crashes, so a record that
the platform wrote may not be what it wrote. ``read_json`` reads one JSON record strictly: a
regular file (never a link or a FIFO), of bounded size, UTF-8, finite numbers only (no NaN or
Infinity, no 400-digit integers), bounded nesting. The ``check_*`` functions check the fields
each kind of record must have. A bad record raises ``BadRecord``: one line naming the file, the
field and what is wrong with it.

A file cut short or emptied by a crash (not JSON at all) is told apart as ``UnreadableRecord``:
the trial store treats it as missing, since the trial writes it again (``study.store.trial_store``).
"""

from __future__ import annotations

import json
import math
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from nmt.errors import UserError
from study.spec.metrics import checked_metrics

MAX_BYTES = 256 * 1024 * 1024  # far above any record the platform writes (a long history is a few MB)
MAX_DEPTH = 32  # a trial's config is about 4 levels deep
MAX_INT = 2**63  # an integer beyond this is no count, seed or size the platform writes
SHOWN_VALUE = 40


class BadRecord(UserError):
    """A record that is not what the platform writes (a bad type, a non-finite number, a link)."""


class UnreadableRecord(BadRecord):
    """A record that is not JSON at all: cut short or emptied by a crash, or not a record."""


class _Bad:
    """A value the parse hooks refused; found again with its place in the record by ``_walk``."""

    def __init__(self, problem: str):
        self.problem = problem


def _constant(name: str) -> _Bad:
    return _Bad(f"is {name}, not a finite number")


def _float(text: str) -> float | _Bad:
    value = float(text)
    return value if math.isfinite(value) else _Bad(f"is {text[:SHOWN_VALUE]}, not a finite number")


def _int(text: str) -> int | _Bad:
    digits = len(text.lstrip("-"))
    if digits > 19 or abs(int(text)) > MAX_INT:
        return _Bad(f"is an integer of {digits} digits, out of range")
    return int(text)


def read_json(path: Path, fix: str = "") -> object | None:
    """The JSON value in ``path`` (None when there is no such file), read strictly; ``fix`` ends
    the one-line error."""
    text = read_text(path, fix)
    return None if text is None else parse_json(text, str(path), fix)


def parse_json(text: str, where: str, fix: str = "") -> object:
    """``text`` as strict JSON (see the module docstring); errors name ``where`` and the field."""
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except RecursionError:
        raise BadRecord(_line(where, "is nested too deeply to be a record", fix)) from None
    except json.JSONDecodeError as err:
        raise UnreadableRecord(_line(where, f"is not valid JSON ({err.msg} at line {err.lineno})", fix)) from None
    depth, bad = _walk(value)
    if depth > MAX_DEPTH:
        raise BadRecord(_line(where, f"is nested {depth} levels deep, more than any record the platform writes", fix))
    if bad is not None:
        field, problem = bad
        raise BadRecord(_line(where, f"{field or 'the record'} {problem}", fix))
    return value


def _walk(value) -> tuple[int, tuple[str, str] | None]:
    """(nesting depth, counted no further than one past the limit; the first refused value as
    (its field, the problem) or None), without recursion."""
    deepest, bad, pending = 0, None, [(value, 1, "")]
    while pending:
        item, depth, field = pending.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            return depth, bad
        if isinstance(item, _Bad):
            bad = bad or (f"'{field}'" if field else "", item.problem)
        elif isinstance(item, dict):
            pending.extend((child, depth + 1, f"{field}.{key}" if field else str(key))
                           for key, child in reversed(item.items()))
        elif isinstance(item, list):
            pending.extend((child, depth + 1, f"{field}[{index}]") for index, child in reversed(list(enumerate(item))))
    return deepest, bad


# --- fields of each kind of record ---------------------------------------------------------


def check_mapping(value: object, where: str, fix: str = "") -> dict:
    if not isinstance(value, dict):
        raise BadRecord(_line(where, f"holds {_shown(value)}, not a JSON object", fix))
    return value


@dataclass(frozen=True)
class Bound:
    """A number's range in a record: at least ``minimum``, at most ``maximum`` (None: no upper bound) and,
    with ``whole``, a whole number (epochs are stored as 3 or 3.0)."""

    minimum: float
    whole: bool = False
    maximum: float | None = None


NON_NEGATIVE = Bound(0)
# the registry's record checks (study.spec.metrics) as bounds
METRIC_BOUNDS = {"number": None, "non-negative": NON_NEGATIVE, "non-negative whole": Bound(0, whole=True),
                 "correlation": Bound(-1, maximum=1)}


def check_field(record: dict, key: str, kinds: tuple[type, ...], where: str, fix: str = "", required: bool = True,
                bound: Bound | None = None, prefix: str = "") -> object:
    """``record[key]`` checked to be one of ``kinds`` (bool is never an int or a float here) and within
    ``bound``; a missing optional field is None. ``prefix`` places the record in its file (``epochs[2].``)."""
    name = f"'{prefix}{key}'"
    if key not in record or (record[key] is None and not required):
        if required:
            raise BadRecord(_line(where, f"has no {name}", fix))
        return None
    value = record[key]
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        wanted = "a number" if kinds == NUMBER else " or ".join(_KIND_NAMES.get(kind, kind.__name__) for kind in kinds)
        raise BadRecord(_line(where, f"{name} is {_shown(value)}, not {wanted}", fix))
    if bound is not None and value < bound.minimum:
        raise BadRecord(_line(where, f"{name} is {_shown(value)}, below {bound.minimum:g}", fix))
    if bound is not None and bound.maximum is not None and value > bound.maximum:
        raise BadRecord(_line(where, f"{name} is {_shown(value)}, above {bound.maximum:g}", fix))
    if bound is not None and bound.whole and value != int(value):
        raise BadRecord(_line(where, f"{name} is {_shown(value)}, not a whole number", fix))
    return value


_KIND_NAMES = {int: "an integer", float: "a number", str: "a string", dict: "a mapping", list: "a list",
               bool: "true or false", type(None): "null"}
SCALAR = (int, float, str, bool, type(None))
NUMBER = (int, float)


def check_scalars(record: dict, where: str, fix: str = "", skip: tuple[str, ...] = (), prefix: str = "") -> None:
    """Every value of a flat metrics record is a scalar (numbers finite: read_json saw to that)."""
    for key, value in record.items():
        if key not in skip and not isinstance(value, SCALAR):
            raise BadRecord(_line(where, f"'{prefix}{key}' is {_shown(value)}, not a number or a string", fix))


def check_metrics(record: dict, where: str, fix: str = "", prefix: str = "") -> dict:
    """A trial's metrics after an epoch, or when it finished (``history``: its epochs)."""
    check_scalars(record, where, fix, skip=("history",), prefix=prefix)
    # an epoch's number, fractional when a step or token budget ended a trial within it (2.5)
    check_field(record, "epoch", NUMBER, where, fix, required=False, bound=NON_NEGATIVE, prefix=prefix)
    for metric in checked_metrics():  # each as the registry (study.spec.metrics) says
        check_field(record, metric.name, NUMBER, where, fix, required=False, bound=METRIC_BOUNDS[metric.record_check],
                    prefix=prefix)
    check_field(record, "status", (str,), where, fix, required=False, prefix=prefix)
    if "history" in record:
        check_history(record["history"], where, fix, prefix=f"{prefix}history")
    return record


def check_history(epochs: object, where: str, fix: str = "", prefix: str = "epochs") -> list[dict]:
    """A list of epoch records (history.json's ``epochs``, metrics.json's ``history``)."""
    if not isinstance(epochs, list):
        raise BadRecord(_line(where, f"'{prefix}' is {_shown(epochs)}, not a list of epochs", fix))
    for index, entry in enumerate(epochs):
        place = f"{prefix}[{index}]"
        if not isinstance(entry, dict):
            raise BadRecord(_line(where, f"'{place}' is {_shown(entry)}, not an epoch's record", fix))
        check_field(entry, "epoch", NUMBER, where, fix, bound=NON_NEGATIVE, prefix=f"{place}.")
        check_metrics(entry, where, fix, prefix=f"{place}.")
    return epochs


def check_identity(record: dict, where: str, fix: str = "") -> dict:
    """trial.json: who a trial is."""
    check_field(record, "label", (str,), where, fix)
    check_field(record, "row", (int,), where, fix, bound=NON_NEGATIVE)
    check_field(record, "seed", (int,), where, fix)
    check_field(record, "config", (dict,), where, fix)
    check_field(record, "params", (dict,), where, fix, required=False)
    check_field(record, "sample", (int,), where, fix, required=False, bound=NON_NEGATIVE)
    for key in ("key", "node_id", "cpu"):
        check_field(record, key, (str,), where, fix, required=False)
    return record


def check_verdict(record: dict, where: str, fix: str = "") -> dict:
    """status.json: what the driver recorded when Ray gave up on a trial."""
    check_field(record, "status", (str,), where, fix)
    check_field(record, "error", (str,), where, fix, required=False)
    return record


def _shown(value: object) -> str:
    if isinstance(value, (dict, list)):
        return f"a {'mapping' if isinstance(value, dict) else 'list'}"
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= SHOWN_VALUE else text[:SHOWN_VALUE] + "..."


def _line(where: object, problem: str, fix: str) -> str:
    return f"{where}: {problem}" + (f"; {fix}" if fix else "")


# --- the copy of the records beside the tables (trials.jsonl) and the files they name ------

TRIAL_KEY = re.compile(r"[0-9a-f]{12}")  # study.spec.portable.config_key: the first 12 hex digits of a SHA-256


def read_jsonl(path: Path, fix: str = "") -> list[tuple[int, object]]:
    """(line number, JSON value) of each record of a file of one record a line (``trials.jsonl``),
    each read strictly; a line cut short is an ``UnreadableRecord`` naming its number."""
    path = Path(path)
    text = read_text(path, fix)
    if text is None:
        return []
    return [(number, parse_json(line, f"{path} line {number}", fix))
            for number, line in enumerate(text.splitlines(), 1) if line.strip()]


def regular_file(path: Path, fix: str = "") -> bool:
    """Whether a file the platform wrote is there (False when missing); a link or anything but a
    regular file in its place is a ``BadRecord``."""
    try:
        mode = Path(path).lstat().st_mode
    except FileNotFoundError:
        return False
    except OSError as err:
        raise BadRecord(_line(path, f"cannot be read ({err.strerror})", fix)) from None
    if stat.S_ISLNK(mode):
        raise BadRecord(_line(path, "is a symbolic link, not a file the platform wrote (links are not followed)", fix))
    if not stat.S_ISREG(mode):
        raise BadRecord(_line(path, "is not a regular file", fix))
    return True


def read_text(path: Path, fix: str = "", limit: int = MAX_BYTES) -> str | None:
    """A stored text file (a record, test.ref, a hypothesis file), None when it is missing; a
    link, a FIFO, a folder or a file far too large is a ``BadRecord``, never opened."""
    path = Path(path)
    if not regular_file(path, fix):
        return None
    try:
        size = path.lstat().st_size
        if size > limit:
            raise BadRecord(_line(path, f"is {size:,} bytes, far larger than any file the platform writes", fix))
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise UnreadableRecord(_line(path, "is not UTF-8 text", fix)) from None
    except OSError as err:
        raise BadRecord(_line(path, f"cannot be read ({err.strerror})", fix)) from None


def check_saved_record(record: object, where: str, fix: str = "") -> dict:
    """One line of trials.jsonl: a trial's identity, status and metrics, and its hypothesis file
    (``hyps/<key>.hyp``, nothing else: a record never names a path of its own choosing)."""
    record = check_mapping(record, where, fix)
    key = check_field(record, "key", (str,), where, fix)
    if not TRIAL_KEY.fullmatch(key):
        raise BadRecord(_line(where, f"'key' is {_shown(key)}, not a trial key (12 hex digits)", fix))
    check_identity(record, where, fix)
    check_field(record, "status", (str,), where, fix)
    metrics = check_field(record, "metrics", (dict,), where, fix)
    check_metrics(metrics, where, fix, prefix="metrics.")
    for name in ("error", "node"):
        check_field(record, name, (str,), where, fix, required=False)
    hyp = check_field(record, "hyp_file", (str,), where, fix, required=False)
    if hyp is not None and hyp != f"hyps/{key}.hyp":
        raise BadRecord(_line(where, f"'hyp_file' is {_shown(hyp)}, not hyps/{key}.hyp", fix))
    return record


def check_state(state: object, where: str, fix: str = "") -> dict:
    """study.json: a mapping whose ``spec`` (the effective study) is a mapping too."""
    state = check_mapping(state, where, fix)
    check_field(state, "spec", (dict,), where, fix)
    for name in ("status", "study", "command"):
        check_field(state, name, (str,), where, fix, required=False)
    return state
