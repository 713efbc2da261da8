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
import dataclasses
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from nmt.config import config_from_dict
from nmt.data.corpus import corpus_languages, discover_corpus, resolve_path
from nmt.data.pipeline import load_data, resolve_cache_dir
from nmt.durations import clock
from nmt.numerics import apply_numerics, has_avx2
from nmt.ops.kernel_choice import check_kernels
from nmt.errors import UserError
from nmt.fileio import check_writable_dir, write_json, write_lines
from study.analysis.exports import printed_tables, shown_path, write_command, write_exports
from study.analysis.tables import warnings as table_warnings
from study.execution.disk_watch import StorageStopper, check_storage
from study.execution.dry_run import dry_run, stored_progress
from study.execution.ray_setup import (
    BackgroundShutdown,
    check_address,
    check_cluster_fit,
    check_local_fit,
    start_services,
    trial_resources,
    trials_at_once,
)
from study.execution.remote_study import mirrored_study, pull_trial_records, store_view
from study.execution.row_cost import row_work
from study.execution.tracking import RESULTS_TAG, StudyTracker, default_tracking_uri
from study.execution.trainable import ray_node_id
from study.execution.tuner import build_tuner, optuna_database
from study.spec.expansion import expand, study_axes
from study.spec.loading import spec_to_dict
from study.spec.model import StudySpec, Trial
from study.spec.options import RunOptions
from study.spec.portable import portable_tree
from study.store.migration import Move, apply_adoption, plan_adoption
from study.store.ownership import StudyLock, check_real_tree, owned_path, top_level_link
from study.store.provenance import environment
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
from study.store.reuse import reusable_keys, reuse_finished_trials, reuse_sources
from study.store.study_state import STATE_FILE, command_history, is_smoke_run, read_state, with_command
from study.store.trial_store import FINISHED, TrialStore

# ---------------------------------------------------------------------------
# state of a study run (results/<study>/study.json)


def write_state(study_dir: Path, state: dict) -> None:
    study_dir.mkdir(parents=True, exist_ok=True)
    write_json(study_dir / STATE_FILE, state)


# ---------------------------------------------------------------------------
# data


@dataclass
class PreparedData:
    """The study with its data block resolved (absolute paths, the shared cache), the test
    references and the corpus statistics, as ``prepare_data`` returns them."""

    spec: StudySpec
    references: list[str]
    stats: dict


def prepare_data(spec: StudySpec, opts: RunOptions, log=None) -> PreparedData:
    """Resolve the data block (--data-dir, absolute paths, the shared cache) and load it once in
    the driver (clear errors before any trial; the corpus and SentencePiece models are cached
    for the trials). The spec given is left as it is: the returned one holds the resolved data."""
    data = dict(spec.fields.data)
    if opts.data_dir is not None:
        data.update(corpus_in(opts.data_dir, opts.langs))
    for split in ("train", "valid", "test"):
        if data.get(split):
            data[split] = [str(resolve_path(p, f"data.{split}")) for p in data[split]]
    cfg = config_from_dict({**spec.base_tree(), "data": data}, source=spec.source)
    data["cache_dir"] = str(resolve_cache_dir(cfg.data).resolve())
    cfg = config_from_dict({**spec.base_tree(), "data": data}, source=spec.source)
    parallel = load_data(cfg.data, log=log or opts.say)
    resolved = dataclasses.replace(spec, fields=dataclasses.replace(spec.fields, data=data),
                                   tree={**spec.tree, "data": data})
    return PreparedData(resolved, [ref for _, ref in parallel.test_text], parallel.stats)


