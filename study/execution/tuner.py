"""The Ray Tune run of a study's trials: a grid of trial configs or Optuna samples, the callbacks
that record and track them, and ASHA when the study asks for it."""

from __future__ import annotations

import contextlib
import functools
import warnings
from pathlib import Path

from study.execution.disk_watch import StorageStopper
from study.execution.ray_setup import trials_at_once
from study.store.remote_study import pull_trial_results, search_pusher
from study.execution.study_run import StudyRun
from study.execution.time_limit import TimeLimit
from study.execution.trainable import SAMPLE, TRIAL, train_trial
from study.execution.trial_prices import TrialPrices
from study.spec.model import StudySpec
from study.store.trial_store import TrialStore


def build_tuner(run: StudyRun, storage: StorageStopper, ray_storage: Path, prices: TrialPrices,
                limit: TimeLimit | None = None):
    """A new Tuner on every run, also a resumed one: finished trials only report their stored
    result again, unfinished ones continue from their own checkpoints (study.store.trial_store). Ray's
    own experiment files (pickles) go to ``ray_storage``, a private temporary directory of the
    driver, never into the results directory, and are never read back: no results directory,
    shared or not, can make the driver unpickle anything, and a full results disk cannot break
    Ray's bookkeeping. ``prices`` (study.execution.trial_prices) price the trials for the progress line's ETA
    and for ``limit``, the run's ``--time-limit`` (study.execution.time_limit), which holds back a trial that
    would end after it."""
    # Ray loads when trials run or a cluster is probed (seconds of start-up), not when a study is checked
    from ray import tune

    spec, options, trials, results_root, exp_dir = run.spec, run.options, run.trials, run.results_root, run.exp_dir
    trainable = tune.with_resources(train_trial, run.resources)
    metric = spec.metrics[0]
    search_alg, scheduler = None, None
    if spec.fields.search is not None:
        total = _samples_left(spec, results_root, exp_dir) if options.continues else spec.fields.search.num_samples
        search_alg = _optuna(spec, results_root, keep=options.continues)
        param_space = {TRIAL: trials[0].to_dict()}
    else:
        total = len(trials)
        param_space = {TRIAL: tune.grid_search([t.to_dict() for t in trials])}
    callbacks = _callbacks(run, storage, total, prices)
    if spec.fields.scheduler.type == "asha":
        # Ray loads when trials run or a cluster is probed (seconds of start-up), not when a study is checked
        from study.execution.asha import ResumableASHA, stored_epochs

        epochs = trials[0].config["train"]["max_epochs"]
        stored = stored_epochs({key: run.store.history(key) for key in run.store.keys()}, metric.name)
        scheduler = ResumableASHA(metric.name, metric.mode, max_t=epochs + 1,
                                  grace_period=spec.fields.scheduler.grace_period,
                                  reduction_factor=spec.fields.scheduler.reduction_factor,
                                  stored=stored if options.continues else None)
    # metric and mode go to the searcher and the scheduler (a multi-objective one has several; Tune refuses them in
    # both places). reuse_actors: a worker that finished a trial takes the next (a new one costs seconds of imports),
    # and the numbers stay the same (each trial seeds itself; the numerics are the worker's environment, per study)
    tune_config = tune.TuneConfig(
        search_alg=search_alg, scheduler=scheduler, num_samples=total if spec.fields.search else 1,
        max_concurrent_trials=options.how.max_concurrent, trial_name_creator=_trial_name, trial_dirname_creator=_trial_name,
        reuse_actors=True)
    run_config = tune.RunConfig(
        name=spec.name, storage_path=str(ray_storage), verbose=0, callbacks=callbacks,
        stop=storage if limit is None else tune.stopper.CombinedStopper(storage, limit),
        failure_config=tune.FailureConfig(max_failures=2))
    return tune.Tuner(trainable, param_space=param_space, tune_config=tune_config, run_config=run_config), total


def _callbacks(run: StudyRun, storage: StorageStopper, total: int, prices: TrialPrices) -> list:
    """What records, tracks and reports each trial as it runs: its verdict and record (the trial store), its
    MLflow run, the progress line, and for a search the Optuna link and the --storage mirror. A trial that
    --time-limit held back (``prices.held_back``) gets no verdict and does not count as done."""
    # they load Ray: imported when the trials start
    from study.execution.callbacks import MlflowCallback, OptunaLinkCallback, ProgressCallback, VerdictCallback

    spec, trials, exp_dir, store = run.spec, run.trials, run.exp_dir, run.store
    # a search draws new samples for what is left, so only a grid has trials that finished before
    finished_before = {} if spec.fields.search is not None else {
        trial.key: {**metrics, "label": trial.label} for trial in trials
        if (metrics := store.finished_metrics(trial.key)) is not None}
    mirror = run.options.where.storage
    pull = functools.partial(pull_trial_results, mirror, spec.name, exp_dir) if mirror else None
    callbacks = [VerdictCallback(store, storage, prices.held_back), MlflowCallback(run.tracker, store, storage, pull),
                 ProgressCallback(total, spec.metrics[0], trials_at_once(run.resources, run.options),
                                  finished_before=finished_before,
                                  planned=None if spec.fields.search is not None else
                                  {trial.key: trial.label for trial in trials}, prices=prices, say=run.say)]
    if spec.fields.search is not None:
        callbacks.append(OptunaLinkCallback(optuna_storage(run.results_root), spec.name, run.tracker))
        callbacks += _search_mirror(run)
    return callbacks


def _search_mirror(run: StudyRun) -> list:
    """With --storage, a callback that puts the search's Optuna study up after every trial that ends."""
    # it loads Ray: imported when the trials start
    from study.execution.callbacks import TrialEndCallback

    push = search_pusher(run.options.where.storage, run.spec.name, optuna_database(run.results_root), run.say,
                         run.lease)
    return [] if push is None else [TrialEndCallback(push)]


def _trial_name(trial) -> str:
    info = trial.config.get("trial", {})
    return f"r{info.get('row', 0):02d}s{info.get('seed', 0)}_{trial.trial_id}"


def _samples_left(spec: StudySpec, results_root: Path, exp_dir: Path) -> int:
    """A resumed search keeps every sample that ended (finished, failed or stopped early) and
    draws new samples for the rest: an interrupted sample is dropped, here and in Optuna."""
    # optuna loads for search studies only
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
    # optuna loads for search studies only
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


def optuna_database(results_root: Path) -> Path:
    """The SQLite file of the Optuna studies of the searches under ``results_root``."""
    return (results_root / "optuna.db").resolve()


def optuna_storage(results_root: Path) -> str:
    return f"sqlite:///{optuna_database(results_root)}"
