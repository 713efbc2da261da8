"""Run a study on Ray Tune: data once in the driver, trials on Ray, MLflow from the driver,
tables at the end. The checks of ``--resume``/``--extend`` live in ``study.store.resume_checks``, Ray's
start in ``study.execution.ray_setup``, the Tune run in ``study.execution.tuner`` and the tables and plots in
``study.analysis.exports``.

Layout under the results directory (``results/`` by default)::

    results/mlflow.db                 MLflow tracking store (SQLite), unless --tracking-uri
    results/mlflow-artifacts/<study>/ MLflow artifacts of that store
    results/optuna.db                 Optuna studies (optuna-dashboard sqlite:///results/optuna.db)
    results/ray/<study>/              the trial store (study.store.trial_store): each trial's record and
                                      checkpoints, finished runs (Ray's own files live elsewhere)
    results/<study>/                  study.json (state, command) and the exported tables and plots
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from nmt.durations import clock
from nmt.errors import UserError
from nmt.fileio import check_writable_dir, write_lines
from nmt.numerics import apply_numerics, has_avx2
from nmt.ops.kernel_choice import check_kernels
from study.analysis.exports import run_summary, write_command, write_exports
from study.analysis.tables import warnings as table_warnings
from study.execution.disk_watch import StorageStopper, check_storage
from study.execution.ray_setup import (
    BackgroundShutdown,
    check_address,
    check_cluster_fit,
    check_local_fit,
    start_services,
    trial_resources,
)
from study.store.remote_study import mirrored_study, pull_trial_records
from study.execution.row_cost import row_work
from study.execution.run_tracking import open_parent_run, open_tracking, runs_closed_on_error
from study.execution.study_data import prepare_data
from study.execution.study_run import StudyRun, initial_state, mark_stopped
from study.execution.time_limit import TimeLimit, check_time_limit, epoch_caps
from study.execution.trainable import ray_node_id
from study.execution.trial_prices import TrialPrices
from study.execution.tuner import build_tuner, optuna_database
from study.spec.expansion import expand
from study.spec.model import StudySpec, Trial
from study.spec.options import RunOptions
from study.store.migration import apply_adoption, plan_adoption
from study.store.ownership import StudyLock, check_real_tree, owned_path, top_level_link
from study.store.provenance import cpu_description
from study.store.record_validation import BadRecord
from study.store.records import experiment_dir, load_records
from study.store.resume_checks import (
    check_extension,
    check_numerics,
    check_resumable,
    check_resumable_changes,
    resume_command,
    study_argument,
)
from study.store.reuse import reuse_finished_trials, reuse_sources
from study.store.study_state import is_smoke_run, read_state, write_state
from study.store.trial_store import FINISHED


def run_study(spec: StudySpec, options: RunOptions) -> int:
    """Every check that can fail on bad input (resources, results directory, stored records, data,
    resume, tracking store, Ray) runs before anything is written or deleted; then the trials run
    and the tables follow. A run refused before it wrote anything leaves no folder behind."""
    address, resources = check_placement(spec, options)
    results_root = options.results_dir().resolve()
    made = [path for path in (results_root, *results_root.parents) if not path.exists()]
    check_writable_dir(results_root, "--results")
    try:
        run = StudyRun(spec, options, results_root,
                       study_dir=owned_path(results_root, results_root / spec.name, "study directory"),
                       exp_dir=owned_path(results_root, experiment_dir(results_root, spec.name), "trial store directory"),
                       address=address, resources=resources)
        with StudyLock(results_root, spec.name, options.command_line()):
            check_real_tree(run.study_dir, "study directory")
            check_real_tree(run.exp_dir, "trial store")
            search_db = optuna_database(results_root) if spec.fields.search is not None else None
            with mirrored_study(options.where.storage, spec.name, run.study_dir, run.exp_dir, run.say, search_db,
                                options.where.lease_seconds, continue_command(spec, options)) as run.lease:
                if options.continues:  # what the run acts on is checked as input first (--fresh replaces the store)
                    run.store.check_records()
                say_followed_link(results_root, experiment_dir(results_root, spec.name), run.say)
                return _run_locked(run)
    finally:
        _remove_if_empty(made)


def check_placement(spec: StudySpec, options: RunOptions) -> tuple[str | None, dict]:
    """(the Ray cluster's address or None, one trial's resources), refused in one line when no
    trial can run: an unreachable cluster, more CPUs or GPUs than this machine has."""
    check_time_limit(spec, options)
    address = check_address(options)
    resources = trial_resources(spec, options)
    if not address:
        check_local_fit(resources, options)
    warning = check_kernels()  # the trial workers get the driver's switch: a bad one would fail every trial
    if warning:
        options.report.say(f"warning: {warning}")
    return address, resources


def _remove_if_empty(made: list[Path]) -> None:
    """Remove the folders this run created (deepest first) where they are still empty."""
    for path in made:
        try:
            path.rmdir()
        except OSError:
            break


def say_followed_link(results_root: Path, path: Path, say) -> None:
    link = top_level_link(results_root, path)
    if link is not None:
        say(f"note: {link[0]} is a link to {link[1]}; the trial store lives there")


def refuse_or_replace(run: StudyRun) -> bool:
    """Whether the stored results of the study are to be replaced (--fresh, or a --smoke run's);
    refused in one line when a plain run would replace results it should not."""
    spec, options, state, results_root, exp_dir = run.spec, run.options, run.state, run.results_root, run.exp_dir
    if options.continues:
        check_resumable(spec, options, state, results_root, exp_dir)
        return False
    if not exp_dir.exists() and state is None:
        return False
    foreign = run.store.foreign_entries()
    if foreign:  # what --fresh or a smoke run's replacement would delete must be the tool's own store
        raise UserError(f"study {spec.name}: its trial store {exp_dir} holds files the tool did not write "
                        f"({', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}); move them away, or give "
                        f"another --results directory")
    if is_smoke_run(state):  # a check, not a result: the next run, smoke or full, replaces it
        run.say(f"replacing the --smoke run's results of {spec.name} in {results_root}")
        return True
    if spec.tree.get("smoke") and not options.how.fresh:
        raise UserError(f"study {spec.name}: {results_root} holds the results of a full run, which a --smoke run "
                        f"would replace; leave out --results (smoke runs go to results/smoke) or give another "
                        f"--results directory")
    if not options.how.fresh:
        results_flag = options.results_flag()
        if not exp_dir.exists():  # tables and trial records only, e.g. committed reference results
            what = "stored results (tables and trial records)"
            fix = f"python -m study.table {spec.name}{results_flag} rebuilds their tables; --fresh replaces them"
        elif state and state.get("status") == "complete":
            what = "a finished run"
            fix = f"python -m study.table {spec.name}{results_flag} shows its table; --fresh runs it again"
        else:
            what = "an unfinished run"
            fix = "--resume continues it; --fresh starts over"
        raise UserError(f"study {spec.name}: {results_root} holds {what}; {fix}")
    return True


def set_numerics(spec: StudySpec, address: str | None) -> None:
    """This process's environment carries the study's numerics (nmt.numerics), which Ray's local processes
    inherit; its own computing (the estimate) does not need them to have taken. A local machine without
    AVX2 is refused here, before every trial would fail on it."""
    if spec.fields.numerics == "portable" and not address and not has_avx2():
        raise UserError(f"{spec.source}: numerics: portable needs an x86-64 CPU with AVX2, and this machine has none; "
                        f"set numerics: native (or --set numerics=native)")
    apply_numerics(spec.fields.numerics, "numerics", strict=False)


def stored_state(study_dir: Path, fresh: bool) -> dict | None:
    """study.json as stored (None for a new study); a damaged one is refused, unless --fresh replaces it with
    the rest of the study's results."""
    try:
        return read_state(study_dir)
    except BadRecord:
        if not fresh:
            raise
        return None


def with_run_resources(trials: list[Trial], run: StudyRun) -> list[Trial]:
    """The expanded trials with per-trial threads, device and numerics set from the resources and the study
    (how the CPU computes: not in the trial key), and where their store and its mirror are."""
    for trial in trials:
        trial.config["train"]["threads"] = max(1, int(run.resources["cpu"]))
        trial.config["train"]["device"] = "cuda" if run.resources["gpu"] > 0 else "cpu"
        trial.config["train"]["numerics"] = run.spec.fields.numerics
        trial.storage = str(run.exp_dir)
        trial.mirror = run.options.where.storage or ""
        trial.announce_start = run.options.how.time_limit is not None
    return trials


def check_before_services(run: StudyRun) -> bool:
    """The phases that read and refuse, before Ray starts or anything is written: study.json, the replacement
    rule, the data, what --resume and --extend may continue, the --reuse-from studies and the tracking store;
    the trials expanded once. Returns whether the stored results are to be replaced."""
    options = run.options
    run.started = time.time()  # the run's own time: after the lock and a --storage pull-down
    run.state = stored_state(run.study_dir, options.how.fresh)
    replace = refuse_or_replace(run)
    run.say(f"study {run.spec.name}: {run.spec.fields.description}")
    prepared = prepare_data(run.spec, run.say)
    run.spec, run.references, run.stats = prepared.spec, prepared.references, prepared.stats
    if options.continues:
        check_resumable_changes(run.spec, options, run.state)
        check_numerics(run.spec, run.exp_dir)
    run.reuse_sources = reuse_sources(run.spec, list(options.what.reuse_from), run.results_root)
    open_tracking(run)
    run.trials = with_run_resources(expand(run.spec), run)
    if not replace:  # a replaced run's store is cleared first, so its plan is made after that
        run.plan = plan_adoption(run.store, run.trials)
        if options.how.extend and run.spec.fields.search is None:
            check_extension(run.spec, run.trials, run.exp_dir, run.plan)  # before Ray starts and any stored trial moves
    return replace


def _run_locked(run: StudyRun) -> int:
    """The study run, phase by phase, in its folders (locked); returns the exit code."""
    replace = check_before_services(run)
    set_numerics(run.spec, run.address)
    start_services(run.tracker, run.options, run.spec.fields.numerics)
    stopping = None
    try:
        try:
            if run.address:
                check_cluster_fit(run.resources, run.address)
            if replace:
                _clear(run.results_root, run.spec.name)
                run.state = None
                run.plan = plan_adoption(run.store, run.trials)
            store_before_trials(run)
            parent = open_parent_run(run)
            with runs_closed_on_error(run.tracker):
                if run.spec.fields.search is None:  # (search samples keep their keys)
                    run.tracker.supersede_children({(trial.label, str(trial.seed)): trial.key for trial in run.trials},
                                                   set(run.store.keys()))
                run.written = initial_state(run, parent)
                write_state(run.study_dir, run.written)
                write_command(run.study_dir, run.written["commands"])
                total = run.trials_to_run()
                run.say(f"{total} trial{'' if total == 1 else 's'} ({run.spec.kind}); tracking {run.tracking_uri} "
                        f"(parent run {parent})")
                records, received, held_back = run_trials(run)
                if held_back and not received and ended_but_held_back(run, records, held_back):
                    return time_limited(run, records, held_back)
                if received or len(records) < total or any(r["status"] == "running" for r in records):
                    return stopped(run, received)
        finally:  # Ray's processes wind down while the tables and plots are written
            stopping = BackgroundShutdown()

        return finish_or_say_how_to_resume(run, records)
    except BaseException as err:
        mark_stopped(run, " ".join(f"{type(err).__name__}: {err}".split())[:300])
        raise
    finally:
        if stopping is not None:
            stopping.join()  # Ray is down when the study returns (a next ray.init must not race it)


def store_before_trials(run: StudyRun) -> None:
    """The trial store made ready: stored trials adopted under their new keys, finished trials of
    ``--reuse-from`` studies copied in, and the test references written beside the tables."""
    (run.exp_dir / FINISHED).mkdir(parents=True, exist_ok=True)
    apply_adoption(run.store, run.plan, log=run.say)
    if run.reuse_sources:
        reuse_finished_trials(run.store, run.trials, run.reuse_sources, log=run.say)
    write_lines(run.study_dir / "test.ref", run.references)


def stopped(run: StudyRun, received: bool) -> int:
    """A run stopped by SIGINT or SIGTERM: open runs marked KILLED, study.json marked stopped, the resume
    command printed, and 128 + the signal returned. Tune ends fit() early on SIGINT (our SIGTERM handler
    forwards it)."""
    closed = run.tracker.close_stale_runs()
    name = "SIGTERM" if received else "SIGINT"
    mark_stopped(run, name)
    print(f"\n{name}: stopped; finished trials are kept, {closed} open MLflow run(s) marked KILLED. "
          f"Resume with: {continue_command(run.spec, run.options)}", file=sys.stderr, flush=True)
    return 128 + (signal.SIGTERM if received else signal.SIGINT)


def run_trials(run: StudyRun) -> tuple[list[dict], bool, dict[str, str]]:
    """Run the trials on Ray Tune; (the trial store's records afterwards, whether SIGTERM stopped
    them, the trials --time-limit held back: {key: "ROW seed S"}). A full or read-only results directory,
    or the study's lease in the store lost, stops every trial and is one line (UserError)."""
    spec, options = run.spec, run.options
    storage = StorageStopper(run.exp_dir, lease=run.lease)
    with _sigterm_as_sigint() as received, tempfile.TemporaryDirectory(prefix="rnmt-ray-") as ray_storage:
        work = None if spec.fields.search is not None else row_work(run.trials, run.stats)
        if options.where.storage:  # a trial on another node keeps its working copy in that node's scratch (trainable)
            node = ray_node_id()
            for trial in run.trials:
                trial.home_node = node
        prices = TrialPrices(work, machine=cpu_description())  # a cluster's nodes may differ: the driver's, a guess
        limit = None if options.how.time_limit is None else TimeLimit(options.how.time_limit, run.started, prices,
                                                                      run.say, epoch_caps(run.trials))
        tuner, to_run = build_tuner(run, storage, Path(ray_storage), prices, limit)
        try:
            if to_run:
                tuner.fit()
        except Exception:
            if storage.trouble() is None and storage.lease_lost() is None:
                raise
        finally:
            tuner = None  # Tune's Ray handles go before Ray does, also from a traceback's frame (see BackgroundShutdown)
    check_storage(run.exp_dir, storage, spec.name, continue_command(spec, options))
    pull_trial_records(options.where.storage, spec.name, run.exp_dir)  # trials that ran on other nodes, with --storage
    return load_records(run.results_root, spec.name), bool(received), dict(prices.held_back)


FAILED_TRIALS_EXIT = 1  # a study that finished with failed trials (2 is bad input, 130 Ctrl-C)
TIME_LIMIT_EXIT = 3  # --time-limit held back trials: the study is not complete, --resume continues it


def ended_but_held_back(run: StudyRun, records: list[dict], held_back: dict[str, str]) -> bool:
    """Whether every trial of the run ended (finished, diverged, failed) but those --time-limit held back; a run
    Ctrl-C stopped early has others unfinished."""
    ended = {record["key"] for record in records if record["status"] != "running"}
    return all(trial.key in ended or trial.key in held_back for trial in run.trials)


def time_limited(run: StudyRun, records: list[dict], held_back: dict[str, str]) -> int:
    """A run whose --time-limit held back trials: the trials under way finished, the others wait for the
    next run. Their MLflow runs (opened when Tune started them) are marked KILLED, study.json is marked stopped,
    what is done and the command that continues are said, and ``TIME_LIMIT_EXIT`` returned."""
    run.tracker.close_stale_runs()
    mark_stopped(run, f"--time-limit {run.options.how.time_limit:g}")
    planned = {trial.key for trial in run.trials}
    statuses = [record["status"] for record in records if record["key"] in planned and record["key"] not in held_back]
    failed = statuses.count("failed")
    names = ", ".join(sorted(held_back.values())[:4]) + (" ..." if len(held_back) > 4 else "")
    print(f"\n--time-limit {run.options.how.time_limit:g}: {len(held_back)} trial(s) held back ({names}), "
          f"{len(statuses) - failed} of {len(planned)} done{f', {failed} failed' if failed else ''}; what they "
          f"trained is kept. Continue with: {continue_command(run.spec, run.options)}", file=sys.stderr, flush=True)
    return TIME_LIMIT_EXIT


def finish_or_say_how_to_resume(run: StudyRun, records: list[dict]) -> int:
    """``finish`` with the state this run wrote, and 0, or ``FAILED_TRIALS_EXIT`` when a trial failed (an
    exception; a diverged trial is a result, not a failure); Ctrl-C while it writes the tables keeps every
    trial, and the same command with --resume only writes them: study.json is marked stopped, that command
    printed and 130 returned."""
    try:
        with runs_closed_on_error(run.tracker):
            finish(run, records)
    except KeyboardInterrupt:
        mark_stopped(run, "SIGINT while the tables were written")
        print(f"\nSIGINT: stopped while writing the tables; every trial is kept. Resume with: "
              f"{continue_command(run.spec, run.options)} (it trains nothing and writes the tables)", file=sys.stderr,
              flush=True)
        return 128 + signal.SIGINT
    return FAILED_TRIALS_EXIT if any(record["status"] == "failed" for record in records) else 0


def finish(run: StudyRun, records: list[dict]) -> None:
    """All trials done: tables and plots, MLflow reconciled with the trial store, study.json complete."""
    spec, tracker, say, state = run.spec, run.tracker, run.say, run.written
    say("trials done; exporting tables and plots")
    tracker.reconcile(records)
    outputs, table = write_exports(spec, records, run.references, run.study_dir)
    tracker.log_study_table(table.rows)
    state.update(status="complete", finished=time.strftime("%Y-%m-%d %H:%M:%S"),
                 wall_seconds=round(state.get("wall_seconds", 0) + time.time() - run.started, 1))
    write_state(run.study_dir, state)
    tracker.finish_parent("FINISHED", outputs)
    for line in run_summary(run.study_dir, outputs):
        say(line)
    say(f"MLflow: mlflow ui --backend-store-uri {run.tracking_uri} --host 127.0.0.1   (study '{spec.name}', parent run "
        f"{tracker.parent_id})")
    for line in table_warnings(table.rows):
        print(f"warning: {line}", file=sys.stderr)
    if tracker.failures:
        print(f"warning: {tracker.failures} MLflow logging call(s) were lost ({tracker.first_failure}); the tables "
              f"above come from the trial store, and python -m study.table {spec.name} rebuilds them",
              file=sys.stderr)
    failed = sum(record["status"] == "failed" for record in records)
    if failed:  # the last line, and a non-zero exit (finish_or_say_how_to_resume)
        print(f"study {spec.name} done in {clock(time.time() - run.started)}, but {failed} of {len(records)} trials "
              f"failed (the table's status column names the error; once its cause is fixed, --resume trains them "
              f"again): exit {FAILED_TRIALS_EXIT}", file=sys.stderr)
        return
    say(f"study {spec.name} done in {clock(time.time() - run.started)}")


def continue_command(spec: StudySpec, options: RunOptions) -> str:
    """The command that continues this study after a stop: the one the user typed, plus --resume."""
    if options.what.study:  # the command typed, or the one a Python call stands for: every option kept
        return resume_command(options.command_line())
    return f"python -m study.run {study_argument(spec)} --resume{options.results_flag()}"


@contextlib.contextmanager
def _sigterm_as_sigint():
    """SIGTERM (``kill PID``, a batch system's stop) ends the study like Ctrl-C: Tune's own SIGINT
    handler stops the trials and saves its state, so ``--resume`` continues. Yields a list that
    holds the signal once one arrived."""
    received: list[int] = []

    def forward(signum, frame):
        received.append(signum)
        os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def _clear(results_root: Path, study: str) -> None:
    """Delete a study's tables and trial store (--fresh); both checked to lie inside the results directory."""
    targets = [owned_path(results_root, experiment_dir(results_root, study), "trial store directory"),
               owned_path(results_root, results_root / study, "study directory")]
    for target in targets:
        if target.is_dir():
            shutil.rmtree(target)
