"""The metric registry: every metric a trial reports, declared once, in ``METRICS``.

An entry (``Metric``) declares:

- ``name``: the key in a trial's records (an epoch's report, ``metrics.json``), which is also its
  name in MLflow;
- ``known``: ``epoch`` if every epoch's report carries it (a scheduler can act on it), ``end`` if
  only a finished trial's record does;
- ``direction``: whether higher or lower is better, or neither (a count, a time, a setting);
- ``unit``;
- ``logged``: how a trial's MLflow child run logs it: every epoch (step = epoch), once at the end,
  or not as a metric (the finished record's other values become tags);
- ``objective`` and ``claim``: whether a study's ``metric:`` may name it and a claim may compare
  it, as its place in the list an error message shows (None: it may not);
- ``record_check``: how ``study.store.record_validation`` checks it in a record read back;
- ``absolute``: whether its scale is the same on any corpus and model (a correlation), so that a claim
  may compare a row's own value with the paper's (``value_of``);
- ``timed``: whether it is a timing the trial took while it trained, which measures the machine (its CPU
  type, what else ran) as much as the model: a claim compares it only across seeds timed on one CPU type;
- ``per_trial``: whether trials.csv has a column of it, and ``column``: its column in the study's
  table (header, format, which of a row's trials its value summarises, the parent run's per-row
  MLflow name).

The helpers below give each reader the tuple it used to keep for itself, in the same order (the
per-epoch MLflow names excepted, which are only tested for membership):
``study.spec.validation`` (a study's ``metric:``), ``study.spec.claims``,
``study.store.record_validation``, ``study.execution.tracking`` and ``study.analysis.tables``.

Adding a metric is one entry here; the trainer (``nmt/trainer.py``, or a unit's measurement in
``nmt/measures.py``) must report it under that name, and the docs that list metrics by name
(docs/studies.md, claims.md, tracking.md) are kept by hand. A new table column is the entry's
``column``, and two more steps that are not code: the committed tables in ``results/reference/`` gain
the column, so rebuild them (``python -m study.table NAME --results results/reference``;
tests/study/analysis/test_committed_results.py compares them byte for byte), and
docs/reading-tables.md says what it shows. Not declared here: the table's test BLEU statistics (mean, std, intervals, Δ, p), which
``tables.py`` computes, and the per-trial columns of how long a trial trained (epochs, best epoch,
steps, training tokens), which ``tables.trials_frame`` writes after the metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Known = Literal["epoch", "end"]
Direction = Literal["higher", "lower", ""]
Logged = Literal["epoch", "end", ""]
# "scalar": any number or string (check_scalars, which every key passes); "number": an int or
# float; "non-negative": a number >= 0; "non-negative whole": a whole number >= 0
# "correlation": a number from -1 to 1
RecordCheck = Literal["scalar", "number", "non-negative", "non-negative whole", "correlation"]
# "2 decimals": 24.85; "0 decimals": 15857; "count": 831392 as 831k, 1.2e6 as 1.20M
TableFormat = Literal["2 decimals", "0 decimals", "count"]
# which of a row's trials its value is the mean of: "scored" (the seeds in its BLEU statistics),
# "measured" (every trial that trained, diverged and stopped ones too), "scored, else measured";
# "first built": the first trial that built its model (the same for every seed: the model's size)
RowSummary = Literal["scored", "measured", "scored, else measured", "first built"]


@dataclass(frozen=True)
class Column:
    """A metric's column in a study's table: one value per row, summarising its trials."""

    header: str  # as shown: table.md, table.tex, the HTML report, study.compare
    key: str  # the rows' column in table.csv
    shown_as: TableFormat
    summary: RowSummary
    row_logged: str = ""  # the parent MLflow run's per-row metric, "<row_logged>/<row label>"; "" for none


@dataclass(frozen=True)
class Metric:
    name: str
    known: Known
    direction: Direction
    unit: str
    logged: Logged
    objective: int | None = None  # place among the metrics a study's `metric:` may name
    claim: int | None = None  # place among the metrics a claim may compare
    record_check: RecordCheck = "number"
    per_trial: bool = False  # a column of trials.csv
    absolute: bool = False  # on a scale that does not depend on corpus or model size: a claim may judge a row's own value
    timed: bool = False  # the trial's own timing: comparable only between seeds timed on one CPU type
    trials_fallback: str = ""  # the key trials.csv shows when a record lacks this one (older records)
    column: Column | None = None


# The order is that of the table's columns, trials.csv's columns and MLflow's logging; the lists
# that error messages show follow `objective` and `claim` instead.
METRICS = (
    Metric("test_bleu", "end", "higher", "BLEU", "end", objective=7, claim=1, per_trial=True),
    Metric("valid_bleu", "epoch", "higher", "BLEU", "epoch", objective=1, claim=3, per_trial=True,
           trials_fallback="best_valid_bleu",
           column=Column("valid BLEU", "valid_bleu", "2 decimals", "scored, else measured")),
    Metric("best_valid_bleu", "epoch", "higher", "BLEU", "epoch", objective=6, record_check="scalar"),
    Metric("test_chrf", "end", "higher", "chrF", "end", objective=8, claim=2, per_trial=True,
           column=Column("chrF", "chrf", "2 decimals", "scored", row_logged="chrf")),
    Metric("valid_ppl", "epoch", "lower", "perplexity", "epoch", objective=2, record_check="scalar"),
    Metric("train_loss", "epoch", "lower", "loss per target token", "epoch", objective=3, record_check="scalar"),
    Metric("train_ppl", "epoch", "lower", "perplexity", "epoch", objective=4, record_check="scalar"),
    Metric("epochs", "end", "", "epochs", "end", record_check="non-negative"),
    Metric("best_epoch", "epoch", "", "epoch", "end", record_check="non-negative whole"),
    Metric("steps", "epoch", "", "optimizer updates", "epoch", record_check="non-negative whole"),
    Metric("train_tokens", "epoch", "", "target tokens", "epoch", record_check="scalar"),
    Metric("params", "end", "lower", "parameters", "end", objective=10, claim=4, per_trial=True,
           column=Column("params", "params", "count", "first built")),
    Metric("weight_matrices", "end", "lower", "weight matrices per recurrent unit", "end", objective=11, claim=5,
           record_check="scalar", per_trial=True,
           column=Column("WM", "weight_matrices", "0 decimals", "first built")),
    Metric("train_seconds", "end", "", "s", "end"),
    Metric("elapsed_seconds", "end", "", "s", ""),
    Metric("elapsed_s", "epoch", "", "s", "epoch", record_check="scalar"),
    Metric("train_tokens_per_s", "epoch", "higher", "target tokens/s", "epoch", objective=5, claim=6, per_trial=True,
           timed=True, column=Column("train tok/s", "train_tokens_per_s", "0 decimals", "measured",
                         row_logged="train_tokens_per_s")),
    Metric("decode_words_per_s", "end", "higher", "words/s", "end", objective=9, claim=7, per_trial=True, timed=True,
           column=Column("decode w/s", "decode_words_per_s", "0 decimals", "scored")),
    Metric("lr", "epoch", "", "learning rate", "epoch", record_check="scalar"),
    # measurements of the trained model (nmt.measures), taken only by the units that have them
    Metric("atr_gate_r", "end", "", "Pearson r", "end", claim=8, record_check="correlation", absolute=True),
    Metric("atr_gate_r_token_means", "end", "", "Pearson r", "end", claim=9, record_check="correlation",
           absolute=True),
    Metric("grad_norm_mean", "epoch", "", "gradient norm", "epoch", record_check="scalar"),
    Metric("grad_norm_max", "epoch", "", "gradient norm", "epoch", record_check="scalar"),
    Metric("clipped_share", "epoch", "", "share of steps", "epoch", record_check="scalar"),
)

# the table's test BLEU statistics, computed by study.analysis.tables rather than summarised from
# one metric, and the parent run's per-row name of each (logged before the metrics' columns)
BLEU_ROW_LOGGED = {"bleu_mean": "bleu", "bleu_std": "bleu_std", "delta": "delta"}


def epoch_metrics() -> tuple[str, ...]:
    """The metrics a study may optimise that every epoch reports (the only ones asha can compare)."""
    return _objectives("epoch")


def final_metrics() -> tuple[str, ...]:
    """The metrics a study may optimise that are known only when a trial ends."""
    return _objectives("end")


def _objectives(known: Known) -> tuple[str, ...]:
    chosen = [metric for metric in METRICS if metric.objective is not None and metric.known == known]
    return tuple(metric.name for metric in sorted(chosen, key=lambda metric: metric.objective))


def claim_metrics() -> tuple[str, ...]:
    """The metrics of a finished trial a claim may compare."""
    chosen = [metric for metric in METRICS if metric.claim is not None]
    return tuple(metric.name for metric in sorted(chosen, key=lambda metric: metric.claim))


def logged_each_epoch() -> tuple[str, ...]:
    """What a trial's MLflow child run logs every epoch (step = epoch): its learning curves."""
    return tuple(metric.name for metric in METRICS if metric.logged == "epoch")