def corpus_in(data_dir: Path, langs: str | None) -> dict:
    """--data-dir DIR [--langs SRC-TGT] as the data keys it sets: no preset, the train, valid and
    test files of DIR (the only language pair there when --langs is left out)."""
    if langs is None:
        found = corpus_languages(data_dir)
        if len(found) != 2:
            raise UserError(f"--data-dir {data_dir} holds languages {', '.join(found) or 'none'}; "
                            "choose a pair with --langs SRC-TGT (e.g. --langs en-de)")
        langs = "-".join(found)
    if langs.count("-") != 1:
        raise UserError(f"--langs {langs!r}: expected SRC-TGT, e.g. en-de")
    src, tgt = langs.split("-")
    return {"preset": None, **discover_corpus(data_dir, src, tgt)}


def finalize_trials(spec: StudySpec, opts: RunOptions, exp_dir: Path) -> tuple[list[Trial], list[Move]]:
    """Expanded trials with per-trial threads, device and numerics set from the resources and the study, and which
    stored trials are to move to their keys (study.store.migration). Reads the store, writes nothing."""
    resources = trial_resources(spec, opts)
    trials = expand(spec)
    for trial in trials:
        trial.config["train"]["threads"] = max(1, int(resources["cpu"]))
        trial.config["train"]["device"] = "cuda" if resources["gpu"] > 0 else "cpu"
        trial.config["train"]["numerics"] = spec.fields.numerics  # how the CPU computes: not in the trial key
        trial.storage = str(exp_dir)
        trial.mirror = opts.storage or ""
    return trials, plan_adoption(TrialStore(exp_dir), trials)


# ---------------------------------------------------------------------------
# the run


def run_study(spec: StudySpec, opts: RunOptions) -> int:
    """Every check that can fail on bad input (resources, results directory, stored records, data,
    resume, tracking store, Ray) runs before anything is written or deleted; then the trials run
    and the tables follow. A run refused before it wrote anything leaves no folder behind."""
    address, resources = check_placement(spec, opts)
    results_root = opts.results.resolve()
    made = [path for path in (results_root, *results_root.parents) if not path.exists()]
    check_writable_dir(results_root, "--results")
    try:
        study_dir = owned_path(results_root, results_root / spec.name, "study directory")
        exp_dir = owned_path(results_root, experiment_dir(results_root, spec.name), "trial store directory")
        with StudyLock(results_root, spec.name, opts.command):
            check_real_tree(study_dir, "study directory")
            check_real_tree(exp_dir, "trial store")
            search_db = optuna_database(results_root) if spec.fields.search is not None else None
            with mirrored_study(opts.storage, spec.name, study_dir, exp_dir, opts.say, search_db):
                if opts.resume:  # what the run acts on is checked as input first (--fresh replaces the store)
                    TrialStore(exp_dir).check_records()
                say_followed_link(results_root, experiment_dir(results_root, spec.name), opts.say)
                return _run_locked(spec, opts, results_root, study_dir, exp_dir, address, resources)
    finally:
        _remove_if_empty(made)


def check_placement(spec: StudySpec, opts: RunOptions) -> tuple[str | None, dict]:
    """(the Ray cluster's address or None, one trial's resources), refused in one line when no
    trial can run: an unreachable cluster, more CPUs or GPUs than this machine has."""
    address = check_address(opts)
    resources = trial_resources(spec, opts)
    if not address:
        check_local_fit(resources, opts)
    warning = check_kernels()  # the trial workers get the driver's switch: a bad one would fail every trial
    if warning:
        opts.say(f"warning: {warning}")
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


def refuse_or_replace(spec: StudySpec, opts: RunOptions, state: dict | None, results_root: Path, exp_dir: Path) -> bool:
    """Whether the stored results of the study are to be replaced (--fresh, or a --smoke run's);
    refused in one line when a plain run would replace results it should not."""
    if opts.resume:
        check_resumable(spec, opts, state, results_root, exp_dir)
        return False
    if not exp_dir.exists() and state is None:
        return False
    foreign = TrialStore(exp_dir).foreign_entries()
    if foreign:  # what --fresh or a smoke run's replacement would delete must be the tool's own store
        raise UserError(f"study {spec.name}: its trial store {exp_dir} holds files the tool did not write "
                        f"({', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}); move them away, or give "
                        f"another --results directory")
    if is_smoke_run(state):  # a check, not a result: the next run, smoke or full, replaces it
        opts.say(f"replacing the --smoke run's results of {spec.name} in {results_root}")
        return True
    if spec.tree.get("smoke") and not opts.fresh:
        raise UserError(f"study {spec.name}: {results_root} holds the results of a full run, which a --smoke run "
                        f"would replace; leave out --results (smoke runs go to results/smoke) or give another "
                        f"--results directory")
    if not opts.fresh:
        results_flag = opts.results_flag()
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


