"""Which MLflow store and parent run a study run logs to: ``--tracking-uri``, the store a resumed study
started with, or the default SQLite store of the results directory; the parent run opened (the stored
one again on ``--resume``), and closed as FAILED when the run ends by an error."""

from __future__ import annotations

import os

import contextlib
from pathlib import Path

from study.execution.study_run import StudyRun
from study.execution.mlflow_entities import source_tags
from study.execution.tracking import RESULTS_TAG, StudyTracker, default_tracking_uri
from study.spec.expansion import study_axes
from study.spec.options import RunOptions
from study.store.provenance import environment


def open_tracking(run: StudyRun) -> None:
    """The study's MLflow tracker (not yet connected) and its tracking URI, set on the run."""
    spec = run.spec
    run.tracking_uri = tracking_uri(run.options, run.state, run.results_root)
    provenance = environment()
    run.tracker = StudyTracker(run.tracking_uri, spec.name, artifact_root=run.results_root / "mlflow-artifacts",
                               description=spec.fields.description, varied=study_axes(spec),
                               run_tags={"smoke": str(bool(spec.tree.get("smoke"))).lower(),
                                         RESULTS_TAG: str(run.results_root), **provenance,
                                         **source_tags(spec.source, provenance["git_commit"])}, say=run.say,
                               log_models=run.options.where.log_models)


def open_parent_run(run: StudyRun) -> str:
    """Runs a previous driver left RUNNING closed, then the study's parent run opened (the stored
    one again on --resume); returns its id."""
    stored = stored_parent(run.options, run.state, run.tracking_uri)
    closed = run.tracker.close_stale_runs(stored)
    if closed:
        run.say(f"closed {closed} MLflow run(s) left RUNNING by a previous driver (marked KILLED)")
    spec = run.spec
    return run.tracker.start_parent(spec.fingerprint, {"description": spec.fields.description, "kind": spec.kind,
                                                       "trials": len(run.trials), "command": run.options.command_line()},
                                    parent_id=stored)


@contextlib.contextmanager
def runs_closed_on_error(tracker: StudyTracker):
    """An error after the parent run opened (a bug, an export that fails, Ctrl-C while exporting)
    leaves no MLflow run RUNNING: the parent is marked FAILED, its open children KILLED."""
    try:
        yield
    except BaseException:
        tracker.finish_parent("FAILED")
        tracker.close_stale_runs()
        raise


def tracking_uri(options: RunOptions, state: dict | None, results_root: Path) -> str:
    """--tracking-uri; else MLflow's own ``MLFLOW_TRACKING_URI``; else, when resuming, the store the
    study started with unless that was the default one; else SQLite under the results directory.
    The default store is always the one under the current results directory: a stored default
    carries the absolute path of the machine (and results directory) that started the study, e.g.
    in committed results continued from a clone."""
    if options.where.tracking_uri:
        return options.where.tracking_uri
    if os.environ.get("MLFLOW_TRACKING_URI", "").strip():
        return os.environ["MLFLOW_TRACKING_URI"].strip()
    if options.continues and state and state.get("tracking_uri") and not stored_uri_was_default(state):
        return state["tracking_uri"]
    return default_tracking_uri(results_root)


def stored_parent(options: RunOptions, state: dict | None, uri: str) -> str | None:
    """The parent run a resumed study continues: the stored one, unless the study moved to
    another default store (its parent run stayed in the old one)."""
    if not options.continues or not state:
        return None
    if not options.where.tracking_uri and state.get("tracking_uri") != uri:
        return None
    return state.get("parent_run_id")


def stored_uri_was_default(state: dict) -> bool:
    """Whether the study started with the default tracking store: recorded in study.json
    (``tracking_uri_default``); a study.json from before that record counts a SQLite store
    named mlflow.db as the default of the results directory it lay in (on resume from the same
    results directory that is the same store again)."""
    flag = state.get("tracking_uri_default")
    if flag is not None:
        return bool(flag)
    uri = state.get("tracking_uri") or ""
    return uri.startswith("sqlite:///") and uri.endswith("/mlflow.db")
