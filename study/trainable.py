"""The Ray Tune function trainable: one trial = one ``nmt`` training run.

It uses only ``ray.tune`` APIs: ``tune.get_checkpoint()`` to resume after a
restart (a retried trial or a resumed study), ``tune.report(metrics,
checkpoint=...)`` once per epoch through nmt's ``report`` hook, and a final
report with the test scores and a checkpoint that also holds
``metrics.json`` and ``test.hyp`` (the driver logs them to MLflow and the
tables read them). Every reported number is finite: a diverged run reports
its best validation BLEU so far (0 if none) and ``status: diverged``.

A finished trial never trains again: before its final report it stores
that final checkpoint in the study's storage as ``finished/<trial_key>/``
(write, then rename). If the driver dies before Ray records the trial as
finished, the resumed study restarts it, and it only reports that again.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
from pathlib import Path

from ray import tune

from nmt.config import apply_overrides, config_from_dict

TRIAL = "trial"  # param_space key of the expanded trial (spec.Trial as a dict)


def trial_key(config: dict) -> str:
    """The deterministic key of a trial: its expanded key, extended by sampled parameters."""
    trial = config[TRIAL]
    sampled = {key: value for key, value in config.items() if key != TRIAL}
    if not sampled:
        return trial["key"]
    text = trial["key"] + json.dumps(sampled, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def trial_config(config: dict) -> tuple[dict, dict]:
    """(the trial dict, the resolved NMT config tree) from a Tune config; sampled search
    parameters (dotted keys next to "trial") override the trial's config."""
    trial = config[TRIAL]
    sampled = [(key, value) for key, value in config.items() if key != TRIAL]
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
    from nmt.trainer import run  # torch is imported in the worker, not when Tune pickles this function

    trial, tree = trial_config(config)
    cfg = config_from_dict(tree, source=f"trial {trial['label']} seed {trial['seed']}")
    key = trial_key(config)
    identity = {"trial_key": key, "label": trial["label"], "seed": trial["seed"], "node_id": _node_id()}
    stored_final = Path(trial["finished_dir"]) / key
    if (stored_final / "metrics.json").is_file():  # finished before the driver went away
        _report_final(_read_json(stored_final / "metrics.json"), identity, stored_final)
        return
    scratch = Path(tempfile.mkdtemp(prefix="rnmt-trial-"))
    try:
        resume_from = None
        previous = tune.get_checkpoint()
        if previous is not None:
            resume_from = scratch / "resume"
            with previous.as_directory() as directory:
                shutil.copytree(directory, resume_from)
            if (resume_from / "metrics.json").is_file():  # the trial had already finished
                _report_final(_read_json(resume_from / "metrics.json"), identity, resume_from)
                return

        def report(metrics: dict, checkpoint_dir: Path) -> None:
            tune.report(finite_metrics({**metrics, **identity, "final": 0}),
                        checkpoint=tune.Checkpoint.from_directory(str(checkpoint_dir)))

        out = scratch / "run"
        metrics = run(cfg, out, report=report, resume_from=resume_from, log=lambda line: print(line, flush=True))
        final_dir = out / "checkpoint"
        for name in ("test.hyp", "metrics.json"):  # metrics.json last: its presence marks a complete copy
            if (out / name).is_file():
                shutil.copy(out / name, final_dir / name)
        staged = stored_final.with_name(f"{key}.partial")
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(final_dir, staged)
        staged.replace(stored_final)
        _report_final(metrics, identity, stored_final)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _report_final(metrics: dict, identity: dict, directory: Path) -> None:
    tune.report(finite_metrics({**metrics, **identity, "final": 1}),
                checkpoint=tune.Checkpoint.from_directory(str(directory)))


def _node_id() -> str:
    """Which Ray node ran the trial (diagnostics: trials spread over a cluster)."""
    import ray

    try:
        return ray.get_runtime_context().get_node_id()
    except Exception:  # outside a Ray worker
        return ""


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))
