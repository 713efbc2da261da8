"""The trend of test BLEU over depth in depth_srnmt_m30k against the SR-NMT paper's Table 2.

"BLEU rises with depth" is a claim about the whole curve. The steps between adjacent depths test
it one pair of rows at a time, and with 3 seeds a row their intervals are wide; a line through all
rows of a range of depths pools them. For each range this prints the slope of the least-squares
line through the rows' mean test BLEU (BLEU per added layer; a weighted sum of the row means, the
weights (x - mean x) / sum (x - mean x)^2), its two 95% intervals as the study tables give them
for a difference (seeds: Welch-Satterthwaite over each row's seeds, as for the ablation's
additivity contrasts; bootstrap: the paired bootstrap of the same weighted sum of the rows' pooled
translations), the paper's slope over the same depths, and the verdict by results/REPORT.md's rule.
Welch's degrees of freedom fall towards those of the noisiest row, so beside it comes the interval
that assumes every row's seeds spread alike (their variances pooled, sum(n - 1) degrees of freedom).
A row enters a range only with 2 or more finished seeds; the rows left out are named. Run from the
repository root:

    python scripts/depth_trend.py [--ranges 1-8 2-8 3-8] [--results results/reference]
"""

import argparse
import math
import pathlib
import statistics
import sys

from nmt.cli import run_main
from nmt.errors import UserError
from study.analysis.additivity import contrast_test
from study.analysis.significance import contrast_seed_interval, slope_weights, t95
from study.analysis.stored_study import load_stored_study

STUDY = "depth_srnmt_m30k"
PAPER_BLEU = {1: 18.33, 2: 21.82, 3: 22.35, 4: 23.32, 5: 24.11, 6: 23.93, 7: 24.34, 8: 24.87}  # Table 2


def pooled_variance_interval(terms: list[tuple[float, float, float, int]]) -> tuple[float, float]:
    """The 95% interval of ``sum(weight * mean)`` with one seed variance for every row (pooled)."""
    df = sum(n - 1 for _, _, _, n in terms)
    variance = sum((n - 1) * std ** 2 for _, _, std, n in terms) / df
    estimate = sum(weight * mean for weight, mean, _, _ in terms)
    half = t95(df) * math.sqrt(variance * sum(weight ** 2 / n for weight, _, _, n in terms))
    return estimate - half, estimate + half


def verdict(low: float, high: float, paper: float) -> str:
    if math.isnan(low):
        return "no interval"
    if not low <= paper <= high:
        return "disagree"
    return "inconclusive" if low <= 0 <= high else "agree"


def parse_range(text: str) -> tuple[int, int]:
    try:
        first, last = (int(n) for n in text.split("-"))
    except ValueError:
        raise UserError(f"--ranges {text}: give depths as FIRST-LAST, e.g. 2-8") from None
    if not 1 <= first < last <= max(PAPER_BLEU):
        raise UserError(f"--ranges {text}: needs 1 <= FIRST < LAST <= {max(PAPER_BLEU)} (the paper's depths)")
    return first, last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranges", nargs="+", default=["1-8", "2-8", "3-8"], help="depth ranges FIRST-LAST "
                        "(default 1-8 2-8 3-8)")
    parser.add_argument("--results", type=pathlib.Path, default=pathlib.Path("results/reference"),
                        help="results directory holding the study (default results/reference)")
    args = parser.parse_args(argv)
    ranges = [parse_range(text) for text in args.ranges]
    study = load_stored_study(args.results / STUDY)
    scores: dict[int, list[float]] = {}
    labels: dict[int, str] = {}
    for record in study.records:
        depth = int(record["config"]["model"]["enc_layers"])
        labels[depth] = record["label"]
        if record["status"] == "ok" and record["metrics"].get("test_bleu") is not None:
            scores.setdefault(depth, []).append(float(record["metrics"]["test_bleu"]))
    by_depth = [f"{d}L {statistics.fmean(v):.2f} ({len(v)} seed{'s' if len(v) > 1 else ''})"
                for d, v in sorted(scores.items())]
    print(f"{STUDY}: test BLEU of the finished trials, by depth: {'; '.join(by_depth)}\n")
    print("| depths | rows used | slope (BLEU per layer) | seeds | seeds, pooled variance | bootstrap | paper slope | "
          "verdict: seeds | pooled | bootstrap |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for first, last in ranges:
        depths = [d for d in range(first, last + 1) if len(scores.get(d, [])) >= 2]
        left_out = [f"{d}L" for d in range(first, last + 1) if d not in depths]
        if len(depths) < 2:
            print(f"| {first}-{last} | fewer than 2 rows with 2 finished seeds | - | - | - | - | - | - | - | - |")
            continue
        weights = slope_weights(depths)
        terms = [(weights[d], statistics.fmean(scores[d]), statistics.stdev(scores[d]), len(scores[d]))
                 for d in depths]
        slope = sum(w * mean for w, mean, _, _ in terms)
        low, high = contrast_seed_interval(terms)
        pooled_low, pooled_high = pooled_variance_interval(terms)
        seeds, test = contrast_test({labels[d]: weights[d] for d in depths}, study.records, study.references, {})
        paper = sum(weights[d] * PAPER_BLEU[d] for d in depths)
        used = f"{depths[0]}L-{depths[-1]}L" if depths == list(range(depths[0], depths[-1] + 1)) else \
            ", ".join(f"{d}L" for d in depths)
        if left_out:
            used += f" (without {', '.join(left_out)})"
        print(f"| {first}-{last} | {used} | {slope:+.3f} | [{low:+.3f}, {high:+.3f}] | "
              f"[{pooled_low:+.3f}, {pooled_high:+.3f}] | [{test.ci_low:+.3f}, {test.ci_high:+.3f}] ({seeds} seeds "
              f"pooled) | {paper:+.3f} | {verdict(low, high, paper)} | {verdict(pooled_low, pooled_high, paper)} | "
              f"{verdict(test.ci_low, test.ci_high, paper)} |")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
