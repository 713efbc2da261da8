"""The Ray Tune function trainable: one trial = one ``nmt`` training run.

The trial keeps its own record (``study.store.trial_store``, written through ``study.store.trial_writes``,
which puts it into the object store too when the study has one): who it is, its progress after every
epoch, and its nmt run directory, whose epoch checkpoint is where a retried trial (a killed
worker, a dead node) or a resumed study continues, bit for bit. Ray only carries the metrics
(``tune.report`` once per epoch through nmt's ``report`` hook, and a final report with the
test scores); no checkpoint goes through Ray. Every reported number is finite: a diverged run
reports its best validation BLEU so far (0 if none) and ``status: diverged``.

A finished trial never trains again: its final checkpoint, ``metrics.json`` and ``test.hyp``
are kept as ``finished/<trial_key>/`` (staged, then renamed into place) before the final
report, and a trial that finds itself finished only reports that again.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

from ray import tune

from nmt.config import config_from_dict
from nmt.numerics import apply_numerics
from nmt.typed_config import apply_overrides
from study.store.provenance import cpu_description
from study.store.trial_store import FINISHED, REPORTED_AT, TRIALS, TrialStore
from study.store.trial_writes import open_trial_writes

TRIAL = "trial"  # param_space key of the expanded trial (spec.Trial as a dict)
SAMPLE = "sample"  # config key of a search trial's Optuna trial number (its stable identity)


def sampled_params(config: dict) -> dict:
    """The parameters a searcher sampled for this trial (dotted config keys)."""
    return {key: value for key, value in config.items() if key not in (TRIAL, SAMPLE)}


def trial_key(config: dict) -> str:
    """The deterministic key of a trial: its expanded key, extended by the search sample's
    number and parameters (two samples of equal parameters are two trials)."""
    trial = config[TRIAL]
    sampled = sampled_params(config)
    if not sampled and SAMPLE not in config:
        return trial["key"]
    text = trial["key"] + json.dumps({**sampled, SAMPLE: config.get(SAMPLE)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def trial_config(config: dict) -> tuple[dict, dict]:
    """(the trial dict, the resolved NMT config tree) from a Tune config; sampled search
    parameters (dotted keys next to "trial") override the trial's config."""
    trial = config[TRIAL]
    sampled = list(sampled_params(config).items())
    tree = apply_overrides(trial["config"], sampled) if sampled else trial["config"]
    return trial, tree


def finite_metrics(metrics: dict) -> dict:
    """Scalars only, and no NaN/inf/None: schedulers and searchers must never see them."""
    clean = {}
    for key, value in metrics.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (int, float)):
            clean[key] = float(value) if math.isfinite(value) else 0.0
        elif isinstance(value, str):
            clean[key] = value
    return clean


def train_trial(config: dict) -> None:
    trial, tree = trial_config(config)
    cfg = config_from_dict(tree, source=f"trial {trial['label']} seed {trial['seed']}")
    # the worker started with the study's numerics in its environment (ray_setup), checked before torch computes;
    # a process that computed before (a trial called from Python) trains natively and its record says so, which
    # --resume then refuses to mix (study.store.resume_checks.check_numerics)
    if not apply_numerics(cfg.train.numerics, f"trial {trial['label']} seed {trial['seed']}: train.numerics", strict=False):
        cfg.train.numerics = "native"
    from nmt.trainer import run  # torch is imported in the worker, not when Tune pickles this function

    key = trial_key(config)
    scratch = scratch_store(trial)
    store = open_trial_writes(scratch or Path(trial["storage"]), trial.get("mirror"))
    try:
        with store.hold(key) as finished:  # with --storage, the trial as the object store holds it
            machine = _machine(store.local, key, finished)
            identity = {"trial_key": key, "label": trial["label"], "seed": trial["seed"], **machine}
            resume_from = None if finished is not None else store.local.resume_point(key)
            first = None if finished is not None else _first_report(store.local, key, resume_from, trial, identity)
            if first is not None:  # before this run writes anything: a scheduler (asha) or --time-limit may end it here
                tune.report(first)
            # written again also for a finished trial: a record damaged since is made whole
            store.start(key, {"key": key, "label": trial["label"], "row": trial["row"], "seed": trial["seed"],
                              "config": tree, "params": sampled_params(config), "sample": config.get(SAMPLE),
                              **machine})
            if finished is not None:  # finished before the driver went away
                _report_final(finished, identity)
                return

            def report(metrics: dict, checkpoint_dir: Path) -> None:
                clean = finite_metrics({**metrics, **identity, "final": 0, REPORTED_AT: round(time.time(), 3)})
                store.record_epoch(key, clean)  # in the object store before Ray hears of the epoch
                tune.report(clean)

            if resume_from is None:  # e.g. a clone of committed records, which carry no checkpoints
                store.forget_progress(key)
            metrics = run(cfg, store.local.run_dir(key), report=report, resume_from=resume_from,
                          log=lambda line: print(line, flush=True))
            store.finish(key, {**metrics, **machine}, [finite_metrics({**epoch, **identity, "final": 0})
                                                        for epoch in metrics.get("history", [])])
    finally:
        if scratch is not None and store.result_in_object_store(key):  # the node keeps nothing of a trial the store holds
            drop_scratch(scratch, key)
    _report_final(metrics, identity)


