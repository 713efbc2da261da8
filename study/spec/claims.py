"""The ``claims:`` section of a study file: what a paper says about the study's rows, declared
(ideally before the results; ``study.store.claim_declarations`` records when) so that the platform,
not the reader, turns the results into verdicts
(``study.analysis.claims``; the protocol is docs/claims.md).

Each claim names one comparison of the study's rows, the paper's value for it and what is
claimed::

    claims:
      - name: layer-norm
        says: removing layer norm lowers BLEU, by the least of the three components
        row: "- LayerNorm"             # this row's mean test BLEU minus `against`'s
        against: SR-NMT 4L             # default: table.reference
        claim: size                    # direction | size | no_difference | diverges
        paper: {value: -1.02, reference: 22.99, source: "Di Gangi & Federico 2018, Table 4"}

The comparison is exactly one of ``row`` (a difference, against ``against``), ``contrast`` (row
label -> weight, e.g. an additivity departure), ``slope`` (x value -> row label: the least-squares
slope of the rows' means over x), ``value_of`` (a row's own mean value of a metric whose scale is the
same on any corpus and model, e.g. a correlation: the paper's value is compared as it is) or, with
``claim: diverges``, ``row`` alone (the paper says it fails to converge). ``paper.reference`` is the
paper's score of the row that sizes the claim (``relative_to``, by default ``against``; none for
``value_of``): the paper's value as a fraction of it is compared with
ours as a fraction of our score of that row, never absolute BLEU across corpora. A
``no_difference`` claim needs ``margin``: the largest departure, as a fraction of that score, that
still counts as none, and ``margin_basis``: why, on grounds independent of the study's results.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal

from nmt.errors import ConfigError
from nmt.typed_config import build_dataclass, suggest
from study.spec.metrics import METRICS, absolute_metrics, claim_metrics

CLAIM_KINDS = ("direction", "size", "no_difference", "diverges")
CLAIM_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,47}")


@dataclass
class PaperValue:
    value: float | None = None  # the paper's difference, contrast or slope (BLEU; per unit of x for a slope)
    reference: float | None = None  # the paper's score of the row that sizes the claim (relative_to)
    source: str = ""  # paper and table, e.g. "Di Gangi & Federico 2018, Table 4"


@dataclass
class ClaimSpec:
    name: str = ""  # short identifier, unique in the study (claims.csv's key)
    says: str = ""  # the paper's claim in one line
    claim: Literal["direction", "size", "no_difference", "diverges"] = "size"
    metric: str = "test_bleu"  # the trial metric compared (params, train_tokens_per_s, ... for the papers' cost claims)
    row: str | None = None  # a difference: this row minus `against`; with claim: diverges, the row that fails
    against: str | None = None  # default: the study's table.reference
    contrast: dict | None = None  # row label -> weight
    slope: dict | None = None  # x value -> row label
    value_of: str | None = None  # a row whose own mean value (an absolute metric: a correlation) is compared
    relative_to: str | None = None  # the row whose score sizes the claim; default: against (slope: its first row)
    margin: float | None = None  # no_difference: the largest departure (fraction of relative_to's score) that is none
    margin_basis: str = ""  # no_difference: why that margin, on grounds that do not depend on the study's results
    paper: PaperValue = field(default_factory=PaperValue)

    def sizing_row(self, reference: str | None) -> str | None:
        """The row whose mean score the claim's relative size is a fraction of (None for ``value_of``: the
        paper's value is compared as it is)."""
        if self.value_of is not None:
            return None
        if self.relative_to:
            return self.relative_to
        if self.slope is not None:
            return str(next(iter(self.slope.values())))
        if self.contrast is not None:
            return reference
        return self.against or reference


