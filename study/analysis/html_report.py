"""One self-contained HTML report per study (``<study dir>/report.html``), to send to a colleague:
the table with its notes, every figure of the directory, the study as run and the command, the
data and the environment recorded in study.json.

Self-contained: figures are embedded as base64 PNG data URIs, the style is inline, and there is
no script and no link. Deterministic: the report is a function of the stored files only (no
clock, no random ids, no absolute path of the directory itself), so rebuilding it from the same
results gives the same bytes. For the same reason it leaves out what study.json only gets after
the tables are written (status, end time, wall time): the report written at the end of a run and
one rebuilt later by ``python -m study.report`` are the same file.

``python -m study.report NAME [--results DIR]`` (re)writes it from stored results.
"""

from __future__ import annotations

import base64
import html
import json
import os
from pathlib import Path

import pandas as pd
import yaml

from nmt.errors import UserError
from nmt.fileio import write_lines
from study.analysis.additivity import Additivity, ablation_additivity, has_additivity
from study.analysis.claims_table import ClaimsTable, claims_table
from study.analysis.speed_columns import read_speed
from study.analysis.stored_study import load_stored_study
from study.analysis.tables import StudyTable, display_frame, footnotes
from study.spec.loading import spec_from_dict
from study.spec.model import checked_study_name
from study.store.claim_declarations import declared_column
from study.store.ownership import check_real_tree, owned_path
from study.store.record_validation import read_text, regular_file
from study.store.study_state import command_history, read_study_state

REPORT_FILE = "report.html"


STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
h3 { font-size: 1.05em; }
.description { color: #444; margin-top: 0; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { padding: 0.25em 0.6em; border-bottom: 1px solid #e2e2e2; white-space: nowrap; }
th { background: #f3f3f3; text-align: left; }
table.results td { text-align: right; font-variant-numeric: tabular-nums; }
table.results td:first-child { text-align: left; }
table.results tr.reference td { background: #fdf1e7; }
table.keys th { font-weight: normal; color: #555; background: none; }
.notes, .legend { font-size: 0.85em; color: #444; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
footer { margin-top: 3em; font-size: 0.8em; color: #777; }
"""


LEGEND = ("BLEU, ± std: test BLEU (sacreBLEU) mean and standard deviation over the seeds that finished. "
          "Δ: difference of the mean to the reference row (highlighted). 95% CI: Student-t interval of the mean "
          "over seeds. Δ CI (seeds): Welch interval of Δ over the two rows' seeds (another training run). "
          "Δ CI (bootstrap) and p: paired bootstrap against the reference row over test sentences "
          "(1000 resamples, the seeds' translations concatenated) - test-set noise only, not seed variation. "
          "n: seeds that finished / seeds run. † still improving when its training ended, ‡ seeds trained for "
          "different numbers of epochs.")


def _text(value) -> str:
    """A recorded value as text: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def results_table(table: StudyTable) -> str:
    """The study's table as HTML: the same cells as table.md, the reference row marked."""
    return (html_table(display_frame(table.rows, table.reference), table.title, footnotes(table.rows), table.reference)
            + f'\n<p class="legend">{html.escape(LEGEND)}</p>')


def additivity_table(additivity: Additivity) -> str:
    """An ablation's additivity table as HTML: the same cells and notes as additivity.md."""
    return html_table(additivity.frame(), additivity.title, additivity.notes())


def html_table(frame: pd.DataFrame, title: str, notes: list[str], marked_label: str | None = None) -> str:
    """A shown table with its bold title and notes; the row whose first cell is ``marked_label`` highlighted."""
    head = "".join(f"<th>{html.escape(str(column))}</th>" for column in frame.columns)
    body = []
    for row in frame.itertuples(index=False):
        marked = ' class="reference"' if marked_label is not None and row[0] == marked_label else ""
        cells = "".join(f"<td>{html.escape(str(value))}</td>" for value in row)
        body.append(f"<tr{marked}>{cells}</tr>")
    shown_notes = "".join(f"<p>{html.escape(note)}</p>" for note in notes)
    return (f"<p><strong>{html.escape(title)}</strong></p>\n"
            f'<div class="scroll"><table class="results">\n<thead><tr>{head}</tr></thead>\n<tbody>\n'
            + "\n".join(body) + "\n</tbody></table></div>"
            + (f'\n<div class="notes">{shown_notes}</div>' if shown_notes else ""))


def figure_paths(study_dir: Path) -> list[Path]:
    """Every PNG figure in the study's directory: its own first, then those of subdirectories
    (analyses), each group by name. Regular files only, found without following a link: a link
    named like a figure would embed what it points to in a page meant to be sent to others."""
    found = []
    for parent, _, files in os.walk(study_dir, followlinks=False):
        found += [Path(parent) / name for name in files if name.endswith(".png")]
    found = [path for path in found if regular_file(path, "remove it; a study's directory holds only what it wrote")]
    return sorted(found, key=lambda p: (len(p.relative_to(study_dir).parts), p.relative_to(study_dir).as_posix()))


def figures(study_dir: Path) -> str:
    parts = []
    for path in figure_paths(study_dir):
        name = path.relative_to(study_dir).as_posix()
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        pdf = path.with_suffix(".pdf")
        vector = f" (vector version for papers: {pdf.relative_to(study_dir).as_posix()})" if pdf.is_file() else ""
        parts.append(f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(name)}">'
                     f"<figcaption>{html.escape(name + vector)}</figcaption></figure>")
    return "\n".join(parts) if parts else "<p>No figures in the study's directory.</p>"


def key_value_table(items: dict) -> str:
    rows = "".join(f"<tr><th>{html.escape(str(key))}</th><td>{html.escape(_text(value))}</td></tr>"
                   for key, value in items.items())
    return f'<div class="scroll"><table class="keys">{rows}</table></div>'


def _yaml(tree) -> str:
    return yaml.safe_dump(tree, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100)


def configuration(study_dir: Path, state: dict) -> str:
    command_file = study_dir / "command.txt"
    commands = command_history(state) or (read_text(command_file) or "").splitlines()
    heading = ["<h3>Command</h3>"] if len(commands) < 2 else [
        "<h3>Commands</h3>", "<p>The first started the study; each later one continued (--resume) or extended "
        "(--extend) it.</p>"]
    shown = "\n".join(commands) or "(not recorded)"
    parts = [*heading, f"<pre>{html.escape(shown)}</pre>",
             "<h3>Study as run</h3>",
             "<p>The effective study: the study file after --set, --smoke and the data options, with every "
             "default filled in.</p>",
             f"<pre>{html.escape(_yaml(state['spec']))}</pre>"]
    if isinstance(state.get("request"), dict):
        parts += ["<details><summary>Study as requested (the study file after --set)</summary>",
                  f"<pre>{html.escape(_yaml(state['request']))}</pre></details>"]
    return "\n".join(parts)


def environment(state: dict) -> str:
    run = {key: state[key] for key in ("started", "fingerprint", "tracking_uri", "parent_run_id") if state.get(key)}
    recorded = state.get("environment")
    parts = [key_value_table(recorded) if isinstance(recorded, dict) and recorded else
             "<p>Not recorded: this study ran before study.json recorded the code's commit and the package "
             "versions.</p>"]
    if run:
        parts += ["<h3>Run</h3>", "<p>When it started, the study's fingerprint (what --resume compares) and its "
                  "MLflow parent run.</p>", key_value_table(run)]
    return "\n".join(parts)


def render_report(study_dir: Path, state: dict, table: StudyTable, additivity: Additivity | None = None,
                  claims: ClaimsTable | None = None) -> str:
    name = state.get("study") or study_dir.name
    description = (state.get("spec") or {}).get("description", "")
    data = state.get("data")
    sections = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{html.escape(name)}: study report</title>",
        f"<style>{STYLE}</style>",
        "</head>",
        "<body>",
        f"<h1>Study {html.escape(name)}</h1>",
        f'<p class="description">{html.escape(description)}</p>' if description else "",
        "<h2>Results</h2>",
        results_table(table),
        additivity_table(additivity) if additivity is not None else "",
        html_table(claims.frame(), claims.title, claims.notes()) if claims is not None else "",
        "<h2>Figures</h2>",
        figures(study_dir),
        "<h2>Configuration</h2>",
        configuration(study_dir, state),
        "<h2>Data</h2>",
        key_value_table(data) if isinstance(data, dict) and data else "<p>Not recorded.</p>",
        "<h2>Environment</h2>",
        environment(state),
        f"<footer>Written by python -m study.report from the study's stored results ({html.escape(name)}/: "
        "study.json, the trial records, the figures).</footer>",
        "</body>",
        "</html>",
    ]
    return "\n".join(section for section in sections if section)


def write_html_report(study_dir: Path, table: StudyTable | None = None, additivity: Additivity | None = None,
                      claims: ClaimsTable | None = None) -> Path:
    """``<study_dir>/report.html``. ``table`` (and an ablation's ``additivity``, the declared ``claims``) are
    the study's tables when the caller has just built them (study.analysis.exports); what is not given is
    rebuilt from the stored trial records."""
    study_dir = Path(study_dir)
    state = read_study_state(study_dir)
    stored = load_stored_study(study_dir) if table is None else None
    table = table if stored is None else stored.table()
    spec = stored.spec if stored is not None else spec_from_dict(state["spec"], source=str(study_dir / "study.json"))
    if additivity is None and has_additivity(spec):
        stored = stored or load_stored_study(study_dir)
        additivity = ablation_additivity(stored.spec, table, stored.records, stored.references)
    if claims is None and spec.fields.claims:
        stored = stored or load_stored_study(study_dir)
        declared = declared_column(state, spec.fields.claims, str(study_dir / "study.json"))
        claims = claims_table(spec.fields.claims, table.title, table, stored.records, stored.references, declared,
                              read_speed(study_dir))
    path = study_dir / REPORT_FILE
    write_lines(path, render_report(study_dir, state, table, additivity, claims).splitlines())
    return path


def write_study_report(name: str, results: Path) -> Path:
    """(Re)write ``results/NAME/report.html`` from the study's stored results."""
    checked_study_name(name)
    root = results.resolve()
    study_dir = owned_path(root, root / name, "study directory")
    if not study_dir.is_dir():
        raise UserError(f"study {name}: no stored results in {root}; run python -m study.run {name} first")
    check_real_tree(study_dir, "study directory")
    return write_html_report(study_dir)
