"""Trial records read back from Ray Tune's experiment storage.

Ray's storage is the source of truth for what ran: tables are rebuilt from
it (``python -m study.table``) and MLflow is reconciled against it, so a
driver killed at any point loses nothing that a trial had reported.
"""

from __future__ import annotations

import json
from pathlib import Path

from study.trainable import TRIAL, trial_config, trial_key


TRIALS_FILE = "trials.jsonl"
HYPS_DIR = "hyps"


def experiment_dir(results_root: Path, study: str) -> Path:
    return results_root / "ray" / study


def save_records(records: list[dict], study_dir: Path) -> None:
    """A self-contained copy of the trial records next to the tables: ``trials.jsonl`` and each
    finished trial's test translations in ``hyps/`` (committed reference results rebuild from these)."""
    from nmt.fileio import write_lines

    hyps = study_dir / HYPS_DIR
    hyps.mkdir(parents=True, exist_ok=True)
    lines = []
    for record in records:
        kept = {k: v for k, v in record.items() if k not in ("artifacts", "hyp_path")}
        if record.get("hyp_path") and Path(record["hyp_path"]).is_file():
            target = hyps / f"{record['key']}.hyp"
            if Path(record["hyp_path"]).resolve() != target.resolve():
                write_lines(target, Path(record["hyp_path"]).read_text(encoding="utf-8").splitlines())
            kept["hyp_file"] = f"{HYPS_DIR}/{target.name}"
        lines.append(json.dumps(kept, sort_keys=True))
    write_lines(study_dir / TRIALS_FILE, lines)


def load_saved_records(study_dir: Path) -> list[dict]:
    """Trial records from ``save_records`` (no Ray needed)."""
    path = study_dir / TRIALS_FILE
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        hyp = record.pop("hyp_file", None)
        record["hyp_path"] = str(study_dir / hyp) if hyp and (study_dir / hyp).is_file() else None
        record["artifacts"] = [record["hyp_path"]] if record["hyp_path"] else []
        records.append(record)
    return records


def load_records(results_root: Path, study: str) -> list[dict]:
    """One record per Ray trial: identity, config, status, final metrics, artifacts."""
    from ray.tune import ExperimentAnalysis

    path = experiment_dir(results_root, study)
    if not path.is_dir():
        return []
    analysis = ExperimentAnalysis(str(path))
    records = [_record(trial) for trial in analysis.trials]
    return sorted(records, key=lambda r: (r["row"], r["seed"], r["key"]))


def _record(trial) -> dict:
    info, tree = trial_config(trial.config)
    sampled = {k: v for k, v in trial.config.items() if k != TRIAL}
    last = dict(trial.last_result or {})
    checkpoint = trial.checkpoint.path if trial.checkpoint is not None else None
    final = bool(last.get("final"))
    if trial.status == "ERROR":
        status = "failed"
    elif trial.status == "TERMINATED":
        status = last.get("status", "ok") if final else "stopped"  # stopped early by the scheduler
    else:
        status = "running"
    record = {
        "key": trial_key(trial.config),
        "label": info["label"] if not sampled else search_label(trial, sampled),
        "row": info["row"],
        "seed": info["seed"],
        "config": tree,
        "params": sampled,
        "status": status,
        "metrics": {k: v for k, v in last.items() if _is_metric(k, v)},
        "error": error_summary(trial) if status == "failed" else "",
        "trial_id": trial.trial_id,
        "node": last.get("node_ip", ""),
        "hyp_path": None,
        "artifacts": [],
    }
    if checkpoint is not None:
        directory = Path(checkpoint)
        for name in ("test.hyp", "metrics.json", "config.yaml"):
            if (directory / name).is_file():
                record["artifacts"].append(str(directory / name))
        if final and (directory / "test.hyp").is_file():
            record["hyp_path"] = str(directory / "test.hyp")
    return record


def search_label(trial, sampled: dict) -> str:
    parts = [f"{key.split('.')[-1]}={_short(value)}" for key, value in sorted(sampled.items())]
    return f"{trial.trial_id[-5:]}: " + ", ".join(parts)


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


_RAY_FIELDS = {"timestamp", "time_this_iter_s", "time_total_s", "pid", "training_iteration", "time_since_restore",
               "iterations_since_restore", "checkpoint_dir_name", "done", "date", "hostname", "node_ip",
               "trial_id", "experiment_tag", "should_checkpoint", "config"}


def _is_metric(key: str, value) -> bool:
    return key not in _RAY_FIELDS and isinstance(value, (int, float, str)) and not isinstance(value, bool)


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