def stored_state(study_dir: Path, opts: RunOptions) -> dict | None:
    """study.json as stored (None for a new study); a damaged one is refused, unless --fresh replaces it with
    the rest of the study's results."""
    try:
        return read_state(study_dir)
    except BadRecord:
        if not opts.fresh:
            raise
        return None


def _run_locked(spec: StudySpec, opts: RunOptions, results_root: Path, study_dir: Path, exp_dir: Path,
                address: str | None, resources: dict) -> int:
    state = stored_state(study_dir, opts)
    start = time.time()
    replace = refuse_or_replace(spec, opts, state, results_root, exp_dir)

    opts.say(f"study {spec.name}: {spec.fields.description}")
    prepared = prepare_data(spec, opts)
    spec, references, stats = prepared.spec, prepared.references, prepared.stats
    if opts.resume:
        check_resumable_changes(spec, opts, state)
    if opts.resume or opts.extend:
        check_numerics(spec, exp_dir)
    sources = reuse_sources(spec, list(opts.reuse_from), results_root)
    tracker, uri = open_tracking(spec, opts, state, results_root)
    if not replace:  # a replaced run's store is cleared first, so its plan is made after that
        trials, plan = finalize_trials(spec, opts, exp_dir)
        if opts.extend and spec.fields.search is None:
            check_extension(spec, trials, exp_dir, plan)  # before Ray starts and any stored trial moves

    set_numerics(spec, address)
    start_services(tracker, opts, spec.fields.numerics)
    stopping = None
    written: list[dict] = []  # study.json as this run wrote it (running), once it has
    try:
        try:
            if address:
                check_cluster_fit(resources, address)
            if replace:
                _clear(results_root, spec.name)
                state = None
                trials, plan = finalize_trials(spec, opts, exp_dir)
            store_before_trials(exp_dir, study_dir, trials, plan, sources, references, opts.say)
            parent = open_parent_run(spec, opts, tracker, state, uri, len(trials))
            with _runs_closed_on_error(tracker):
                if spec.fields.search is None:  # (search samples keep their keys)
                    tracker.supersede_children({(trial.label, str(trial.seed)): trial.key for trial in trials},
                                               set(TrialStore(exp_dir).keys()))
                state = initial_state(spec, opts, state, uri, parent, stats)
                write_state(study_dir, state)
                written.append(state)
                write_command(study_dir, state["commands"])
                total = spec.fields.search.num_samples if spec.fields.search else len(trials)
                opts.say(f"{total} trial{'' if total == 1 else 's'} ({spec.kind}); tracking {uri} (parent run {parent})")
                records, received = run_trials(spec, opts, trials, tracker, results_root, exp_dir, stats)
                if received or len(records) < total or any(r["status"] == "running" for r in records):
                    return stopped(spec, opts, tracker, received, study_dir, written)
        finally:  # Ray's processes wind down while the tables and plots are written
            stopping = BackgroundShutdown()

        return finish_or_say_how_to_resume(spec, opts, tracker, records, references, study_dir, written, start, uri)
    except BaseException as err:
        mark_stopped(study_dir, written, " ".join(f"{type(err).__name__}: {err}".split())[:300])
        raise
    finally:
        if stopping is not None:
            stopping.join()  # Ray is down when the study returns (a next ray.init must not race it)


