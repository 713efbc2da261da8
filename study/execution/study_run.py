"""One run of a study, as the driver's phases share it (``StudyRun``): the options asked for, the study
with its data resolved, where its results and trial store live, the trials expanded once, the MLflow
tracker, and ``study.json`` as stored and as this run wrote it. Also the states this run writes into
``study.json``: as it starts (``initial_state``, which declares the study file's new claims:
``study.store.claim_declarations``) and when it ends before the study finished (``mark_stopped``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from study.execution.tracking import StudyTracker, default_tracking_uri
from study.spec.loading import spec_to_dict
from study.spec.model import StudySpec, Trial
from study.spec.options import RunOptions
from study.spec.portable import portable_tree
from study.store.migration import Move
from study.store.claim_declarations import KEY, now, with_declarations
from study.store.provenance import environment
from study.store.remote_study import LeaseKeeper
from study.store.study_state import command_history, with_command, write_state
from study.store.trial_store import TrialStore


@dataclass
class StudyRun:
    """What the phases of one study run share. ``spec`` holds the resolved data once the data is
    prepared; ``trials`` are expanded once, with this run's resources; ``state`` is study.json as stored
    (None for a new or replaced study) and ``written`` the state this run wrote, once it has."""

    spec: StudySpec
    options: RunOptions
    results_root: Path  # the results directory, resolved
    study_dir: Path  # results/<study>: study.json, the tables and plots
    exp_dir: Path  # the trial store
    address: str | None  # the Ray cluster's, or None for a local instance
    resources: dict  # one trial's {"cpu": ..., "gpu": ...}
    started: float = field(default_factory=time.time)
    state: dict | None = None
    written: dict | None = None
    references: list[str] = field(default_factory=list)  # the test set's references
    stats: dict = field(default_factory=dict)  # the corpus statistics
    trials: list[Trial] = field(default_factory=list)
    plan: list[Move] = field(default_factory=list)  # stored trials to move to their keys (study.store.migration)
    reuse_sources: list = field(default_factory=list)  # the --reuse-from studies' stores (study.store.reuse)
    tracker: StudyTracker | None = None
    tracking_uri: str = ""
    lease: LeaseKeeper | None = None  # the study's lease in the --storage store, while the run holds it
    say: Callable[[str], None] = field(init=False)  # the run's progress lines (options.report.say)
    store: TrialStore = field(init=False)  # the trial store at exp_dir

    def __post_init__(self):
        self.say = self.options.report.say
        self.store = TrialStore(self.exp_dir)

    def trials_to_run(self) -> int:
        """The trials of the study: a search's samples, or one per row and seed."""
        search = self.spec.fields.search
        return search.num_samples if search is not None else len(self.trials)


def initial_state(run: StudyRun, parent: str) -> dict:
    """study.json as this run starts (``run.state``: the stored one, None for a new or replaced study)."""
    spec, state, command = run.spec, run.state, run.options.command_line()
    started = now()
    declared = with_declarations(state, spec.fields.claims, started, str(run.study_dir / "study.json"))
    return {"study": spec.name, "status": "running", "request": spec.tree,
            "portable_request": portable_tree(spec.tree), "spec": spec_to_dict(spec),
            "fingerprint": spec.fingerprint, "tracking_uri": run.tracking_uri,
            "tracking_uri_default": run.tracking_uri == default_tracking_uri(run.results_root), "parent_run_id": parent,
            "command": command, "commands": with_command(command_history(state), command),
            "started": (state or {}).get("started", started),
            "wall_seconds": (state or {}).get("wall_seconds", 0), "data": run.stats, "environment": environment(),
            **({KEY: declared} if declared else {})}


def mark_stopped(run: StudyRun, reason: str) -> None:
    """study.json of a run that ended before the study finished (a signal, an error: a store that went away,
    a full disk) says so, and why, instead of ``running``; only a state this run wrote, and a write that
    fails (the disk that stopped the run) leaves the run's own error to be told."""
    if run.written is None or run.written.get("status") != "running":
        return
    try:
        write_state(run.study_dir, {**run.written, "status": "stopped", "stopped_by": reason, "stopped": now()})
    except OSError:
        pass
