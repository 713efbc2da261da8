"""Run a study on Ray Tune: data once in the driver, trials on Ray, MLflow from the driver,
tables at the end.

Layout under the results directory (``results/`` by default)::

    results/mlflow.db                 MLflow tracking store (SQLite), unless --tracking-uri
    results/mlflow-artifacts/<study>/ MLflow artifacts of that store
    results/optuna.db                 Optuna studies (optuna-dashboard sqlite:///results/optuna.db)
    results/ray/<study>/              the trial store (study.trial_store): each trial's record and
                                      checkpoints, finished runs (Ray's own files live elsewhere)
    results/<study>/                  study.json (state, command) and the exported tables and plots
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from nmt.config import config_from_dict, model_option
from nmt.typed_config import tree_changes
from nmt.data.corpus import corpus_languages, discover_corpus, resolve_path
from nmt.data.pipeline import load_data, resolve_cache_dir
from nmt.durations import clock
from nmt.errors import UserError
from nmt.fileio import check_writable_dir, write_json, write_lines
from study import plots
from study.ownership import StudyLock, owned_path
from study.provenance import environment
from study.report import write_html_report
from study.stored import STATE_FILE, is_smoke_run, table_layout
from study.results import experiment_dir, load_records, load_saved_records, save_records
from study.longer_budget import RAISABLE_BUDGETS, budget_grew
from study.reuse import reusable_keys, reuse_finished_trials, reuse_sources
from study.migration import Move, apply_adoption, plan_adoption
from study.labels import axis_name, display_value
from study.spec import SPACES_DIR, StudySpec, Trial, expand, portable_tree, spec_to_dict, study_axes, varied_keys
from study.tables import StudyTable, build_table, export
from study.tables import warnings as table_warnings
from study.storage import StorageStopper, check_storage
from study.tracking import StudyTracker, default_tracking_uri, sqlite_file
from study.trainable import SAMPLE
from study.trial_store import FINISHED, TrialStore



@dataclass
class RunOptions:
    results: Path = Path("results")
    resume: bool = False
    extend: bool = False  # with resume: the study may have gained rows, seeds or samples
    fresh: bool = False
    address: str | None = None
    num_cpus: int | None = None
    max_concurrent: int | None = None
    gpus_per_trial: float | None = None
    tracking_uri: str | None = None
    data_dir: Path | None = None
    langs: str | None = None
    verbose: bool = False
    command: str = ""
    reuse_from: tuple[str, ...] = ()  # studies whose finished trials this study shares (study.reuse)

    def results_flag(self) -> str:
        """" --results DIR" when it is not the default, for the commands the driver suggests."""
        return f" --results {self.results}" if self.results != Path("results") else ""


# ---------------------------------------------------------------------------
# state of a study run (results/<study>/study.json)


def read_state(study_dir: Path) -> dict | None:
    path = study_dir / STATE_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        raise UserError(f"{path}: unreadable study state; delete it (or run with --fresh)") from None


def write_state(study_dir: Path, state: dict) -> None:
    study_dir.mkdir(parents=True, exist_ok=True)
    write_json(study_dir / STATE_FILE, state)


# ---------------------------------------------------------------------------
# data


def prepare_data(spec: StudySpec, opts: RunOptions, log=print):
    """Resolve the data block (--data-dir, absolute paths, the shared cache), load it once in
    the driver (clear errors before any trial; the corpus and SentencePiece models are cached
    for the trials) and return the test references."""
    data = dict(spec.fields.data)
    if opts.data_dir is not None:
        data.update(corpus_in(opts.data_dir, opts.langs))
    for split in ("train", "valid", "test"):
        if data.get(split):
            data[split] = [str(resolve_path(p, f"data.{split}")) for p in data[split]]
    cfg = config_from_dict({**spec.base_tree(), "data": data}, source=spec.source)
    data["cache_dir"] = str(resolve_cache_dir(cfg.data).resolve())
    cfg = config_from_dict({**spec.base_tree(), "data": data}, source=spec.source)
    parallel = load_data(cfg.data, log=log)
    spec.fields.data = data
    spec.tree = {**spec.tree, "data": data}
    return [ref for _, ref in parallel.test_text], parallel.stats


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
    """Expanded trials with per-trial threads and device set from the resources, and which
    stored trials are to move to their keys (study.migration). Reads the store, writes nothing."""
    resources = trial_resources(spec, opts)
    trials = expand(spec)
    for trial in trials:
        trial.config["train"]["threads"] = max(1, int(resources["cpu"]))
        trial.config["train"]["device"] = "cuda" if resources["gpu"] > 0 else "cpu"
        trial.storage = str(exp_dir)
    return trials, plan_adoption(TrialStore(exp_dir), trials)


# ---------------------------------------------------------------------------
# the run


def run_study(spec: StudySpec, opts: RunOptions) -> int:
    """Every check that can fail on bad input (results directory, data, resume, tracking store,
    Ray) runs before anything is written or deleted; then the trials run and the tables follow."""
    results_root = opts.results.resolve()
    check_writable_dir(results_root, "--results")
    study_dir = owned_path(results_root, results_root / spec.name, "study directory")
    exp_dir = owned_path(results_root, experiment_dir(results_root, spec.name), "trial store directory")
    with StudyLock(results_root, spec.name, opts.command):
        return _run_locked(spec, opts, results_root, study_dir, exp_dir)


def _run_locked(spec: StudySpec, opts: RunOptions, results_root: Path, study_dir: Path, exp_dir: Path) -> int:
    state = read_state(study_dir)
    start = time.time()

    replace = False
    if opts.resume:
        check_resumable(spec, opts, state, results_root, exp_dir)
    elif exp_dir.exists() or state is not None:
        if is_smoke_run(state):  # a check, not a result: the next run, smoke or full, replaces it
            print(f"replacing the --smoke run's results of {spec.name} in {results_root}", flush=True)
            replace = True
        elif spec.tree.get("smoke") and not opts.fresh:
            raise UserError(f"study {spec.name}: {results_root} holds the results of a full run, which a --smoke run "
                            f"would replace; leave out --results (smoke runs go to results/smoke) or give another "
                            f"--results directory")
        elif not opts.fresh:
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
        replace = True

    print(f"study {spec.name}: {spec.fields.description}", flush=True)
    references, stats = prepare_data(spec, opts)
    if opts.resume:
        check_resumable_changes(spec, opts, state)
    sources = reuse_sources(spec, list(opts.reuse_from), results_root)
    uri = tracking_uri(opts, state, results_root)
    tracker = StudyTracker(uri, spec.name, artifact_root=results_root / "mlflow-artifacts",
                           description=spec.fields.description, varied=study_axes(spec),
                           run_tags={"smoke": str(bool(spec.tree.get("smoke"))).lower(), **environment()})
    address = _check_address(opts)
    resources = trial_resources(spec, opts)
    if not address:
        _check_local_fit(resources, opts)
    if not replace:  # a replaced run's store is cleared first, so its plan is made after that
        trials, plan = finalize_trials(spec, opts, exp_dir)
        if opts.extend and spec.fields.search is None:
            check_extension(spec, trials, exp_dir, plan)  # before Ray starts and any stored trial moves
    import ray

    _start_services(tracker, opts)
    stopping = None
    try:
        try:
            if address:
                _check_cluster_fit(resources, address)
            if replace:
                _clear(results_root, spec.name)
                state = None
                trials, plan = finalize_trials(spec, opts, exp_dir)
            (exp_dir / FINISHED).mkdir(parents=True, exist_ok=True)
            apply_adoption(TrialStore(exp_dir), plan, log=lambda line: print(line, flush=True))
            if sources:
                reuse_finished_trials(TrialStore(exp_dir), trials, sources, log=lambda line: print(line, flush=True))
            write_lines(study_dir / "test.ref", references)
            closed = tracker.close_stale_runs()
            if closed:
                print(f"closed {closed} MLflow run(s) left RUNNING by a previous driver (marked KILLED)", flush=True)
            parent = tracker.start_parent(spec.fingerprint, {"description": spec.fields.description, "kind": spec.kind,
                                                             "trials": len(trials), "command": opts.command},
                                          parent_id=_stored_parent(opts, state, uri))
            if spec.fields.search is None:  # (search samples keep their keys)
                tracker.supersede_children({(trial.label, str(trial.seed)): trial.key for trial in trials},
                                           set(TrialStore(exp_dir).keys()))
            state = {"study": spec.name, "status": "running", "request": spec.tree,
                     "portable_request": portable_tree(spec.tree), "spec": spec_to_dict(spec),
                     "fingerprint": spec.fingerprint, "tracking_uri": uri,
                     "tracking_uri_default": uri == default_tracking_uri(results_root), "parent_run_id": parent,
                     "command": opts.command, "started": (state or {}).get("started", time.strftime("%Y-%m-%d %H:%M:%S")),
                     "wall_seconds": (state or {}).get("wall_seconds", 0), "data": stats, "environment": environment()}
            write_state(study_dir, state)
            write_command(study_dir, opts.command)
            total = spec.fields.search.num_samples if spec.fields.search else len(trials)
            print(f"{total} trial{'' if total == 1 else 's'} ({spec.kind}); tracking {uri} (parent run {parent})",
                  flush=True)
            storage = StorageStopper(exp_dir)
            with _sigterm_as_sigint() as received, tempfile.TemporaryDirectory(prefix="rnmt-ray-") as ray_storage:
                tuner, to_run = _tuner(spec, trials, opts, tracker, results_root, exp_dir, storage, Path(ray_storage))
                if to_run:
                    try:
                        tuner.fit()
                    except Exception:
                        if storage.trouble() is None:
                            raise
            try:
                check_storage(exp_dir, storage, spec.name, opts.results_flag())
            except UserError:
                tracker.close_stale_runs()
                raise
            records = load_records(results_root, spec.name)
            if received or len(records) < total or any(r["status"] == "running" for r in records):
                # Tune ends fit() early on SIGINT (our SIGTERM handler forwards it) and saves its state
                closed = tracker.close_stale_runs()
                name = "SIGTERM" if received else "SIGINT"
                results_flag = opts.results_flag()
                again = (resume_command(opts.command) if opts.command
                         else f"python -m study.run {study_argument(spec)} --resume{results_flag}")
                print(f"\n{name}: stopped; finished trials are kept, {closed} open MLflow run(s) marked KILLED. "
                      f"Resume with: {again}", file=sys.stderr, flush=True)
                return 128 + (signal.SIGTERM if received else signal.SIGINT)
        finally:  # Ray's processes wind down while the tables and plots are written
            stopping = threading.Thread(target=ray.shutdown, name="ray-shutdown")
            stopping.start()

        print("trials done; exporting tables and plots", flush=True)
        tracker.reconcile(records)
        outputs, table = write_exports(spec, records, references, study_dir)
        tracker.log_study_table(table.rows)
        state.update(status="complete", finished=time.strftime("%Y-%m-%d %H:%M:%S"),
                     wall_seconds=round(state.get("wall_seconds", 0) + time.time() - start, 1))
        write_state(study_dir, state)
        tracker.finish_parent("FINISHED", outputs)
        print((study_dir / "table.md").read_text(encoding="utf-8"))
        print(f"wrote {', '.join(_shown(p) for p in outputs)}")
        print(f"MLflow: mlflow ui --backend-store-uri {uri} --host 127.0.0.1   (study '{spec.name}', parent run {parent})")
        for line in table_warnings(table.rows):
            print(f"warning: {line}", file=sys.stderr)
        if tracker.failures:
            print(f"warning: {tracker.failures} MLflow logging call(s) were lost ({tracker.first_failure}); the tables "
                  f"above come from the trial store, and python -m study.table {spec.name} rebuilds them",
                  file=sys.stderr)
        print(f"study {spec.name} done in {clock(time.time() - start)}")
        return 0
    finally:
        if stopping is not None:
            stopping.join()  # Ray is down when the study returns (a next ray.init must not race it)


def check_resumable(spec: StudySpec, opts: RunOptions, state: dict | None, results_root: Path, exp_dir: Path) -> None:
    """--resume and --extend need a stored run of the study."""
    if state is None or not exp_dir.is_dir():
        flag = "--extend" if opts.extend else "--resume"
        raise UserError(f"study {spec.name}: nothing to {flag[2:]} in {results_root}; run it without {flag}")


def check_resumable_changes(spec: StudySpec, opts: RunOptions, state: dict) -> None:
    """--resume continues the study as it started; --extend lets it gain rows, seeds or epochs."""
    # compared as any machine sees them: data files by content and base name, no cache
    # directory (a clone elsewhere with the corpus at another path continues the study)
    before = state.get("portable_request") or portable_tree(state.get("request", {}))
    changes = tree_changes(before, portable_tree(spec.tree))
    if opts.extend:
        check_extension_changes(spec, state, changes)
    elif changes:
        raise UserError(f"study {spec.name}: the study changed since it started ({'; '.join(changes[:3])}); "
                        f"resume with the same file and options, --extend if it only gained rows, seeds or "
                        f"epochs (the finished trials are kept or continued), or start it over with --fresh "
                        f"(or copy the file under a new name to keep both)")


# what --extend may change in a study: what it varies and how many seeds or samples (the trials'
# own configs are checked by their keys, check_extension), and how the table is labelled
EXTENSIBLE = {"grid": ("grid", "variants", "ablate", "seeds", "table.", "description"),
              "search": ("search.num_samples", "table.", "description")}


def check_extension_changes(spec: StudySpec, state: dict, changes: list[str]) -> None:
    """--extend accepts new rows, seeds or samples, and a grid study's larger counted budget
    (study.longer_budget); a change of how trials run (scheduler, metric, resources, a smaller
    budget, patience, a search's space) would make old and new rows incomparable."""
    search = spec.fields.search is not None
    allowed = EXTENSIBLE["search" if search else "grid"]
    if not search:
        before, after = (state.get("spec") or {}).get("budget") or {}, vars(spec.fields.budget)
        grown = [name for name in RAISABLE_BUDGETS if budget_grew(before, after, name)]
        if grown and spec.fields.scheduler.type == "asha":
            raise UserError(f"study {spec.name}: --extend cannot raise budget.{grown[0]} of a study with an ASHA "
                            f"scheduler (its rungs depend on the budget); keep the budget, or start over with --fresh")
        allowed += tuple(f"budget.{name}:" for name in grown)
    other = [change for change in changes if not change.startswith(allowed)]
    if other:
        what = "samples to a search (search.num_samples)" if search else "rows, seeds or epochs"
        raise UserError(f"study {spec.name}: --extend adds {what}, but the study changed otherwise "
                        f"({'; '.join(other[:3])}); undo that, or start over with --fresh (or copy the file under a "
                        f"new name to keep both)")
    if search:
        stored = ((state.get("spec") or {}).get("search") or {}).get("num_samples", 0)  # the effective count
        if spec.fields.search.num_samples < stored:
            raise UserError(f"study {spec.name}: --extend cannot drop samples (search.num_samples {stored} -> "
                            f"{spec.fields.search.num_samples}); raise it, or start over with --fresh")


def resume_command(command: str) -> str:
    """The command that continues an interrupted run: the one that started it (with its --smoke,
    --set, --data-dir, ...) plus --resume, without --fresh."""
    words = [word for word in command.split(" ") if word != "--fresh"]
    if "--resume" not in words and "--extend" not in words:
        words.append("--resume")
    return " ".join(words)


def check_extension(spec: StudySpec, trials: list[Trial], exp_dir: Path, plan: list[Move]) -> None:
    """--extend keeps every stored trial: the changed study must still contain each of them
    (same config and seed, or the same with more epochs, as ``plan`` moves them), so it can
    only have gained rows, seeds or epochs."""
    from study.results import trial_record

    store = TrialStore(exp_dir)
    wanted = {trial.key for trial in trials}
    moving = {move.old for move in plan}
    dropped = [key for key in store.keys() if key not in wanted and key not in moving]
    if not dropped:
        return
    shown = []
    for key in dropped:
        record = trial_record(store, key)
        shown.append(f"{record['label']} seed {record['seed']}" if record else key)
    shown = sorted(shown)[:3]
    raise UserError(f"study {spec.name}: --extend only adds rows, seeds or epochs, but {len(dropped)} stored trial(s) "
                    f"are no longer in the study ({', '.join(shown)}{', ...' if len(dropped) > 3 else ''}): a changed "
                    f"base config or data, or a budget other than more epochs, changes every trial; undo that, or "
                    f"start over with --fresh (or copy the file under a new name to keep both)")


def study_argument(spec: StudySpec) -> str:
    """How to name the study on the command line again: a built-in by its name, a study file
    outside search_spaces/ by the path it was given as."""
    source = Path(spec.source)
    return spec.name if source.resolve() == (SPACES_DIR / f"{spec.name}.yaml").resolve() else spec.source


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


def write_command(study_dir: Path, command: str) -> None:
    """The exact command that produced the results, beside them (also in study.json)."""
    if command:
        write_lines(study_dir / "command.txt", [command])


def write_exports(spec: StudySpec, records: list[dict], references: list[str] | None,
                  study_dir: Path) -> tuple[list[Path], StudyTable]:
    """Tables (md, csv, tex, trials.csv), plots (png, pdf), the HTML report and the trial records
    (trials.jsonl, hyps/)."""
    save_records(records, study_dir)
    records = load_saved_records(study_dir)  # the tables read exactly what is kept next to them
    layout = table_layout(spec)
    title = layout.title
    table = build_table(records, title, layout.reference, references, layout.row_order)
    outputs = export(table, study_dir)
    if len(table.rows):
        outputs += plots.bar_plot(table.rows, title, study_dir / "bleu.png", table.trials, table.reference)
        outputs += plots.speed_plot(table.rows, title, study_dir / "bleu_vs_speed.png")
        if spec.fields.table.plot == "line" and spec.kind != "search":
            x_key = spec.fields.table.x
            by_label = {t.label: t for t in expand(spec)}
            configs = [by_label[label].config for label in table.rows["label"]]
            outputs += plots.line_plot(table.rows, [_lookup(config, x_key) for config in configs], axis_name(x_key),
                                       title, study_dir / f"bleu_vs_{x_key.split('.')[-1]}.png",
                                       line_series(spec, configs, x_key))
    outputs.append(write_html_report(study_dir, table))  # last: it embeds the figures above
    return outputs, table


def _shown(path: Path) -> str:
    """A path relative to the working directory when it is inside it."""
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def line_series(spec: StudySpec, configs: list[dict], x_key: str) -> list[str]:
    """The line each row belongs to in a plot over ``x_key``: the values of the study's keys that
    vary independently of x ("GRU", "ATR" in a depth x unit grid; one line, "", when none do,
    e.g. a depth axis that links encoder and decoder layers)."""
    others = [key for key in varied_keys(spec) if key != x_key and _varies_beside(configs, x_key, key)]
    return [" ".join(display_value(key, _lookup(config, key)) for key in others) for config in configs]


def _varies_beside(configs: list[dict], x_key: str, key: str) -> bool:
    """True when two rows share their x value but not their value of ``key``."""
    seen: dict = {}
    for config in configs:
        seen.setdefault(repr(_lookup(config, x_key)), set()).add(repr(_lookup(config, key)))
    return any(len(values) > 1 for values in seen.values())


def _lookup(tree: dict, dotted: str):
    """The value of a dotted key in a trial config; a unit option named in the old flat form
    (model.order) is found under its unit (model.fsmn.order)."""
    node = tree
    try:
        for part in dotted.split("."):
            node = node[part]
        return node
    except (KeyError, TypeError):
        found = model_option(config_from_dict(tree, source="trial config").model, dotted)
        if found is None:
            raise
        return found[1]


# ---------------------------------------------------------------------------
# Ray


def _check_address(opts: RunOptions) -> str | None:
    """The cluster address (--address, else RAY_ADDRESS; None for a local instance), after
    checking that something listens there: an unreachable one fails in seconds with one line
    (ray.init would wait long)."""
    address = opts.address or os.environ.get("RAY_ADDRESS") or None
    if not address or address in ("auto", "local"):
        return address if address == "auto" else None
    flag = "--address" if opts.address else "RAY_ADDRESS="
    host_port = address.split("://", 1)[-1].rstrip("/")
    host, _, port = host_port.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"{flag}{' ' if opts.address else ''}{address!r}: expected HOST:PORT (e.g. 10.0.0.5:6379), "
                        f"ray://HOST:PORT or auto")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as err:
        unset = "" if opts.address else " (or unset RAY_ADDRESS for a local instance)"
        raise UserError(f"{flag}{' ' if opts.address else ''}{address}: cannot reach a Ray cluster there "
                        f"({err.strerror or err}); start one with `ray start --head --port {port}` or check the "
                        f"address (and firewall){unset}") from None
    return address


