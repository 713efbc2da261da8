"""Was a trial trained to a plateau? The test of ``nmt.plateau`` (the one the trainer's
``train.early_stop: plateau`` stops by) applied to each stored trial's validation curve, and the rule
as the notes under tables and claims state it."""

from __future__ import annotations

import pandas as pd

from nmt.config import config_from_dict
from nmt.plateau import ALPHA, MIN_EPOCHS, MIN_RISE, WINDOW, on_plateau, slope_test
from study.spec.model import StudySpec

__all__ = ["ALPHA", "MIN_EPOCHS", "MIN_RISE", "WINDOW", "on_plateau", "slope_test", "plateau_by_trial", "rule_text",
           "stopping_note", "STILL_IMPROVING"]

STILL_IMPROVING = "†"  # the mark of a row whose seeds were still improving when training ended


def plateau_by_trial(progress: pd.DataFrame | None, metric: str = "valid_bleu", mode: str = "max") -> dict[str, bool | None]:
    """Each trial key in a study's ``progress.csv`` -> ``on_plateau`` of its validation curve in
    ``metric`` (``mode`` "min": a falling score is the improving one). Empty without progress."""
    if progress is None or not len(progress) or metric not in progress.columns:
        return {}
    sign = -1.0 if mode == "min" else 1.0
    out = {}
    for key, curve in progress.sort_values("epoch").groupby("key", sort=False):
        scores = [sign * float(v) for v in pd.to_numeric(curve[metric], errors="coerce") if not pd.isna(v)]
        out[str(key)] = on_plateau(scores)
    return out


def stopping_note(spec: StudySpec) -> str | None:
    """The note under the table of a study whose trials stop by the plateau rule (``budget.stop: plateau``),
    None for any other rule."""
    train = config_from_dict(spec.base_tree(), source=spec.source).train
    if train.early_stop != "plateau":
        return None
    metric = "valid BLEU" if train.valid_metric == "bleu" else "valid perplexity"
    start = f"after at least {train.min_epochs} epochs, " if train.min_epochs else ""
    return (f"Stopping rule (budget.stop: plateau): each trial trained until its {metric} was {rule_text()}, "
            f"{start}at most {train.max_epochs} epochs; a row still rising at that cap is marked {STILL_IMPROVING}.")


def rule_text() -> str:
    """The rule in one sentence, for the notes under tables and claims."""
    return (f"on a plateau: the least-squares slope of a trial's last {WINDOW} validation scores is not significantly "
            f"above 0 (one-sided t test, {ALPHA:.0%}) or its fitted rise over them is under {MIN_RISE} points")
