"""Are an ablation study's drops additive? Each combined ablation against the sum of its single ones.

The SR-NMT paper (Di Gangi & Federico 2018, Table 4) reads its ablation as additive: "when two or
three components are removed at once, the drop in performance is roughly the sum of the drops
caused by the single components". For every row of an ``ablate`` study that switches off two or
more components, this measures

    departure = Δ(combined) - (Δ(single 1) + ... + Δ(single k)),

each Δ a row's mean test BLEU over its seeds minus the full model's: 0 when the drops add up,
below 0 when removing the components together costs more than the sum of their single drops,
above 0 when it costs less. The departure is the contrast

    mean(combined) - mean(single 1) - ... - mean(single k) + (k - 1) mean(full model)

of k + 2 rows, so it gets the same two intervals as a Δ in the study's table
(``study.analysis.significance``): over the rows' seeds (Welch-Satterthwaite) and over the test set (the
paired bootstrap, every row resampled on the same sentences, the seeds that all k + 2 rows
finished concatenated seed by seed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from nmt.fileio import write_lines
from study.analysis.significance import PairedBootstrap, contrast_bootstrap_stats, contrast_seed_interval, nan_bootstrap
from study.analysis.tables import (
    STILL_IMPROVING,
    StudyTable,
    format_interval,
    format_number,
    format_p,
    latex_table,
    markdown_table,
    paired_seeds,
    translation_stats,
)
from study.spec.expansion import expand
from study.spec.model import StudySpec

FILES = ("additivity.md", "additivity.csv", "additivity.tex")


@dataclass
class Additivity:
    title: str
    reference: str  # the full model's label
    rows: pd.DataFrame  # one row per combined ablation (numeric)

    def frame(self) -> pd.DataFrame:
        """The shown table: formatted cells, one row per combined ablation."""
        out = []
        for row in self.rows.to_dict("records"):
            mark = f" {STILL_IMPROVING}" if row["still_improving"] and not math.isnan(row["departure"]) else ""
            out.append({
                "Model": row["label"],
                "single ablations": ", ".join(row["singles"]),
                "Δ": format_number(row["delta"], signed=True),
                "sum of single Δ": format_number(row["singles_delta_sum"], signed=True),
                "departure": format_number(row["departure"], signed=True) + mark,
                "CI (seeds)": format_interval(row["seeds_ci_low"], row["seeds_ci_high"]),
                "CI (bootstrap)": format_interval(row["ci_low"], row["ci_high"]),
                "p": format_p(row["p_value"]),
                "status": row["status"],
            })
        return pd.DataFrame(out)

    def notes(self) -> list[str]:
        notes = [f"departure = Δ of the combined ablation minus the sum of its single ablations' Δ, each Δ "
                 f"against {self.reference} (mean test BLEU over the seeds): 0 when the drops add up, below 0 "
                 "when removing the components together costs more than the sum of their single drops, above 0 "
                 "when it costs less. CI (seeds): 95% Welch-Satterthwaite interval over every row's seeds. "
                 "CI (bootstrap) and p: paired bootstrap over the test sentences (1000 resamples, the same "
                 "sentences for every row; the seeds all its rows finished, concatenated), around the departure "
                 "of those concatenated translations' corpus BLEU (bootstrap_departure in additivity.csv), which "
                 "can differ from the departure of the seeds' mean BLEU shown here."]
        improving = [row["label"] for row in self.rows.to_dict("records")
                     if row["still_improving"] and not math.isnan(row["departure"])]
        if improving:
            notes.append(f"{STILL_IMPROVING} measured from a row that was still improving when its training ended "
                         f"(marked {STILL_IMPROVING} in table.md): {', '.join(improving)}. Not a converged result.")
        if self.rows.attrs.get("translation_note"):
            notes.append(self.rows.attrs["translation_note"])
        return notes

    def markdown(self) -> str:
        return markdown_table(self.frame(), self.title, self.notes())

    def latex(self, label: str = "") -> str:
        return latex_table(self.frame(), self.title, self.notes(), label)


def removed_components(spec: StudySpec) -> dict[str, tuple[str, ...]]:
    """Each row's label -> the components it switches off, in the order of ``ablate``."""
    order = list(spec.fields.ablate or [])
    return {trial.label: tuple(key for key in order if key in trial.changes) for trial in expand(spec)}


def has_additivity(spec: StudySpec) -> bool:
    """Whether the study gets an additivity table: an ablation of two or more components."""
    return spec.kind == "ablation" and len(spec.fields.ablate or []) >= 2


