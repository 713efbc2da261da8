"""Portable numerics: native kernels differ between CPU capabilities, the pinned setting cannot, and
the setting is applied before torch computes, recorded, kept out of trial keys and kept per study.

Modules covered here: ``study.store.resume_checks``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.errors import UserError
from nmt.numerics import PORTABLE_ENV, check_numerics, has_avx2, numerics_env

# a training step's numerics in miniature: the loss's log-softmax (ATen's vectorised kernel) and a
# matrix product whose MKL path depends on the CPU; prints a digest of their bits
PROBE = """
import hashlib, json, sys
if sys.argv[1] != "none":
    from nmt.numerics import apply_numerics
    apply_numerics(sys.argv[1])
import torch
torch.manual_seed(0)
x = torch.randn(64, 257)
a, b = torch.randn(37, 384), torch.randn(384, 128)
out = {"log_softmax": torch.log_softmax(x, -1), "matmul": a @ b}
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(),
                  **{k: hashlib.sha256(v.numpy().tobytes()).hexdigest() for k, v in out.items()}}))
"""


def probe(numerics: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in PORTABLE_ENV}
    done = subprocess.run([sys.executable, "-c", PROBE, numerics], env={**clean, **env, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def cpu_flags() -> set[str]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return set(line.split(":", 1)[-1].split())


needs_avx512 = pytest.mark.skipif("avx512f" not in cpu_flags(),
                                  reason="this CPU has no AVX-512: there is no second ATen capability to differ from")


@needs_avx512
def test_native_kernels_differ_between_cpu_capabilities_and_portable_ones_cannot():
    """What an AVX-512 machine and an AVX2 machine compute, natively: the log-softmax differs in its bits.
    Under portable numerics a process computes the same bits whatever capability it would have picked."""
    wide, narrow = probe("none", ATEN_CPU_CAPABILITY="avx512"), probe("none", ATEN_CPU_CAPABILITY="avx2")
    assert (wide["capability"], narrow["capability"]) == ("AVX512", "AVX2")
    assert wide["log_softmax"] != narrow["log_softmax"]
    pinned = [probe("portable", ATEN_CPU_CAPABILITY="avx512", MKL_CBWR="AVX512"), probe("portable"),
              probe("portable", ATEN_CPU_CAPABILITY="avx2")]
    assert all(result == pinned[0] for result in pinned) and pinned[0]["capability"] == "AVX2"


@pytest.mark.skipif(not has_avx2(), reason="portable numerics need an x86-64 CPU with AVX2")
def test_native_leaves_the_machine_its_choice_and_portable_pins_it():
    assert probe("native")["capability"] == probe("none")["capability"]
    assert probe("portable")["capability"] == "AVX2"


@pytest.mark.skipif(not has_avx2(), reason="portable numerics need an x86-64 CPU with AVX2")
def test_portable_numerics_after_torch_computed_are_refused():
    script = ("import torch; torch.tanh(torch.ones(3))\nfrom nmt.numerics import apply_numerics\n"
              "from nmt.errors import UserError\ntry:\n    apply_numerics('portable', 'train.numerics')\n"
              "except UserError as err:\n    print(err)\n")
    clean = {k: v for k, v in os.environ.items() if k not in PORTABLE_ENV}
    if "avx512f" not in cpu_flags():
        clean["ATEN_CPU_CAPABILITY"] = "default"  # any capability but AVX2 was fixed by the first op
    done = subprocess.run([sys.executable, "-c", script], env=clean, capture_output=True, text=True, timeout=120)
    assert "train.numerics: portable numerics need ATen's CPU capability AVX2, but this process already computes " \
           "with" in done.stdout, done.stdout + done.stderr


def test_settings_and_their_environment():
    assert numerics_env("portable") == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert numerics_env("native") == {}
    with pytest.raises(UserError, match="'fast' is not a numerics setting; use portable"):
        check_numerics("fast", "train.numerics")


def test_numerics_stay_out_of_the_trial_key():
    from study.spec.portable import config_key

    config = {"model": {"cell": "gru"}, "train": {"lr": 0.001, "seed": 1}, "data": {"preset": "synthetic"}}
    native = {**config, "train": {**config["train"], "numerics": "native"}}
    portable = {**config, "train": {**config["train"], "numerics": "portable"}}
    assert config_key(config) == config_key(native) == config_key(portable)


class StoredStudy:
    """A study file's tree and a trial store to which ``finish`` adds finished trials with given metrics."""

    def __init__(self, tmp_path, name: str):
        from study.store.trial_store import TrialStore

        self.tree = {"name": name, "description": "d", "data": {"preset": "synthetic", "size": 100,
                                                                "spm": {"vocab_size": 50}},
                     "base": {"model": {"hidden": 8, "emb": 8}}, "variants": [{"label": "a", "set": {}}],
                     "budget": {"epochs": 1}}
        self.root = tmp_path / "store"
        self.store = TrialStore(self.root)
        self.contents = tmp_path / "contents"
        self.contents.mkdir()

    def finish(self, key: str, **metrics) -> None:
        self.store.start(key * 12, {"key": key * 12})
        self.store.install_finished(key * 12, self.contents, {"status": "ok", "test_bleu": 1.0, **metrics})

    def check(self, **study) -> None:
        from study.spec.loading import spec_from_dict
        from study.store.resume_checks import check_numerics as check_study

        check_study(spec_from_dict({**self.tree, **study}, "s.yaml"), self.root)