def dry_run_study(spec: StudySpec, opts: RunOptions) -> int:
    """--dry-run: the data prepared (and cached), every row's model timed; no Ray, no results."""
    from study.dry_run import dry_run, stored_progress

    print(f"study {spec.name}: {spec.fields.description}", flush=True)
    sources = reuse_sources(spec, list(opts.reuse_from), opts.results.resolve())
    _, stats = prepare_data(spec, opts)
    resources = trial_resources(spec, opts)
    cpus = opts.num_cpus or os.cpu_count() or 1
    concurrency = opts.max_concurrent or max(1, int(cpus // resources["cpu"]))
    results_root = opts.results.resolve()
    exp_dir = experiment_dir(results_root, spec.name)
    store = TrialStore(exp_dir)
    trials = expand(spec)
    stored = None
    if opts.resume:  # only what is left of the study counts, and what the run would refuse is refused
        state = read_state(results_root / spec.name)
        check_resumable(spec, opts, state, results_root, exp_dir)
        check_resumable_changes(spec, opts, state)
        if spec.fields.search is None:
            plan = plan_adoption(store, trials)
            if opts.extend:
                check_extension(spec, trials, exp_dir, plan)
            stored = stored_progress(store, trials, plan)
    return dry_run(spec, stats, resources["cpu"], concurrency, log=lambda line: print(line, flush=True),
                   reused=reusable_keys(trials, sources, store), stored=stored)


def trial_resources(spec: StudySpec, opts: RunOptions) -> dict:
    """What one trial asks Ray for: CPUs (also its torch threads) and a GPU share."""
    gpu = opts.gpus_per_trial if opts.gpus_per_trial is not None else spec.fields.resources.gpu
    return {"cpu": spec.fields.resources.cpu, "gpu": gpu}


def _gpu_source(opts: RunOptions) -> str:
    return f"--gpus-per-trial {opts.gpus_per_trial}" if opts.gpus_per_trial is not None else "resources.gpu"


def _check_local_fit(resources: dict, opts: RunOptions) -> None:
    """A trial that no local resource can hold would wait forever in Ray's queue: refuse it now."""
    cpus = opts.num_cpus or os.cpu_count() or 1
    if resources["cpu"] > cpus:
        raise UserError(f"resources.cpu = {resources['cpu']:g}: a trial needs more CPUs than the local Ray instance "
                        f"has ({cpus}); lower it (--set resources.cpu={cpus}) or raise --cpus")
    if resources["gpu"] > 0:
        import torch

        gpus = torch.cuda.device_count()
        if resources["gpu"] > gpus:
            have = "no CUDA GPU that torch can use" if gpus == 0 else f"{gpus} GPU(s)"
            raise UserError(f"{_gpu_source(opts)} = {resources['gpu']:g}: this machine has {have}; leave it out "
                            f"(--gpus-per-trial 0 trains on the CPU) or run on a machine or cluster with GPUs")


def _check_cluster_fit(resources: dict, address: str) -> None:
    import ray

    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
    if any(node.get("CPU", 0) >= resources["cpu"] and node.get("GPU", 0) >= resources["gpu"] for node in nodes):
        return
    largest = max(nodes, key=lambda node: (node.get("GPU", 0), node.get("CPU", 0)), default={})
    need = f"{resources['cpu']:g} CPU(s)" + (f" and {resources['gpu']:g} GPU(s)" if resources["gpu"] else "")
    raise UserError(f"no node of the Ray cluster at {address} has {need} for one trial (the largest of its "
                    f"{len(nodes)} node(s) has {largest.get('CPU', 0):g} CPU(s) and {largest.get('GPU', 0):g} "
                    f"GPU(s)); lower resources.cpu / --gpus-per-trial or add a larger node")


# Ray declares its own local node dead, and kills it, after 5 missed 10 s health checks. With
# every core busy training (the point of a study) the checks can stall that long, and the whole
# study died with "Owner's node has crashed"; on one machine there is no other node to fail over
# to, so wait for about 5 minutes instead.
LOCAL_HEALTH_CHECKS = {"health_check_timeout_ms": 30_000, "health_check_failure_threshold": 10}


def _start_services(tracker: StudyTracker, opts: RunOptions) -> None:
    """Connect to the MLflow store, then start Ray; a SQLite store in a writable directory is
    reached while Ray starts instead, since a new store's schema migrations and Ray's processes
    each take seconds and neither needs the other. Any other store is reached first, so that one
    that cannot be reached (a bad --tracking-uri) is refused before Ray starts. Errors come in the
    order of the two steps: the store's first."""
    import ray

    if not _local_store(tracker.uri):
        tracker.connect()
        _start_ray(opts)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mlflow-connect") as pool:
        connecting = pool.submit(tracker.connect)
        try:
            _start_ray(opts)
        except UserError:
            connecting.result()
            raise
    try:
        connecting.result()
    except BaseException:
        ray.shutdown()
        raise


def _local_store(uri: str) -> bool:
    """A SQLite store whose directory exists and is writable: reaching it should not fail."""
    database = sqlite_file(uri)
    return database is not None and database.parent.is_dir() and os.access(database.parent, os.W_OK)


def _start_ray(opts: RunOptions) -> None:
    import ray

    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    if not opts.verbose:  # the error of a trial stopped mid-failure (see the trial store), not news
        os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    kwargs = {"include_dashboard": False, "log_to_driver": opts.verbose, "logging_level": "ERROR",
              "configure_logging": True}
    address = opts.address or os.environ.get("RAY_ADDRESS") or None
    try:
        if address:
            ray.init(address=address, **kwargs)
        else:  # "local": never attach to some other Ray instance on this machine by accident
            _loopback_only()
            ray.init(address="local", num_cpus=opts.num_cpus or os.cpu_count(), _system_config=LOCAL_HEALTH_CHECKS,
                     **kwargs)
    except Exception as err:  # ConnectionError, RuntimeError, ...: one line either way
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        fix = ("start it with `ray start --head` (and check the address and token)" if address
               else "check that /tmp is writable and no stale Ray processes hold it")
        raise UserError(f"cannot start {where} ({' '.join(str(err).split())[:200]}); {fix}") from None
    if not opts.verbose:  # a failed trial is one progress line; its traceback goes to the trial store
        logging.getLogger("ray.tune.execution.tune_controller").setLevel(logging.CRITICAL)


def _loopback_only() -> None:
    """Make the local Ray instance listen on 127.0.0.1 only (GCS, raylet, workers, runtime-env
    agent); by default they listen on every interface, reachable from the network. Ray does
    this for single-machine use on macOS and Windows, switched by one setting that Ray reads
    when it is imported (so it is also set on the imported module) and that the processes it
    starts inherit."""
    from ray._private import ray_constants

    os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False


def _tuner(spec: StudySpec, trials: list[Trial], opts: RunOptions, tracker: StudyTracker, results_root: Path,
           exp_dir: Path, storage: StorageStopper, ray_storage: Path):
    """A new Tuner on every run, also a resumed one: finished trials only report their stored
    result again, unfinished ones continue from their own checkpoints (study.trial_store). Ray's
    own experiment files (pickles) go to ``ray_storage``, a private temporary directory of the
    driver, never into the results directory, and are never read back: no results directory,
    shared or not, can make the driver unpickle anything, and a full results disk cannot break
    Ray's bookkeeping."""
    from ray import tune

    from study.callbacks import MlflowCallback, OptunaLinkCallback, ProgressCallback, VerdictCallback
    from study.trainable import TRIAL, train_trial

    resources = trial_resources(spec, opts)
    trainable = tune.with_resources(train_trial, resources)
    metric = spec.metrics[0]
    search_alg, scheduler = None, None
    if spec.fields.search is not None:
        total = _samples_left(spec, results_root, exp_dir) if opts.resume else spec.fields.search.num_samples
        search_alg = _optuna(spec, results_root, keep=opts.resume)
        param_space = {TRIAL: trials[0].to_dict()}
    else:
        total = len(trials)
        param_space = {TRIAL: tune.grid_search([t.to_dict() for t in trials])}
    concurrency = opts.max_concurrent or max(1, int((opts.num_cpus or os.cpu_count() or 1) // resources["cpu"]))
    store = TrialStore(exp_dir)
    callbacks = [VerdictCallback(store, storage), MlflowCallback(tracker, store, storage),
                 ProgressCallback(total, metric.name, metric.mode, concurrency)]
    if spec.fields.search is not None:
        callbacks.append(OptunaLinkCallback(optuna_storage(results_root), spec.name, tracker))
    if spec.fields.scheduler.type == "asha":
        from ray.tune.schedulers import ASHAScheduler

        epochs = trials[0].config["train"]["max_epochs"]
        scheduler = ASHAScheduler(time_attr="training_iteration", metric=metric.name, mode=metric.mode,
                                  max_t=epochs + 1, grace_period=spec.fields.scheduler.grace_period,
                                  reduction_factor=spec.fields.scheduler.reduction_factor)
    # metric and mode go to the searcher and the scheduler themselves (a multi-objective
    # searcher has several; Tune refuses them in both places)
    tune_config = tune.TuneConfig(
        search_alg=search_alg, scheduler=scheduler, num_samples=total if spec.fields.search else 1,
        max_concurrent_trials=opts.max_concurrent, trial_name_creator=_trial_name, trial_dirname_creator=_trial_name)
    run_config = tune.RunConfig(
        name=spec.name, storage_path=str(ray_storage), verbose=0, callbacks=callbacks, stop=storage,
        failure_config=tune.FailureConfig(max_failures=2))
    return tune.Tuner(trainable, param_space=param_space, tune_config=tune_config, run_config=run_config), total


def _trial_name(trial) -> str:
    info = trial.config.get("trial", {})
    return f"r{info.get('row', 0):02d}s{info.get('seed', 0)}_{trial.trial_id}"


def _samples_left(spec: StudySpec, results_root: Path, exp_dir: Path) -> int:
    """A resumed search keeps every sample that ended (finished, failed or stopped early) and
    draws new samples for the rest: an interrupted sample is dropped, here and in Optuna."""
    import optuna

    store = TrialStore(exp_dir)
    ended = 0
    for key in store.keys():
        if store.finished_metrics(key) is not None or store.verdict(key) is not None:
            ended += 1
        else:
            store.forget(key)
    storage = optuna.storages.RDBStorage(optuna_storage(results_root))
    with contextlib.suppress(KeyError):
        study_id = storage.get_study_id_from_name(spec.name)
        for trial in storage.get_all_trials(study_id, deepcopy=False):
            if trial.state == optuna.trial.TrialState.RUNNING:  # the interrupted driver's samples
                storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)
    return max(0, spec.fields.search.num_samples - ended)


def _optuna(spec: StudySpec, results_root: Path, keep: bool):
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    class NumberedOptunaSearch(OptunaSearch):
        """Each sampled config carries its Optuna trial number: a stable identity per sample,
        so two samples of the same parameters are two trials (and two MLflow runs)."""

        def suggest(self, trial_id):
            config = super().suggest(trial_id)
            if isinstance(config, dict) and trial_id in self._ot_trials:
                config = {**config, SAMPLE: self._ot_trials[trial_id].number}
            return config

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # "A new study created in RDB": the run says what matters
    search = spec.fields.search
    space = {}
    for key, dist in search.space.items():
        kind = dist["type"]
        if kind == "categorical":
            space[key] = optuna.distributions.CategoricalDistribution(dist["choices"])
        elif kind == "int":
            space[key] = optuna.distributions.IntDistribution(dist["low"], dist["high"])
        else:
            space[key] = optuna.distributions.FloatDistribution(float(dist["low"]), float(dist["high"]),
                                                                log=kind == "loguniform")
    samplers = {"tpe": optuna.samplers.TPESampler, "random": optuna.samplers.RandomSampler,
                "nsga2": optuna.samplers.NSGAIISampler}
    sampler = samplers[search.sampler](seed=search.seed)
    metrics = spec.metrics
    multi = len(metrics) > 1
    storage = optuna.storages.RDBStorage(optuna_storage(results_root))
    if not keep:  # a new run replaces the Optuna study of the same name; a resumed one continues it
        with contextlib.suppress(KeyError):
            optuna.delete_study(study_name=spec.name, storage=storage)
    searcher = NumberedOptunaSearch(space=space, metric=[m.name for m in metrics] if multi else metrics[0].name,
                                    mode=[m.mode for m in metrics] if multi else metrics[0].mode, sampler=sampler,
                                    study_name=spec.name, storage=storage)
    # optuna-dashboard shows the objectives by name ("valid_bleu", not "Objective 0") and what the study is
    with warnings.catch_warnings():  # "experimental" since Optuna 3.2: not news for the user's terminal
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        searcher._ot_study.set_metric_names([m.name for m in metrics])
    searcher._ot_study.set_user_attr("description", spec.fields.description)
    return searcher


def optuna_storage(results_root: Path) -> str:
    return f"sqlite:///{(results_root / 'optuna.db').resolve()}"


def _clear(results_root: Path, study: str) -> None:
    """Delete a study's tables and trial store (--fresh); both checked to lie inside the results directory."""
    targets = [owned_path(results_root, experiment_dir(results_root, study), "trial store directory"),
               owned_path(results_root, results_root / study, "study directory")]
    for target in targets:
        if target.is_dir():
            shutil.rmtree(target)
