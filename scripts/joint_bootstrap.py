"""How much the tables' pooling of seeds narrows the test-set intervals, study by study.

The study tables' paired bootstrap pools a row's 3 seeds: it resamples each seed's translation of
a sentence on its own, as if the pooled translations were 3,000 test sentences. Resampling the
1,000 test sentences instead, with every seed's translation of each drawn together, keeps the
seeds' translations of one sentence correlated. For each comparison this prints both 95%
intervals (the tables' test and resamples: study.analysis.significance.paired_bootstrap_stats) and the
ratio of their widths, then per study the range and median of the ratios and every comparison
whose two intervals fall on different sides of zero.

Each study compares every row with its table's reference row; the converged studies add the
comparisons results/REPORT.md makes between other rows. Contrasts of more than two rows follow,
resampled both ways alike (study.analysis.additivity.contrast_test): an ablation's departures from
additivity, and in depth_srnmt_m30k the least-squares slope of test BLEU over the depths of the
rows with 3 finished seeds (from 1L and from 2L, as scripts/depth_trend.py).
Run from the repository root, with the study names under results/reference/ (all of them when
none is given):

    python scripts/joint_bootstrap.py [STUDY ...]
"""

import pathlib
import statistics
import sys

from nmt.cli import run_main
from study.analysis.additivity import contrast_test, departure_contrasts, has_additivity
from study.analysis.significance import paired_bootstrap_stats, slope_weights
from study.analysis.stored_study import load_stored_study
from study.analysis.tables import finished_translations, paired_test, translation_stats

RESULTS = pathlib.Path("results/reference")
STUDIES = ["ablation_srnmt", "atr_gates", "cells", "context_gates", "depth_srnmt", "fsmn",
           "context_gates_m30k", "ablation_srnmt_m30k", "depth_srnmt_m30k"]
EXTRA_COMPARISONS = {  # (row, against) beyond each row against the reference, as in the REPORT
    "context_gates_m30k": [  # finding 6
        ("tanh RNN + CG (both)", "tanh RNN"), ("tanh RNN + CG (source)", "tanh RNN"),
        ("tanh RNN + CG (target)", "tanh RNN"),
        ("GRU + CG (both)", "GRU + CG (source)"), ("GRU + CG (both)", "GRU + CG (target)"),
        ("GRU + CG (source; t)", "GRU + gating scalar (t)"), ("GRU + CG (both; t)", "GRU + CG (source; t)"),
        ("GRU + CG (both; t)", "GRU + gating scalar (t)"), ("GRU + CG (both; t, s)", "GRU + CG (both; t)"),
        ("GRU + CG (both)", "GRU + CG (both; t, s)"),
    ],
    "ablation_srnmt_m30k": [("- LayerNorm", "- Highway"), ("- Multi Attention", "- Highway")],  # finding 4
    "depth_srnmt_m30k": [(f"SR-NMT {n}L", f"SR-NMT {n - 1}L") for n in range(3, 9)],  # finding 5: adjacent depths
}


def comparisons(study) -> list[tuple[str, str]]:
    labels = list(dict.fromkeys(record["label"] for record in study.records))
    reference = study.spec.fields.table.reference
    against_reference = [(label, reference) for label in labels if label != reference]
    return against_reference + EXTRA_COMPARISONS.get(study.name, [])


SLOPE_STUDIES = {"depth_srnmt_m30k": "enc_layers"}  # study -> the model key its rows' depth is
SLOPES_FROM = (1, 2)  # the first depth of each slope, as in the REPORT