def departure_contrasts(spec: StudySpec, reference: str) -> dict[str, tuple[list[str], dict[str, float]]]:
    """Each combined ablation's label -> (its single ablations' labels, the weights of its departure
    ``mean(combined) - sum(mean(single)) + (k - 1) mean(full model)`` by row label)."""
    removed = removed_components(spec)
    single = {components[0]: label for label, components in removed.items() if len(components) == 1}
    contrasts = {}
    for label, components in removed.items():
        if len(components) >= 2:
            singles = [single[key] for key in components]
            contrasts[label] = (singles, {label: 1.0, **{name: -1.0 for name in singles},
                                          reference: float(len(singles) - 1)})
    return contrasts


def ablation_additivity(spec: StudySpec, table: StudyTable, records: list[dict],
                        references_text: list[str] | None) -> Additivity | None:
    """The additivity table of an ablation study with two or more components; None for any other study."""
    if not has_additivity(spec) or table.reference is None:
        return None
    table_rows = {row["label"]: row for row in table.rows.to_dict("records")}
    stats_cache: dict[str, np.ndarray | None] = {}
    rows = []
    for label, (singles, weights) in departure_contrasts(spec, table.reference).items():
        rows.append(_measure(label, singles, table.reference, weights, table_rows,
                             contrast_test(weights, records, references_text, stats_cache)))
    frame = pd.DataFrame(rows)
    if table.rows.attrs.get("translation_note"):  # the same files leave this table's bootstrap blank
        frame.attrs["translation_note"] = table.rows.attrs["translation_note"]
    return Additivity(f"Are the drops additive? {table.title}", table.reference, frame)


def _measure(label: str, singles: list[str], reference: str, weights: dict[str, float], table_rows: dict[str, dict],
             contrast_test: tuple[int, PairedBootstrap]) -> dict:
    mean = {name: table_rows[name]["bleu_mean"] for name in weights}
    delta = mean[label] - mean[reference]
    singles_sum = sum(mean[name] - mean[reference] for name in singles)
    seeds_low, seeds_high = contrast_seed_interval(
        [(weight, mean[name], table_rows[name]["bleu_std"], int(table_rows[name]["n"])) for name, weight in weights.items()])
    seeds, test = contrast_test
    involved = [table_rows[name] for name in weights]
    # a row not finished, or with seeds that diverged or failed: its own table status says which
    incomplete = [f"{row['label']}: {row['status']}" for row in involved if row["n"] < row["seeds"]]
    return {"label": label, "singles": singles, "components": len(singles), "delta": delta,
            "singles_delta_sum": singles_sum, "departure": delta - singles_sum,
            "seeds_ci_low": seeds_low, "seeds_ci_high": seeds_high, "bootstrap_seeds": seeds,
            "bootstrap_departure": test.delta, "ci_low": test.ci_low, "ci_high": test.ci_high,
            "p_value": test.p_value, "still_improving": any(row["still_improving"] for row in involved),
            "status": "ok" if not incomplete else "; ".join(incomplete)}


def contrast_test(weights: dict[str, float], records: list[dict], references_text: list[str] | None,
                  cache: dict[str, np.ndarray | None], seeds_together: bool = False) -> tuple[int, PairedBootstrap]:
    """The paired bootstrap of the weighted rows over the seeds all of them finished, and how many
    seeds that is; NaN without the test references or with a translation of another length.
    The tables concatenate a row's seeds and resample each seed's translation of a sentence on its
    own; ``seeds_together`` draws a test sentence with every seed's translation of it instead (BLEU's
    statistics add up, so a sentence's seeds sum to one system sentence with the same corpus BLEU)."""
    if references_text is None:
        return 0, nan_bootstrap()
    paired = paired_seeds([[r for r in records if r["label"] == name] for name in weights])
    if paired is None:
        return 0, nan_bootstrap()
    seeds, paths = paired
    systems = []
    for found in paths:
        parts = [translation_stats(found[seed], references_text, cache) for seed in seeds]
        if not parts or any(part is None for part in parts):
            return 0, nan_bootstrap()
        systems.append(np.sum(parts, axis=0) if seeds_together else np.concatenate(parts))
    return len(seeds), contrast_bootstrap_stats(systems, list(weights.values()))


def export_additivity(additivity: Additivity, directory: Path) -> list[Path]:
    """additivity.md, additivity.csv and additivity.tex (label tab:<study>-additivity) in the study's directory."""
    paths = [directory / name for name in FILES]
    write_lines(paths[0], additivity.markdown().splitlines())
    raw = additivity.rows.assign(singles=additivity.rows["singles"].map(" | ".join))
    write_lines(paths[1], raw.to_csv(index=False).splitlines())
    write_lines(paths[2], additivity.latex(f"tab:{directory.name}-additivity").splitlines())
    return paths
