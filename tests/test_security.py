"""Security properties: servers on localhost, safe YAML, weights-only checkpoints, no shell.

Modules covered here: ``nmt.checkpoint``."""

from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path

import pytest

from nmt.checkpoint import CheckpointError, load_file
from nmt.errors import ConfigError
from nmt.typed_config import read_yaml

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*ROOT.glob("nmt/**/*.py"), *ROOT.glob("study/**/*.py")])


def calls(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            yield node


def name_of(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return f"{name_of(func.value)}.{func.attr}"
    return func.id if isinstance(func, ast.Name) else ""


def test_no_shell_no_eval_no_unsafe_loaders_in_the_sources():
    assert SOURCES
    for path in SOURCES:
        for call in calls(path):
            name = name_of(call.func)
            where = f"{path.relative_to(ROOT)}:{call.lineno}"
            assert name not in ("eval", "exec", "os.system", "pickle.load", "pickle.loads", "yaml.load",
                                "yaml.unsafe_load"), where
            for keyword in call.keywords:
                if keyword.arg == "shell":
                    assert isinstance(keyword.value, ast.Constant) and keyword.value.value is False, where
            if name == "torch.load":
                weights_only = [k for k in call.keywords if k.arg == "weights_only"]
                assert weights_only and weights_only[0].value.value is True, where
            if name == "ray.init":
                assert any(k.arg == "include_dashboard" for k in call.keywords) or any(
                    k.arg is None for k in call.keywords), where


def test_every_documented_server_binds_to_localhost():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    servers = [line for line in readme.splitlines()
               if re.search(r"\b(mlflow (ui|server)|optuna-dashboard sqlite|ray start --head)\b", line)]
    assert len(servers) >= 3
    for line in servers:
        assert "127.0.0.1" in line, line
    ray_setup = (ROOT / "study" / "execution" / "ray_setup.py").read_text(encoding="utf-8")
    runner = (ROOT / "study" / "execution" / "driver.py").read_text(encoding="utf-8")  # prints the MLflow UI command
    assert '"include_dashboard": False' in ray_setup and "--host 127.0.0.1" in runner


def test_yaml_with_python_tags_is_refused_not_executed(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.yaml"
    path.write_text(f"model: !!python/object/apply:os.system ['touch {marker}']\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="evil.yaml"):
        read_yaml(path)
    assert not marker.exists()


class _Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_checkpoint_with_a_pickle_payload_is_refused_not_executed(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "state.pt"
    path.write_bytes(pickle.dumps({"model": _Payload(marker)}))
    with pytest.raises(CheckpointError, match="state.pt"):
        load_file(path)
    assert not marker.exists()
