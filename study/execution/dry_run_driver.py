"""``python -m study.run NAME --dry-run`` as a run of its own: the study's data prepared (and cached for
the real run), what a ``--resume`` or ``--extend`` would still train read from the trial store (and from
``--storage``) and refused as the run would refuse it, then every row's model timed
(``study.execution.dry_run``). No Ray, no results written."""

from __future__ import annotations

from pathlib import Path

from study.execution.dry_run import dry_run, stored_progress
from study.execution.ray_setup import trial_resources, trials_at_once
from study.store.remote_study import store_view
from study.execution.study_data import prepare_data
from study.execution.time_limit import check_time_limit
from study.spec.expansion import expand
from study.spec.model import StudySpec, Trial
from study.spec.options import RunOptions
from study.store.migration import plan_adoption
from study.store.ownership import check_real_tree
from study.store.records import experiment_dir
from study.store.resume_checks import check_extension, check_numerics, check_resumable, check_resumable_changes
from study.store.reuse import reusable_keys, reuse_sources
from study.store.study_state import read_state
from study.store.trial_store import TrialStore


def dry_run_study(spec: StudySpec, options: RunOptions) -> int:
    """--dry-run: the data prepared (and cached), every row's model timed; no Ray, no results."""
    check_time_limit(spec, options)
    options.report.say(f"study {spec.name}: {spec.fields.description}")
    results = options.results_dir().resolve()
    sources = reuse_sources(spec, list(options.what.reuse_from), results)
    spec = prepare_data(spec, options.report.say).spec
    resources = trial_resources(spec, options)
    concurrency = trials_at_once(resources, options)
    check_real_tree(experiment_dir(results, spec.name), "trial store")
    # with --storage, what the store holds too, as the run would see it (study.store.remote_study)
    with store_view(options.where.storage if options.continues else None, spec.name, results) as results_root:
        exp_dir = experiment_dir(results_root, spec.name)
        store = TrialStore(exp_dir)
        trials = expand(spec)
        stored = left_to_train(spec, options, exp_dir, trials, results_root) if options.continues else None
        reused = reusable_keys(trials, sources, store)
    return dry_run(spec, resources["cpu"], concurrency, log=options.report.say, reused=reused, stored=stored,
                   time_limit=options.how.time_limit)


def left_to_train(spec: StudySpec, options: RunOptions, exp_dir: Path, trials: list[Trial],
                  results_root: Path) -> dict[str, float | None] | None:
    """What a --resume or --extend would continue, refused as the run would refuse it: the progress of each stored
    trial of a grid or ablation (None for a search, whose samples are drawn anew)."""
    store = TrialStore(exp_dir)
    store.check_records()
    state = read_state(results_root / spec.name)
    check_resumable(spec, options, state, options.results_dir().resolve(), exp_dir)  # messages name the user's folder
    check_resumable_changes(spec, options, state)
    check_numerics(spec, exp_dir)
    if spec.fields.search is not None:
        return None
    plan = plan_adoption(store, trials)
    if options.how.extend:
        check_extension(spec, trials, exp_dir, plan)
    return stored_progress(store, trials, plan)
