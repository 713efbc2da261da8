"""Refresh the generated tables of results/REPORT.md from the committed results.

REPORT.md marks each generated table with a pair of HTML comments; what lies between them is
written by this script and nothing else:

    <!-- generated: claims ablation_srnmt_m30k -->   the table of results/reference/<study>/claims.md
    <!-- generated: compute -->                      CPU-hours per study, from the trial records
    <!-- /generated -->

so a verdict in the report is the one ``python -m study.table`` wrote, and a test
(tests/study/test_report_scripts.py) fails when the report and the claims files disagree. Run from
the repository root after rebuilding tables:

    python scripts/report_tables.py [--check]
"""

import argparse
import json
import pathlib
import re
import sys

from nmt.cli import run_main
from nmt.errors import UserError

ROOT = pathlib.Path(__file__).resolve().parents[1]
REPORT = ROOT / "results" / "REPORT.md"
REFERENCE = ROOT / "results" / "reference"
BLOCK = re.compile(r"(<!-- generated: (?P<what>[a-z]+)(?: (?P<study>[A-Za-z0-9_-]+))? -->\n)(?P<body>.*?)(<!-- /generated -->)",
                   re.DOTALL)
COMPUTE_STUDIES = ("ablation_srnmt_m30k", "context_gates_m30k", "depth_srnmt_m30k", "fsmn_m30k", "fsmn_probe_m30k",
                   "cells_m30k", "atr_gates_m30k")


def claims_block(study: str) -> str:
    """The claims table of a study as its claims.md has it (title, table, the lines naming the untested
    claims' reasons, the seeds still improving, the claims judged from a timing pass, and the BLEU signatures),
    with the protocol named under it."""
    path = REFERENCE / study / "claims.md"
    if not path.is_file():
        raise UserError(f"{path}: missing; run python -m study.table search_spaces/multi30k/{study}.yaml "
                        f"--results results/reference first")
    lines = path.read_text(encoding="utf-8").splitlines()
    table = [line for line in lines if line.startswith("|")]
    reasons = [line for line in lines if " not tested: " in line or line.startswith("Still improving when")
               or ": judged from the study's timing pass " in line]
    signatures = [line for line in lines if line.startswith(("BLEU: sacreBLEU", "Other BLEU: sacreBLEU"))]
    return "\n".join(table + [""] + [f"- {line}" for line in reasons + signatures]
                     + ["", f"Generated from `results/reference/{study}/claims.md`; the protocol and the verdict rule: "
                            f"[docs/claims.md](../docs/claims.md)."]) + "\n"


def trial_metrics(study: str) -> list[dict]:
    """The finished trials' metrics: from the trial store where it is committed, else trials.jsonl."""
    store = REFERENCE / "ray" / study / "finished"
    if store.is_dir():
        return [json.loads(path.read_text(encoding="utf-8")) for path in sorted(store.glob("*/metrics.json"))]
    saved = REFERENCE / study / "trials.jsonl"
    if not saved.is_file():
        return []
    return [json.loads(line)["metrics"] for line in saved.read_text(encoding="utf-8").splitlines() if line.strip()]


def compute_block() -> str:
    """CPU-hours of the kept training per study: each finished trial's wall time times its threads."""
    lines = ["| study | finished trials | CPU-hours | hours a trial (mean) |", "|---|---|---|---|"]
    total = 0.0
    for study in COMPUTE_STUDIES:
        metrics = [m for m in trial_metrics(study) if m.get("elapsed_seconds") is not None]
        hours = sum(float(m["elapsed_seconds"]) * int(m.get("threads") or 1) for m in metrics) / 3600
        total += hours
        mean = f"{hours / len(metrics):.2f}" if metrics else "-"
        lines.append(f"| `{study}` | {len(metrics)} | {hours:.1f} | {mean} |")
    lines.append(f"| all | | {total:.1f} | |")
    return "\n".join(lines + ["", "Generated from the trial records (`elapsed_seconds` x `threads` of each finished "
                                  "trial; time lost to machines that went away is not counted)."]) + "\n"


def refresh(text: str) -> str:
    """The report with every generated block written again."""
    def fill(match: re.Match) -> str:
        if match["what"] == "claims" and match["study"]:
            body = claims_block(match["study"])
        elif match["what"] == "compute":
            body = compute_block()
        else:
            raise UserError(f"{REPORT}: unknown generated block {match.group(1).strip()}")
        return match.group(1) + body + match.group(5)

    return BLOCK.sub(fill, text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the report is not up to date; write nothing")
    args = parser.parse_args(argv)
    text = REPORT.read_text(encoding="utf-8")
    fresh = refresh(text)
    if args.check:
        if fresh != text:
            print(f"{REPORT}: generated tables are stale; run python scripts/report_tables.py", file=sys.stderr)
            return 1
        print(f"{REPORT}: up to date")
        return 0
    REPORT.write_text(fresh, encoding="utf-8")
    print(f"{REPORT}: {len(BLOCK.findall(text))} generated tables written")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