def mark_stopped(study_dir: Path, written: list[dict], reason: str) -> None:
    """study.json of a run that ended before the study finished (a signal, an error: a store that went away,
    a full disk) says so, and why, instead of ``running``; only a state this run wrote, and a write that
    fails (the disk that stopped the run) leaves the run's own error to be told."""
    if not written or written[-1].get("status") != "running":
        return
    try:
        write_state(study_dir, {**written[-1], "status": "stopped", "stopped_by": reason,
                                "stopped": time.strftime("%Y-%m-%d %H:%M:%S")})
    except OSError:
        pass


def open_tracking(spec: StudySpec, opts: RunOptions, state: dict | None,
                  results_root: Path) -> tuple[StudyTracker, str]:
    """The study's MLflow tracker (not yet connected) and its tracking URI."""
    uri = tracking_uri(opts, state, results_root)
    tracker = StudyTracker(uri, spec.name, artifact_root=results_root / "mlflow-artifacts",
                           description=spec.fields.description, varied=study_axes(spec),
                           run_tags={"smoke": str(bool(spec.tree.get("smoke"))).lower(), RESULTS_TAG: str(results_root),
                                     **environment()}, say=opts.say)
    return tracker, uri


def store_before_trials(exp_dir: Path, study_dir: Path, trials: list[Trial], plan: list[Move],
                        sources: list, references: list[str], say) -> None:
    """The trial store made ready: stored trials adopted under their new keys, finished trials of
    ``--reuse-from`` studies copied in, and the test references written beside the tables."""
    (exp_dir / FINISHED).mkdir(parents=True, exist_ok=True)
    apply_adoption(TrialStore(exp_dir), plan, log=say)
    if sources:
        reuse_finished_trials(TrialStore(exp_dir), trials, sources, log=say)
    write_lines(study_dir / "test.ref", references)


def open_parent_run(spec: StudySpec, opts: RunOptions, tracker: StudyTracker, state: dict | None, uri: str,
                    trials: int) -> str:
    """Runs a previous driver left RUNNING closed, then the study's parent run opened (the stored
    one again on --resume); returns its id."""
    closed = tracker.close_stale_runs(_stored_parent(opts, state, uri))
    if closed:
        opts.say(f"closed {closed} MLflow run(s) left RUNNING by a previous driver (marked KILLED)")
    return tracker.start_parent(spec.fingerprint, {"description": spec.fields.description, "kind": spec.kind,
                                                   "trials": trials, "command": opts.command},
                                parent_id=_stored_parent(opts, state, uri))


def stopped(spec: StudySpec, opts: RunOptions, tracker: StudyTracker, received: bool, study_dir: Path,
            written: list[dict]) -> int:
    """A run stopped by SIGINT or SIGTERM: open runs marked KILLED, study.json marked stopped, the resume
    command printed, and 128 + the signal returned. Tune ends fit() early on SIGINT (our SIGTERM handler
    forwards it)."""
    closed = tracker.close_stale_runs()
    name = "SIGTERM" if received else "SIGINT"
    mark_stopped(study_dir, written, name)
    print(f"\n{name}: stopped; finished trials are kept, {closed} open MLflow run(s) marked KILLED. "
          f"Resume with: {continue_command(spec, opts)}", file=sys.stderr, flush=True)
    return 128 + (signal.SIGTERM if received else signal.SIGINT)


@contextlib.contextmanager
def _runs_closed_on_error(tracker: StudyTracker):
    """An error after the parent run opened (a bug, an export that fails, Ctrl-C while exporting)
    leaves no MLflow run RUNNING: the parent is marked FAILED, its open children KILLED."""
    try:
        yield
    except BaseException:
        tracker.finish_parent("FAILED")
        tracker.close_stale_runs()
        raise