def _first_report(store: TrialStore, key: str, resume_from, trial: dict, identity: dict) -> dict | None:
    """What an unfinished trial reports before it trains another epoch, if anything: a trial continued from its
    checkpoint, where it stands (a scheduler decides on it as the first run did: asha); with --time-limit
    (``announce_start``), a new trial, that it starts (no epoch yet), so the limit can hold it back untrained."""
    if resume_from is not None:
        last = store.last_progress(key)
        if last.get("epoch") is not None:
            return finite_metrics({**last, **identity, "final": 0})
    if trial.get("announce_start"):  # also a checkpoint whose progress record is lost: priced as a whole trial
        return finite_metrics({**identity, "final": 0, "epochs_trained": 0, "elapsed_s": 0.0})
    return None


def _machine(store: TrialStore, key: str, finished: dict | None) -> dict:
    """The node and CPU of the trial: this one's, or for a finished trial those that trained it (its committed
    record stays as it was). The CPU: a seed trained on another CPU type can differ in the last bits, and from
    there on in its scores."""
    node, cpu = ray_node_id(), cpu_description()
    if finished is not None:
        stored = store.identity(key) or {}
        node = finished.get("node_id") or stored.get("node_id") or node
        cpu = finished.get("cpu") or stored.get("cpu")  # none for a record from before CPUs were recorded
    return {"node_id": node, **({"cpu": cpu} if cpu else {})}


def scratch_store(trial: dict) -> Path | None:
    """Where a trial mirrored to ``--storage`` keeps its working copy on a node other than the driver's,
    whose results directory that node may not have: ``$RNMT_SCRATCH`` (default: the system's temporary
    directory, ``rnmt-scratch``), per node and study. None on the driver's node or without a mirror."""
    if not trial.get("mirror") or not trial.get("home_node"):
        return None
    node = ray_node_id()
    if not node or node == trial["home_node"]:
        return None
    base = Path(os.environ.get("RNMT_SCRATCH") or Path(tempfile.gettempdir()) / "rnmt-scratch")
    return base / node[:16] / "ray" / Path(trial["storage"]).name


def drop_scratch(scratch: Path, key: str) -> None:
    """A finished trial's working copy in a node's scratch (written by this trainable alone)."""
    for folder in (scratch / TRIALS / key, scratch / FINISHED / key):
        if folder.parent.parent == scratch and folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)


def _report_final(metrics: dict, identity: dict) -> None:
    tune.report(finite_metrics({**metrics, **identity, "final": 1}))


def ray_node_id() -> str:
    """Which Ray node ran the trial (diagnostics: trials spread over a cluster)."""
    # Ray loads when trials run or a cluster is probed (seconds of start-up), not when a study is checked
    import ray

    if not ray.is_initialized():  # outside a Ray worker; asking would start a local Ray instance
        return ""
    try:
        return ray.get_runtime_context().get_node_id()
    except Exception:  # outside a Ray worker
        return ""