def contrasts(study) -> list[tuple[str, dict[str, float]]]:
    """The study's contrasts of more than two rows: (what it is, its weights by row label)."""
    if has_additivity(study.spec):
        return [(f"departure of {label}", weights)
                for label, (_, weights) in departure_contrasts(study.spec, study.spec.fields.table.reference).items()]
    key = SLOPE_STUDIES.get(study.name)
    if key is None:
        return []
    finished: dict[int, tuple[str, int]] = {}
    for record in study.records:
        depth = int(record["config"]["model"][key])
        label, seeds = finished.get(depth, (record["label"], 0))
        finished[depth] = (label, seeds + (record["status"] == "ok"))
    complete = sorted(depth for depth, (_, seeds) in finished.items() if seeds >= 3)
    out = []
    for first in SLOPES_FROM:
        depths = [d for d in complete if d >= first]
        if len(depths) >= 2:
            weights = slope_weights(depths)
            out.append((f"slope over {', '.join(f'{d}L' for d in depths)}",
                        {finished[d][0]: weights[d] for d in depths}))
    return out


def report_contrasts(study, cache: dict) -> None:
    listed = contrasts(study)
    if not listed:
        return
    ratios = []
    print("contrast | its value on the pooled translations | pooled seeds (the tables') | "
          "sentences drawn with all seeds | width ratio")
    for what, weights in listed:
        seeds, pooled = contrast_test(weights, study.records, study.references, cache)
        if not seeds:
            print(f"{what} | no seed finished in all its rows")
            continue
        _, joint = contrast_test(weights, study.records, study.references, cache, seeds_together=True)
        ratio = (joint.ci_high - joint.ci_low) / (pooled.ci_high - pooled.ci_low)
        ratios.append(ratio)
        print(f"{what} | {pooled.delta:+.3f} | [{pooled.ci_low:+.3f}, {pooled.ci_high:+.3f}] | "
              f"[{joint.ci_low:+.3f}, {joint.ci_high:+.3f}] | {ratio:.2f}")
    if ratios:
        print(f"\n{len(ratios)} contrast{'s' if len(ratios) > 1 else ''}; width ratio {min(ratios):.2f}-"
              f"{max(ratios):.2f}, median {statistics.median(ratios):.2f}\n")


def report(name: str) -> None:
    study = load_stored_study(RESULTS / name)
    rows: dict[str, list[dict]] = {}
    for record in study.records:
        rows.setdefault(record["label"], []).append(record)
    cache: dict = {}  # each translation's sentence statistics, read once
    ratios, crossings = [], []
    print(f"## {name}\n")
    print("comparison | Δ of the pooled translations | pooled seeds (the tables') | sentences drawn with all seeds | width ratio")
    for row, against in comparisons(study):
        ours, theirs = finished_translations(rows.get(row, [])), finished_translations(rows.get(against, []))
        seeds = sorted(set(ours) & set(theirs))
        if not seeds:
            print(f"{row} vs {against} | no seed finished in both rows")
            continue
        pooled = paired_test(rows[row], rows[against], study.references, stats_cache=cache)
        joint = paired_bootstrap_stats(  # BLEU statistics add up, so a sentence's seeds sum to one row
            sum(translation_stats(ours[s], study.references, cache) for s in seeds),
            sum(translation_stats(theirs[s], study.references, cache) for s in seeds))
        ratio = (joint.ci_high - joint.ci_low) / (pooled.ci_high - pooled.ci_low)
        ratios.append(ratio)
        if (pooled.ci_low > 0 or pooled.ci_high < 0) != (joint.ci_low > 0 or joint.ci_high < 0):
            crossings.append(f"{row} vs {against}")
        print(f"{row} vs {against} | {pooled.delta:+.2f} | [{pooled.ci_low:+.2f}, {pooled.ci_high:+.2f}] | "
              f"[{joint.ci_low:+.2f}, {joint.ci_high:+.2f}] | {ratio:.2f}")
    if ratios:
        print(f"\n{len(ratios)} comparison{'s' if len(ratios) > 1 else ''}; width ratio {min(ratios):.2f}-{max(ratios):.2f}, "
              f"median {statistics.median(ratios):.2f}; one interval excludes zero and the other does not: "
              f"{', '.join(crossings) if crossings else 'none'}\n")
    report_contrasts(study, cache)


def main(argv: list[str] | None = None) -> int:
    for name in (sys.argv[1:] if argv is None else argv) or STUDIES:
        report(name)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))  # a study that is not there: one line, exit 2
