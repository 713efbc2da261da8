"""BLEU and translation length by source-sentence length (Tu et al. 2017, Fig. 7;
Bahdanau et al. 2015): test sentences are grouped by source length in words,
and each system's corpus BLEU and length ratio (hypothesis words / reference
words) are computed per group. Reads translation files, so it needs no model:
a study's ``results/STUDY/hyps/KEY.hyp`` or ``nmt.translate`` output. A label
given with several files pools them (the seeds of one configuration).

    python -m nmt.analysis.length_buckets --source test.en --reference test.de \\
        --hyp GRU=gru.hyp --hyp "GRU + CG=cg.hyp" --out analysis/lengths
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nmt.analysis.common import prepare_out, save_figure, write_summary
from nmt.cli import command_parser, run_main
from nmt.data.corpus import read_lines
from nmt.errors import UserError
from nmt.figures import subplots
from nmt.evaluate import corpus_bleu


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "nmt.analysis.length_buckets",
        description="BLEU and length ratio per source-length bucket for one or more "
                    "systems' translations of the same test set (Tu et al. 2017, Fig. 7).")
    parser.add_argument("--source", type=Path, required=True, help="source sentences (plain or .gz)")
    parser.add_argument("--reference", type=Path, required=True, help="reference translations (plain or .gz)")
    parser.add_argument("--hyp", action="append", required=True, metavar="LABEL=FILE",
                        help="a system's translations, one line per source line; repeatable, and a label given "
                             "again pools its files (e.g. the seeds of one configuration)")
    parser.add_argument("--edges", type=int, nargs="+", default=[10, 15, 20],
                        help="bucket edges in source words (default 10 15 20: <10, 10-14, 15-19, >=20)")
    parser.add_argument("--out", type=Path, required=True, help="directory for length_buckets.png and .json")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for bad input")
    return parser


def parse_systems(specs: list[str], lines: int) -> dict[str, list[list[str]]]:
    """{label: [translations of one run, ...]}: a label given more than once pools its runs (seeds)."""
    systems: dict[str, list[list[str]]] = {}
    for spec in specs:
        label, sep, path = spec.rpartition("=")
        if not sep or not label or not path:
            raise UserError(f"--hyp {spec}: expected LABEL=FILE, e.g. --hyp GRU=results/cells/hyps/KEY.hyp")
        hyps = read_lines(path, f"--hyp {label}")
        if len(hyps) != lines:
            raise UserError(f"--hyp {spec}: {len(hyps)} lines, but the source has {lines}; translations must be "
                            "line-aligned with --source")
        systems.setdefault(label, []).append(hyps)
    return systems


def bucket_names(edges: list[int]) -> list[str]:
    names = [f"< {edges[0]}"]
    names += [f"{low}-{high - 1}" for low, high in zip(edges, edges[1:])]
    return names + [f">= {edges[-1]}"]


def bucket_of(length: int, edges: list[int]) -> int:
    return sum(length >= edge for edge in edges)


def analyse(sources: list[str], references: list[str], systems: dict[str, list[list[str]]], edges: list[int]) -> dict:
    """Per bucket and system: corpus BLEU and length ratio over the system's runs pooled
    (each run's sentences of the bucket against their references)."""
    names = bucket_names(edges)
    members: list[list[int]] = [[] for _ in names]
    for k, source in enumerate(sources):
        members[bucket_of(len(source.split()), edges)].append(k)
    buckets = []
    for name, rows in zip(names, members):
        if not rows:
            continue
        row = {"bucket": name, "sentences": len(rows), "systems": {}}
        for label, runs in systems.items():
            chosen = [hyps[k] for hyps in runs for k in rows]
            refs = [references[k] for _ in runs for k in rows]
            row["systems"][label] = {"bleu": corpus_bleu(chosen, refs).score,
                                     "length_ratio": sum(len(h.split()) for h in chosen) /
                                     max(sum(len(r.split()) for r in refs), 1)}
        buckets.append(row)
    overall = {label: {"runs": len(runs), "bleu": corpus_bleu([h for hyps in runs for h in hyps],
                                                              references * len(runs)).score}
               for label, runs in systems.items()}
    return {"edges": edges, "buckets": buckets, "overall": overall}


def plot(summary: dict, path: Path) -> None:
    fig, (top, bottom) = subplots(2, 1, figsize=(6, 6), sharex=True)
    names = [b["bucket"] for b in summary["buckets"]]
    for label in summary["overall"]:
        top.plot(names, [b["systems"][label]["bleu"] for b in summary["buckets"]], marker="o", label=label)
        bottom.plot(names, [b["systems"][label]["length_ratio"] for b in summary["buckets"]], marker="o", label=label)
    bottom.axhline(1.0, color="grey", lw=0.5)
    top.set_ylabel("BLEU")
    bottom.set_ylabel("length ratio (hyp / ref)")
    bottom.set_xlabel("source length (words)")
    top.set_title("Translation quality by source length (cf. Tu et al. 2017, Fig. 7)", fontsize=10)
    top.legend(fontsize=8)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if any(e < 1 for e in args.edges) or args.edges != sorted(set(args.edges)):
        raise UserError(f"--edges {' '.join(map(str, args.edges))}: must be increasing positive word counts")
    sources = read_lines(args.source, "--source")
    references = read_lines(args.reference, "--reference")
    if len(sources) != len(references):
        raise UserError(f"--reference {args.reference}: {len(references)} lines, but --source has {len(sources)}")
    systems = parse_systems(args.hyp, len(sources))
    summary = analyse(sources, references, systems, args.edges)
    out = prepare_out(args.out)
    plot(summary, out / "length_buckets.png")
    write_summary(out / "length_buckets.json", summary)
    labels = list(systems)
    print(f"{'bucket':<10} {'n':>5}  " + "  ".join(f"{label[:18]:>18} BLEU / len" for label in labels))
    for b in summary["buckets"]:
        cells = "  ".join(f"{b['systems'][label]['bleu']:>18.2f} / {b['systems'][label]['length_ratio']:.2f}"
                          for label in labels)
        print(f"{b['bucket']:<10} {b['sentences']:>5}  {cells}")
    print(f"wrote {out}/length_buckets.png (and .pdf), length_buckets.json")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