def logged_at_end() -> tuple[str, ...]:
    """What a trial's MLflow child run logs once when the trial ends, in this order."""
    return tuple(metric.name for metric in METRICS if metric.logged == "end")


def row_logged() -> dict[str, str]:
    """The parent run's per-row metrics: the table's column -> MLflow name, in logging order."""
    return {**BLEU_ROW_LOGGED, **{metric.column.key: metric.column.row_logged for metric in table_metrics()
                                  if metric.column.row_logged}}


def absolute_metrics() -> tuple[str, ...]:
    """The claim metrics a claim may judge by a row's own value (``value_of``), not resized by a score."""
    return tuple(name for name in claim_metrics() if next(m for m in METRICS if m.name == name).absolute)


def timed_metrics() -> tuple[str, ...]:
    """The claim metrics that are the trials' own timings (``timed``)."""
    return tuple(name for name in claim_metrics() if next(m for m in METRICS if m.name == name).timed)


def checked_metrics() -> tuple[Metric, ...]:
    """The metrics record validation checks beyond being a scalar."""
    return tuple(metric for metric in METRICS if metric.record_check != "scalar")


def per_trial_metrics() -> tuple[Metric, ...]:
    """The metrics trials.csv shows, one column each, in this order."""
    return tuple(metric for metric in METRICS if metric.per_trial)


def table_metrics() -> tuple[Metric, ...]:
    """The metrics with a column in the study's table, in column order."""
    return tuple(metric for metric in METRICS if metric.column is not None)
