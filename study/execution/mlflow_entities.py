"""What a trial's record and a study's runs become in MLflow's terms: params and tags (cut to
MLflow's length limits), tag values as the table writes them, metric names from row labels, the
corpus as a dataset input, and the standard tags of where a run comes from. No MLflow calls here:
``study.execution.tracking`` sends what these build."""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re

from study.spec.portable import portable_data


def mlflow_params(flat: dict) -> list:
    # MLflow loads when tracking starts (seconds of start-up), not with the checks before it
    from mlflow.entities import Param

    return [Param(str(k)[:250], str(v)[:6000]) for k, v in flat.items()]


def mlflow_tags(tags: dict) -> list:
    # MLflow loads when tracking starts (seconds of start-up), not with the checks before it
    from mlflow.entities import RunTag

    return [RunTag(str(k)[:250], str(v)[:5000]) for k, v in tags.items()]


def tag_value(value) -> str:
    """A one-off number as a tag reads as written in the table (4 beams, not 4.0)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def varied_values(flat: dict, keys: list[str]) -> str:
    """"model.cell=gru, model.enc_layers=2": this trial's values of the keys the study varies."""
    return ", ".join(f"{key}={flat.get(key)}" for key in keys if key in flat)


def metric_label(label: str) -> str:
    """A row label as a metric name: letters, digits, _ - . : and spaces kept (MLflow also allows /, left
    out with repeated dots: no path tricks), other characters dropped, spaces squeezed."""
    kept = re.sub(r"[^\w\-. :]", " ", label)
    kept = re.sub(r"\.{2,}", ".", " ".join(kept.split()))
    return kept.strip(" .")[:200] or "row"  # MLflow refuses names over 250 characters


def corpus_input(data: dict):
    """A trial's corpus as an MLflow dataset input (context "training"): its data block with every file
    named by the digest of its content (``study.spec.portable``), so two runs on the same corpus show the
    same dataset and digest in the UI whatever path it was read from."""
    # MLflow loads when tracking starts (seconds of start-up), not with the checks before it
    from mlflow.entities import Dataset, DatasetInput, InputTag

    view = portable_data(data)
    text = json.dumps(view, sort_keys=True, default=str)
    files = [str(name).partition("@")[0] for name in (view.get("train") or [])]
    name = " + ".join(files) if files else f"{view.get('preset') or 'corpus'} (size {view.get('size')})"
    dataset = Dataset(name=name, digest=hashlib.sha256(text.encode()).hexdigest()[:16], source_type="local",
                      source=text)
    return DatasetInput(dataset, tags=[InputTag("mlflow.data.context", "training")])


def source_tags(study_file: str, commit: str) -> dict[str, str]:
    """MLflow's standard tags of where a run comes from, which its UI shows as Source, Version and User:
    the study file, the code's git commit (left out when unknown; a dirty tree's commit is the one its
    changes start from, the ``git_commit`` tag says "+dirty") and the user."""
    tags = {"mlflow.source.type": "LOCAL", "mlflow.source.name": study_file, "mlflow.user": _user()}
    if commit != "unknown":
        tags["mlflow.source.git.commit"] = commit.removesuffix("+dirty")
    return tags


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's)
        return f"uid {os.getuid()}"


