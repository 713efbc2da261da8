"""When each claim of a study was declared, kept in its ``study.json`` so that a claims table can say
truthfully whether a claim came before the study's results.

A claim is declared when it first enters a study: when ``study.run`` starts the study or continues it
(``--resume``, ``--extend``) with the claim in the study file, or when ``python -m study.table
STUDY_FILE.yaml`` takes it from the file into the stored study. Its declaration is the hash of the
claim as parsed (``ClaimSpec``: the YAML's layout and comments do not count) and the time, under
``claims_declared``: claim name -> [{"hash", "declared"}, ...], one entry per version of the claim, the
first time each was seen. A claim whose text changes is a new declaration. A claim counts as declared
before the results when its current version was declared no later than the study's first run started
(``study.json``'s ``started``, kept across every later run), before any trial of it trained.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time

from study.spec.claims import ClaimSpec
from study.store.record_validation import BadRecord, check_field, check_mapping

KEY = "claims_declared"  # the study.json field
BEFORE, AFTER, UNRECORDED = "before the trials", "after the results", "not recorded"
TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")  # study.json's times: time.strftime("%Y-%m-%d %H:%M:%S")


def now() -> str:
    """The time as study.json keeps it (``started``, ``stopped``)."""
    return time.strftime("%Y-%m-%d %H:%M:%S")


# keys a claim gained after declarations were first recorded: left out while unset, so a claim declared before
# keeps its hash
LATER_KEYS = ("value_of",)


def claim_hash(claim: ClaimSpec) -> str:
    """The claim as parsed, hashed: the same claim written differently has the same hash."""
    parsed = dataclasses.asdict(claim)
    for key in LATER_KEYS:
        if parsed.get(key) is None:
            parsed.pop(key, None)
    text = json.dumps(parsed, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def declarations(state: dict | None, where: str) -> dict[str, list[dict]]:
    """The stored declarations of a study.json (empty without any), each checked: a record is input."""
    stored = (state or {}).get(KEY)
    if stored is None:
        return {}
    fix = "move study.json's claims_declared away: the claims then read 'not recorded'"
    check_mapping(stored, f"{where}: '{KEY}'", fix)
    for name, versions in stored.items():
        if not isinstance(versions, list) or not versions:
            raise BadRecord(f"{where}: '{KEY}.{name}' is not a list of declarations; {fix}")
        for index, version in enumerate(versions):
            place = f"{where}: '{KEY}.{name}[{index}]'"
            check_mapping(version, place, fix)
            check_field(version, "hash", (str,), place, fix)
            if not TIME.fullmatch(str(check_field(version, "declared", (str,), place, fix))):
                raise BadRecord(f"{place}: 'declared' is {version['declared']!r}, not a time YYYY-MM-DD HH:MM:SS; {fix}")
    return stored


def with_declarations(state: dict | None, claims: list[ClaimSpec], at: str, where: str) -> dict[str, list[dict]]:
    """The declarations of ``state`` with every claim of ``claims`` whose current version is new declared ``at``;
    the versions of claims the study no longer has are kept (their history)."""
    stored = {name: list(versions) for name, versions in declarations(state, where).items()}
    for claim in claims:
        versions = stored.setdefault(claim.name, [])
        if claim_hash(claim) not in {version["hash"] for version in versions}:
            versions.append({"hash": claim_hash(claim), "declared": at})
    return stored


def declared_column(state: dict | None, claims: list[ClaimSpec], where: str) -> dict[str, str]:
    """Claim name -> BEFORE, AFTER or UNRECORDED: whether the claim's current version was declared no later
    than the study's first run started."""
    stored, started = declarations(state, where), (state or {}).get("started")
    out = {}
    for claim in claims:
        found = [v["declared"] for v in stored.get(claim.name, []) if v["hash"] == claim_hash(claim)]
        if not found or not isinstance(started, str) or not TIME.fullmatch(started):
            out[claim.name] = UNRECORDED
        else:
            out[claim.name] = BEFORE if found[0] <= started else AFTER
    return out