def test_a_study_keeps_one_numerics_setting(tmp_path):
    stored = StoredStudy(tmp_path, "mixed")
    stored.finish("a")  # recorded before the setting existed
    with pytest.raises(UserError, match=r"study mixed: 1 of its finished trials computed with numerics native \(recorded "
                                        r"before the setting existed.*add `numerics: native` to s\.yaml"):
        stored.check()
    stored.check(numerics="native")
    stored.finish("b", numerics="portable", pinning=2)
    with pytest.raises(UserError, match="1 of its finished trials computed with numerics portable-2, and this run would "
                                        "use native"):
        stored.check(numerics="native")


def test_a_study_keeps_one_pinning_of_portable_numerics(tmp_path):
    """Records of pinning 1 (portable before pinnings were recorded: MKL on AVX2) do not mix with pinning 2's."""
    stored = StoredStudy(tmp_path, "pinned")
    stored.finish("a", numerics="portable", pinning=2)
    stored.check()  # this version's pinning: nothing to say
    stored.finish("b", numerics="portable")
    with pytest.raises(UserError, match=r"study pinned: 1 of its finished trials computed with numerics portable-1 \(ATen "
                                        r"and MKL pinned to AVX2\), and this version computes portable with pinning 2 "
                                        r"\(.*COMPATIBLE.*\); a study keeps one .* start it over with --fresh"):
        stored.check()


def test_a_checkpoint_of_another_pinning_is_not_continued(tmp_path):
    """A run's epochs keep one arithmetic: a checkpoint written under pinning 1 (no arithmetic recorded)
    is not continued under pinning 2; the run starts over and says why."""
    import torch

    from nmt.config import config_from_dict, smoke
    from nmt.trainer import STATE, Trainer

    cfg = smoke(config_from_dict({"data": {"preset": "synthetic", "size": 60, "cache_dir": str(tmp_path / "cache")},
                                  "train": {"max_epochs": 1}}))
    said: list[str] = []
    first = Trainer(cfg, tmp_path / "first", log=said.append)
    first.fit()
    state = torch.load(first.checkpoint_dir / STATE, weights_only=True)
    assert state["arithmetic"] == "portable-2"
    assert Trainer(cfg, tmp_path / "again", log=said.append).resume(first.checkpoint_dir)
    del state["arithmetic"]  # as pinning 1 wrote it
    torch.save(state, first.checkpoint_dir / STATE)
    assert not Trainer(cfg, tmp_path / "later", log=said.append).resume(first.checkpoint_dir)
    assert any("its epochs computed with numerics portable-1, and this run computes with portable-2; a run keeps one"
               in line and "starting from scratch" in line for line in said)


def test_a_run_in_a_process_that_computed_before_is_recorded_as_native(tmp_path, capsys, monkeypatch):
    """nmt.train called from Python after torch ran (a notebook, this test process) cannot pin the kernels:
    it trains with the CPU's own, records native and says so once at the end."""
    import torch

    from nmt.train import main

    torch.log_softmax(torch.randn(4, 5), -1)  # the kernels are chosen now
    if torch.backends.cpu.get_cpu_capability() == "AVX2":
        pytest.skip("this process already computes with AVX2: pinning it changes nothing to detect")
    monkeypatch.chdir(tmp_path)
    assert main(["--smoke", "--out", str(tmp_path / "run"), "--set", "train.max_epochs=1"]) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["numerics"] == "native" and metrics["cpu_capability"] != "AVX2"
    err = capsys.readouterr().err
    assert "warning: train.numerics: portable could not be set, since this process computed with torch before" in err


def test_a_native_study_with_trials_of_an_older_pinning_is_not_told_to_switch_to_portable(tmp_path):
    """`numerics: portable` would compute pinning 2, which still differs from the stored pinning 1."""
    stored = StoredStudy(tmp_path, "older")
    stored.finish("a", numerics="portable")  # pinning 1: recorded before pinnings were
    with pytest.raises(UserError) as refusal:
        stored.check(numerics="native")
    message = str(refusal.value)
    assert message.endswith("compare: start it over with --fresh (no setting of this version computes portable-1)")
    assert "add `numerics" not in message
