"""How much the tables' pooling of seeds narrows finding 6's test-set intervals.

The study tables' paired bootstrap pools a row's 3 seeds: it resamples each seed's translation of
a sentence on its own, as if the pooled translations were 3,000 test sentences. Resampling the
1,000 test sentences instead, with every seed's translation of each drawn together, keeps the
seeds' translations of one sentence correlated. This prints both 95% intervals, and the ratio of
their widths, for each comparison of finding 6 in results/REPORT.md (the same resamples as the
tables: study.significance). Run from the repository root:

    python results/reference/context_gates_m30k/analysis/joint_bootstrap.py
"""

import pathlib

from study.significance import contrast_bootstrap_stats
from study.stored import load_stored_study
from study.tables import finished_translations, paired_test, translation_stats

STUDY = pathlib.Path("results/reference/context_gates_m30k")
COMPARISONS = [  # (row, against), in the order of finding 6's table
    ("tanh RNN + CG (both)", "tanh RNN"), ("tanh RNN + CG (source)", "tanh RNN"),
    ("tanh RNN + CG (target)", "tanh RNN"), ("GRU", "tanh RNN"), ("tanh RNN + CG (both)", "GRU"),
    ("GRU + CG (source)", "GRU"), ("GRU + CG (target)", "GRU"), ("GRU + CG (both)", "GRU"),
    ("GRU + CG (both)", "GRU + CG (source)"), ("GRU + CG (both)", "GRU + CG (target)"),
    ("GRU + gating scalar (t)", "GRU"), ("GRU + CG (source; t)", "GRU"),
    ("GRU + CG (source; t)", "GRU + gating scalar (t)"), ("GRU + CG (both; t)", "GRU"),
    ("GRU + CG (both; t)", "GRU + CG (source; t)"), ("GRU + CG (both; t)", "GRU + gating scalar (t)"),
    ("GRU + CG (both; t, s)", "GRU"), ("GRU + CG (both; t, s)", "GRU + CG (both; t)"),
    ("GRU + CG (both)", "GRU + CG (both; t, s)"),
]


def main() -> None:
    study = load_stored_study(STUDY)
    rows: dict[str, list[dict]] = {}
    for record in study.records:
        rows.setdefault(record["label"], []).append(record)
    cache: dict = {}  # each translation's sentence statistics, read once
    print("comparison | Δ of the pooled translations | pooled seeds (the tables') | sentences drawn with all seeds | width ratio")
    for row, against in COMPARISONS:
        pooled = paired_test(rows[row], rows[against], study.references, stats_cache=cache)
        ours, theirs = finished_translations(rows[row]), finished_translations(rows[against])
        seeds = sorted(set(ours) & set(theirs))
        joint = contrast_bootstrap_stats(  # BLEU statistics add up, so a sentence's seeds sum to one row
            [sum(translation_stats(ours[s], study.references, cache) for s in seeds),
             sum(translation_stats(theirs[s], study.references, cache) for s in seeds)], [1.0, -1.0])
        ratio = (joint.ci_high - joint.ci_low) / (pooled.ci_high - pooled.ci_low)
        print(f"{row} vs {against} | {pooled.delta:+.2f} | [{pooled.ci_low:+.2f}, {pooled.ci_high:+.2f}] | "
              f"[{joint.ci_low:+.2f}, {joint.ci_high:+.2f}] | {ratio:.2f}")


if __name__ == "__main__":
    main()