def initial_state(spec: StudySpec, opts: RunOptions, state: dict | None, uri: str, parent: str, stats: dict) -> dict:
    """study.json as this run starts (``state``: the stored one, None for a new or replaced study)."""
    return {"study": spec.name, "status": "running", "request": spec.tree,
            "portable_request": portable_tree(spec.tree), "spec": spec_to_dict(spec),
            "fingerprint": spec.fingerprint, "tracking_uri": uri,
            "tracking_uri_default": uri == default_tracking_uri(opts.results.resolve()), "parent_run_id": parent,
            "command": opts.command, "commands": with_command(command_history(state), opts.command),
            "started": (state or {}).get("started", time.strftime("%Y-%m-%d %H:%M:%S")),
            "wall_seconds": (state or {}).get("wall_seconds", 0), "data": stats, "environment": environment()}


def run_trials(spec: StudySpec, opts: RunOptions, trials: list[Trial], tracker: StudyTracker, results_root: Path,
               exp_dir: Path, stats: dict) -> tuple[list[dict], bool]:
    """Run the trials on Ray Tune; (the trial store's records afterwards, whether SIGTERM stopped
    them). A full or read-only results directory stops every trial and is one line (UserError)."""
    storage = StorageStopper(exp_dir)
    with _sigterm_as_sigint() as received, tempfile.TemporaryDirectory(prefix="rnmt-ray-") as ray_storage:
        work = None if spec.fields.search is not None else row_work(trials, stats)
        if opts.storage:  # a trial on another node keeps its working copy in that node's scratch (trainable)
            node = ray_node_id()
            for trial in trials:
                trial.home_node = node
        tuner, to_run = build_tuner(spec, trials, opts, tracker, results_root, exp_dir, storage, Path(ray_storage),
                                    row_work=work)
        try:
            if to_run:
                tuner.fit()
        except Exception:
            if storage.trouble() is None:
                raise
        finally:
            tuner = None  # Tune's Ray handles go before Ray does, also from a traceback's frame (see BackgroundShutdown)
    check_storage(exp_dir, storage, spec.name, continue_command(spec, opts))
    pull_trial_records(opts.storage, spec.name, exp_dir)  # trials that ran on other nodes, with --storage
    return load_records(results_root, spec.name), bool(received)


def finish_or_say_how_to_resume(spec: StudySpec, opts: RunOptions, tracker: StudyTracker, records: list[dict],
                                references: list[str], study_dir: Path, written: list[dict], start: float,
                                uri: str) -> int:
    """``finish`` with the state this run wrote, and 0; Ctrl-C while it writes the tables keeps every trial, and
    the same command with --resume only writes them: study.json is marked stopped, that command printed and
    130 returned."""
    try:
        with _runs_closed_on_error(tracker):
            finish(spec, tracker, records, references, study_dir, written[-1], start, uri, opts.say)
    except KeyboardInterrupt:
        mark_stopped(study_dir, written, "SIGINT while the tables were written")
        print(f"\nSIGINT: stopped while writing the tables; every trial is kept. Resume with: "
              f"{continue_command(spec, opts)} (it trains nothing and writes the tables)", file=sys.stderr, flush=True)
        return 128 + signal.SIGINT
    return 0


def finish(spec: StudySpec, tracker: StudyTracker, records: list[dict], references: list[str], study_dir: Path,
           state: dict, start: float, uri: str, say) -> None:
    """All trials done: tables and plots, MLflow reconciled with the trial store, study.json complete."""
    say("trials done; exporting tables and plots")
    tracker.reconcile(records)
    outputs, table = write_exports(spec, records, references, study_dir)
    tracker.log_study_table(table.rows)
    state.update(status="complete", finished=time.strftime("%Y-%m-%d %H:%M:%S"),
                 wall_seconds=round(state.get("wall_seconds", 0) + time.time() - start, 1))
    write_state(study_dir, state)
    tracker.finish_parent("FINISHED", outputs)
    say(printed_tables(study_dir, outputs))
    say(f"wrote {', '.join(shown_path(p) for p in outputs)}")
    say(f"MLflow: mlflow ui --backend-store-uri {uri} --host 127.0.0.1   (study '{spec.name}', parent run "
        f"{tracker.parent_id})")
    for line in table_warnings(table.rows):
        print(f"warning: {line}", file=sys.stderr)
    if tracker.failures:
        print(f"warning: {tracker.failures} MLflow logging call(s) were lost ({tracker.first_failure}); the tables "
              f"above come from the trial store, and python -m study.table {spec.name} rebuilds them",
              file=sys.stderr)
    say(f"study {spec.name} done in {clock(time.time() - start)}")