def parse_claims(raw, source: str) -> list[ClaimSpec]:
    """The ``claims:`` list of a study file as typed claims, every key and type checked."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"{source}: claims: a list of claims (each a mapping with name, says, claim, paper and "
                          f"one of row, contrast, slope or value_of), got {type(raw).__name__}")
    claims = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise ConfigError(f"{source}: claims[{index}]: a claim is a mapping (name, says, claim, paper, row ...), "
                              f"got {item!r}")
        claims.append(build_dataclass(ClaimSpec, item, source, prefix=f"claims[{index}].", explicit=set()))
    return claims


def validate_claims(claims: list[ClaimSpec], labels: list[str], reference: str | None, kind: str, source: str,
                    row_cells: dict[str, str] | None = None) -> None:
    """Every claim well formed and about rows the study has (``row_cells``: each row's ``model.cell``, which
    a unit's own measurement needs); the first problem is one ConfigError line."""
    if claims and kind == "search":
        raise ConfigError(f"{source}: claims: a search study has no fixed rows to compare; declare claims in a grid "
                          f"or ablation study")
    seen: set[str] = set()
    for index, claim in enumerate(claims):
        def fail(part: str, why: str, key: str = f"claims[{index}]") -> None:
            raise ConfigError(f"{source}: {key}.{part}: {why}")

        if not CLAIM_NAME.fullmatch(claim.name or ""):
            fail("name", f"= {claim.name!r}: a short identifier (lower-case letters, digits, - and _), unique in the study")
        if claim.name in seen:
            fail("name", f"= {claim.name!r} is declared twice; give each claim its own name")
        seen.add(claim.name)
        if not claim.says.strip():
            fail("says", "missing; one line saying what the paper claims")
        allowed = claim_metrics()
        if claim.metric not in allowed:
            fail("metric", f"= {claim.metric!r}{suggest(claim.metric, list(allowed), '', quote=True)}; a claim "
                           f"compares one of {', '.join(allowed)}")
        if claim.metric in absolute_metrics() and claim.value_of is None:
            fail("metric", f"= {claim.metric!r} is a value on its own scale (a correlation), whose difference between rows "
                           f"no row's score can size; judge a row's own value with value_of: ROW")
        _validate_comparison(claim, labels, reference, fail)
        _validate_paper(claim, fail)
        if row_cells is not None:
            _validate_measured(claim, row_cells, reference, fail)


def _check_label(label, labels: list[str], part: str, fail) -> None:
    if str(label) not in labels:
        fail(part, f"{str(label)!r} is not a row of this study{suggest(str(label), labels, '', quote=True)}; "
                   f"rows: {', '.join(labels)}")


def _validate_comparison(claim: ClaimSpec, labels: list[str], reference: str | None, fail) -> None:
    given = [name for name in ("row", "contrast", "slope", "value_of") if getattr(claim, name) is not None]
    if claim.claim == "diverges":
        if given != ["row"]:
            fail("row", "a diverges claim names the one row the paper says fails to converge (row:, nothing else)")
        _check_label(claim.row, labels, "row", fail)
        return
    if len(given) != 1:
        fail("row", f"give exactly one of row (a difference), contrast (row -> weight), slope (x -> row) or value_of "
                    f"(a row's own value); got {', '.join(given) or 'none'}")
    if claim.value_of is not None:
        _validate_value_of(claim, labels, fail)
        return
    if claim.row is not None:
        _check_label(claim.row, labels, "row", fail)
        against = claim.against or reference
        if against is None:
            fail("against", "missing, and the study has no table.reference; name the row the difference is against")
        _check_label(against, labels, "against", fail)
        if against == claim.row:
            fail("against", f"is the claim's own row {claim.row!r}; a difference needs two rows")
    if claim.contrast is not None:
        if len(claim.contrast) < 2:
            fail("contrast", "needs two or more rows with their weights, e.g. {'- LN & MA': 1, '- LayerNorm': -1, ...}")
        for label, weight in claim.contrast.items():
            _check_label(label, labels, f"contrast.{label}", fail)
            if not (_is_number(weight) and SMALLEST <= abs(float(weight)) <= LARGEST):
                fail(f"contrast.{label}", f"= {weight!r}: a weight is a number from {SMALLEST:g} to {LARGEST:g} in size "
                                          f"(+1 and -1 for a difference)")
    if claim.slope is not None:
        _validate_slope(claim.slope, labels, fail)
    sizing = claim.sizing_row(reference)
    if sizing is None:
        fail("relative_to", "missing, and the study has no table.reference; name the row that sizes the claim")
    _check_label(sizing, labels, "relative_to", fail)
    if claim.claim == "no_difference":
        if claim.margin is None or not (0 < claim.margin < 1):
            fail("margin", f"= {claim.margin!r}: a no_difference claim needs the largest departure that still counts "
                           f"as none, as a fraction of {sizing!r}'s score (0 < margin < 1), e.g. margin: 0.02")
        if not claim.margin_basis.strip():
            fail("margin_basis", "missing; say in one line why the margin is what it is, on grounds that do not depend "
                                 "on this study's results (the paper's own tolerance, a pilot's seed spread, ...)")
    elif claim.margin is not None or claim.margin_basis:
        part = "margin" if claim.margin is not None else "margin_basis"
        fail(part, f"only a no_difference claim has a margin; this one is claim: {claim.claim}")


def _validate_slope(slope: dict, labels: list[str], fail) -> None:
    if len(slope) < 2:
        fail("slope", "needs two or more x values with their rows, e.g. {1: SR-NMT 1L, 2: SR-NMT 2L}")
    xs: dict[float, object] = {}
    for x, label in slope.items():
        # a number in YAML; a string of one once stored in study.json
        if not (_is_number(x) and abs(float(x)) <= LARGEST):
            fail(f"slope.{x}", f"an x value is a number of at most {LARGEST:g} in size (the rows' position on the "
                               f"axis, e.g. their depth)")
        if float(x) in xs:
            fail(f"slope.{x}", f"is the same x as slope.{xs[float(x)]}; give each x once")
        xs[float(x)] = x
        _check_label(label, labels, f"slope.{x}", fail)
    rows = [str(label) for label in slope.values()]
    twice = next((row for row in rows if rows.count(row) > 1), None)
    if twice is not None:
        fail("slope", f"names row {twice!r} at two x values; a slope runs through rows at different positions, "
                      f"each row once")


def _validate_value_of(claim: ClaimSpec, labels: list[str], fail) -> None:
    """A row's own value: a metric whose scale does not depend on corpus or model, judged by direction or
    size, with nothing that would resize it."""
    _check_label(claim.value_of, labels, "value_of", fail)
    absolute = absolute_metrics()
    if claim.metric not in absolute:
        fail("value_of", f"compares a row's own value, which only a metric on the same scale on any corpus and model "
                         f"allows ({', '.join(absolute)}); metric is {claim.metric!r}: compare two rows (row and "
                         f"against) instead")
    if claim.claim not in ("direction", "size"):
        fail("claim", f"= {claim.claim}: a value_of claim is direction (the paper's sign) or size (its sign and "
                      f"value); a no_difference margin is a fraction of a row's score, which value_of has none of")
    for part in ("relative_to", "against"):
        if getattr(claim, part) is not None:
            fail(part, f"a value_of claim judges one row's own value against the paper's as it is; leave {part} out")
    if claim.margin is not None or claim.margin_basis:
        fail("margin" if claim.margin is not None else "margin_basis", "only a no_difference claim has a margin")


def claim_rows(claim: ClaimSpec, reference: str | None) -> list[str]:
    """The rows a claim's comparison reads."""
    if claim.value_of is not None:
        return [claim.value_of]
    if claim.contrast is not None:
        return [str(label) for label in claim.contrast]
    if claim.slope is not None:
        return [str(label) for label in claim.slope.values()]
    return [claim.row] if claim.claim == "diverges" else [claim.row, claim.against or reference]


def _validate_measured(claim: ClaimSpec, row_cells: dict[str, str], reference: str | None, fail) -> None:
    """A unit's own measurement (nmt.measures) exists only in rows of that unit."""
    # function-level: nmt.measures imports torch, which reading a study file needs only here
    from nmt.measures import measured_cells

    cells = measured_cells(claim.metric)
    if not cells:
        return
    for label in claim_rows(claim, reference):
        if row_cells.get(label) not in cells:
            fail("metric", f"= {claim.metric!r} is measured only in trials of model.cell {' or '.join(cells)}; row "
                           f"{label!r} trains model.cell {row_cells.get(label)!r}: compare rows of that unit")


# the sizes a weight, an x value and a paper's value may have: far beyond any study's, and small enough that
# squares and sums of them stay finite in every statistic of the claims
SMALLEST, LARGEST = 1e-6, 1e6
# a paper's score of any claim's metric (BLEU, parameters, words a second), and how many times that score its
# comparison may be: a relative size beyond that is a typo, and would print as "+inf%" or hundreds of digits
LARGEST_SCORE, LARGEST_RATIO = 1e12, 1e3


def _is_number(value) -> bool:
    if isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _validate_paper(claim: ClaimSpec, fail) -> None:
    paper = claim.paper
    if not paper.source.strip():
        fail("paper.source", "missing; name the paper and table the value comes from")
    if claim.claim == "diverges":
        return
    if paper.value is None or not math.isfinite(paper.value):
        fail("paper.value", f"= {paper.value!r}: the paper's value of the comparison (its Δ, contrast or slope)")
    if claim.claim in ("direction", "size") and paper.value == 0:
        fail("paper.value", "is 0, which has no direction; use claim: no_difference for a claim of no change")
    if claim.value_of is not None:
        if paper.reference is not None:
            fail("paper.reference", f"= {paper.reference!r}: a value_of claim compares the paper's value as it is, "
                                    f"not as a fraction of a score; leave paper.reference out")
        correlation = next(m.record_check == "correlation" for m in METRICS if m.name == claim.metric)
        largest = 1.0 if correlation else LARGEST
        if abs(paper.value) > largest:
            bound = "a correlation lies in [-1, 1]" if correlation else f"at most {largest:g} in size"
            fail("paper.value", f"= {paper.value!r}: {bound}")
        return
    if paper.reference is None or not math.isfinite(paper.reference) or not 0 < paper.reference <= LARGEST_SCORE:
        fail("paper.reference", f"= {paper.reference!r}: the paper's score (BLEU > 0, or the claim's metric, at most "
                                f"{LARGEST_SCORE:g}) of the row that sizes the claim; relative sizes are compared, not "
                                f"BLEU across corpora")
    if abs(paper.value) > LARGEST_RATIO * paper.reference:
        fail("paper.value", f"= {paper.value!r} is {abs(paper.value) / paper.reference:.3g} times paper.reference "
                            f"{paper.reference!r}; a comparison is at most {LARGEST_RATIO:g} times the score that sizes "
                            f"it: check both numbers")
