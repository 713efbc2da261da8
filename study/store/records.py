"""Trial records: read from the platform's own trial store (``study.store.trial_store``, plain
JSON), never from Ray's pickled experiment state.

The trial store is the source of truth for what ran: tables are rebuilt from it
(``python -m study.table``) and MLflow is reconciled against it, so a driver killed at any
point loses nothing that a trial had recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

from nmt.fileio import write_lines
from study.store.record_validation import check_saved_record, read_jsonl, regular_file
from study.store.trial_store import TrialStore

TRIALS_FILE = "trials.jsonl"
HYPS_DIR = "hyps"


def experiment_dir(results_root: Path, study: str) -> Path:
    return results_root / "ray" / study


def save_records(records: list[dict], study_dir: Path) -> None:
    """A self-contained copy of the trial records next to the tables: ``trials.jsonl`` and each
    finished trial's test translations in ``hyps/`` (committed reference results rebuild from these)."""

    hyps = study_dir / HYPS_DIR
    hyps.mkdir(parents=True, exist_ok=True)
    lines = []
    for record in records:
        kept = {k: v for k, v in record.items() if k not in ("artifacts", "hyp_path", "history", "model")}
        if record.get("hyp_path") and Path(record["hyp_path"]).is_file():
            target = hyps / f"{record['key']}.hyp"
            if Path(record["hyp_path"]).resolve() != target.resolve():
                write_lines(target, Path(record["hyp_path"]).read_text(encoding="utf-8").splitlines())
            kept["hyp_file"] = f"{HYPS_DIR}/{target.name}"
        lines.append(json.dumps(kept, sort_keys=True))
    write_lines(study_dir / TRIALS_FILE, lines)


def load_saved_records(study_dir: Path) -> list[dict]:
    """Trial records from ``save_records`` (no Ray needed), each line checked as input: a bad one
    is one line naming the file, the line and the field (study.store.record_validation)."""
    path = study_dir / TRIALS_FILE
    fix = f"restore it, or rebuild it from the trial store with python -m study.table {study_dir.name}"
    records = []
    for number, value in read_jsonl(path, fix):
        record = check_saved_record(value, f"{path} line {number}", fix)
        hyp = record.pop("hyp_file", None)
        hyp_path = study_dir / hyp if hyp else None
        if hyp_path is not None and not regular_file(hyp_path, fix):
            hyp_path = None
        record["hyp_path"] = str(hyp_path) if hyp_path else None
        record["artifacts"] = [record["hyp_path"]] if record["hyp_path"] else []
        records.append(record)
    return records


# a finished trial's files that make its best model loadable (nmt.translate): what --log-models logs
MODEL_FILES = ("best.pt", "config.yaml", "src.model", "tgt.model")


def load_records(results_root: Path, study: str) -> list[dict]:
    """One record per trial that started: identity, config, status, metrics, artifacts."""
    store = TrialStore(experiment_dir(results_root, study))
    records = [record for key in store.keys() if (record := trial_record(store, key)) is not None]
    return sorted(records, key=lambda r: (r["row"], r["seed"], r.get("sample") or 0, r["key"]))


def trial_record(store: TrialStore, key: str) -> dict | None:
    """One trial's record (None before it wrote its identity)."""
    identity = store.identity(key)
    if identity is None:
        return None
    finished = store.finished_metrics(key)
    verdict = store.verdict(key) or {}
    if finished is not None:
        status, metrics = finished.get("status", "ok"), finished
    else:
        status, metrics = verdict.get("status", "running"), store.last_progress(key)
    params = identity.get("params") or {}
    record = {
        "key": key,
        "label": search_label(identity.get("sample"), params) if identity.get("sample") is not None else identity["label"],
        "row": identity["row"],
        "seed": identity["seed"],
        "sample": identity.get("sample"),
        "config": identity["config"],
        "params": params,
        "status": status,
        "metrics": {k: v for k, v in metrics.items() if _is_metric(k, v)},
        "error": verdict.get("error", "") if status == "failed" else "",
        "node": metrics.get("node_id", identity.get("node_id", "")),
        "hyp_path": None,
        "artifacts": [],
        "history": store.history(key),
    }
    if finished is not None:
        directory = store.finished_dir(key)
        record["model"] = [str(directory / name) for name in MODEL_FILES if (directory / name).is_file()]
        for name in ("test.hyp", "metrics.json", "config.yaml"):
            if (directory / name).is_file():
                record["artifacts"].append(str(directory / name))
        if (directory / "test.hyp").is_file():
            record["hyp_path"] = str(directory / "test.hyp")
    return record


def search_label(sample: int | None, sampled: dict) -> str:
    parts = [f"{key.split('.')[-1]}={_short(value)}" for key, value in sorted(sampled.items())]
    return f"#{sample}: " + ", ".join(parts)


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _is_metric(key: str, value) -> bool:
    return isinstance(value, (int, float, str)) and not isinstance(value, bool)


def error_summary(trial) -> str:
    """The last line of the trial's error (the exception), kept to one line."""
    text = ""
    for attribute in ("error_msg", "error_message"):
        text = getattr(trial, attribute, "") or text
    path = getattr(trial, "error_file", None) or getattr(trial, "error_filename", None)
    if not text and path and Path(path).is_file():
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "the trial raised an error (see Ray's trial logs)"