def continue_command(spec: StudySpec, opts: RunOptions) -> str:
    """The command that continues this study after a stop: the one the user typed, plus --resume."""
    if opts.command:
        return resume_command(opts.command)
    return f"python -m study.run {study_argument(spec)} --resume{opts.results_flag()}"


def tracking_uri(opts: RunOptions, state: dict | None, results_root: Path) -> str:
    """--tracking-uri; else, when resuming, the store the study started with unless that was
    the default one; else SQLite under the results directory. The default store is always the
    one under the current results directory: a stored default carries the absolute path of
    the machine (and results directory) that started the study, e.g. in committed results
    continued from a clone."""
    if opts.tracking_uri:
        return opts.tracking_uri
    if opts.resume and state and state.get("tracking_uri") and not stored_uri_was_default(state):
        return state["tracking_uri"]
    return default_tracking_uri(results_root)


def _stored_parent(opts: RunOptions, state: dict | None, uri: str) -> str | None:
    """The parent run a resumed study continues: the stored one, unless the study moved to
    another default store (its parent run stayed in the old one)."""
    if not opts.resume or not state:
        return None
    if not opts.tracking_uri and state.get("tracking_uri") != uri:
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


def dry_run_study(spec: StudySpec, opts: RunOptions) -> int:
    """--dry-run: the data prepared (and cached), every row's model timed; no Ray, no results."""

    opts.say(f"study {spec.name}: {spec.fields.description}")
    sources = reuse_sources(spec, list(opts.reuse_from), opts.results.resolve())
    prepared = prepare_data(spec, opts)
    spec, stats = prepared.spec, prepared.stats
    resources = trial_resources(spec, opts)
    concurrency = trials_at_once(resources, opts)
    check_real_tree(experiment_dir(opts.results.resolve(), spec.name), "trial store")
    # with --storage, what the store holds too, as the run would see it (study.execution.remote_study)
    with store_view(opts.storage if opts.resume else None, spec.name, opts.results.resolve()) as results_root:
        exp_dir = experiment_dir(results_root, spec.name)
        store = TrialStore(exp_dir)
        if opts.resume:
            store.check_records()
        trials = expand(spec)
        stored = None
        if opts.resume:  # only what is left of the study counts, and what the run would refuse is refused
            state = read_state(results_root / spec.name)
            check_resumable(spec, opts, state, opts.results.resolve(), exp_dir)  # messages name the user's folder
            check_resumable_changes(spec, opts, state)
            check_numerics(spec, exp_dir)
            if spec.fields.search is None:
                plan = plan_adoption(store, trials)
                if opts.extend:
                    check_extension(spec, trials, exp_dir, plan)
                stored = stored_progress(store, trials, plan)
        reused = reusable_keys(trials, sources, store)
    return dry_run(spec, stats, resources["cpu"], concurrency, log=opts.say, reused=reused, stored=stored)


def _clear(results_root: Path, study: str) -> None:
    """Delete a study's tables and trial store (--fresh); both checked to lie inside the results directory."""
    targets = [owned_path(results_root, experiment_dir(results_root, study), "trial store directory"),
               owned_path(results_root, results_root / study, "study directory")]
    for target in targets:
        if target.is_dir():
            shutil.rmtree(target)
