"""Shared fixtures: tiny real data (synthetic corpus + SentencePiece) in a temp cache."""

from __future__ import annotations

import itertools
import os
import tempfile

import pytest
import torch

from nmt.config import load_config

torch.set_num_threads(1)  # tests run beside each other (xdist); one thread each avoids oversubscription


def pytest_configure(config):
    """The time budget's report (tests/suite_budget.py), once, in the process that prints the summary."""
    if not hasattr(config, "workerinput"):  # not an xdist worker
        from suite_budget import SuiteBudget

        config.pluginmanager.register(SuiteBudget(), "suite_budget")


def pytest_terminal_summary(terminalreporter):
    """Which CPU ran the suite: the golden numbers (tests/e2e/test_golden.py) hold or fail per CPU, and a
    run's log is the evidence for adding one to tests/golden/golden.json."""
    from nmt.numerics import cpu_name

    vendor = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo", encoding="utf-8")
                   if line.startswith("vendor_id")), "unknown vendor") if os.path.isfile("/proc/cpuinfo") else "unknown vendor"
    terminalreporter.write_line(f"cpu: {cpu_name()} ({vendor}), {os.cpu_count()} cores")


@pytest.fixture(scope="session", autouse=True)
def private_tempdir(tmp_path_factory):
    """Temp files of in-process code (a study driver's Ray storage, MLflow's database-init lock files)
    go under pytest's temp dir, which pytest prunes, instead of piling up in /tmp."""
    before = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("tempfile"))
    yield
    tempfile.tempdir = before


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("nmt-cache")
    os.environ["NMT_CACHE_DIR"] = str(path)  # subprocesses (CLI tests) share the cache
    return path


TINY = [
    "data.size=300", "data.valid_size=20", "data.test_size=20", "data.spm.vocab_size=200", "data.max_len=60",
    "model.hidden=16", "model.emb=16", "train.batch_tokens=600", "train.max_epochs=1", "decode.beam=2",
    "train.threads=1",
]


@pytest.fixture(scope="session")
def tiny_data(cache_dir):
    from nmt.data.pipeline import load_data

    cfg = load_config(None, TINY + [f"data.cache_dir={cache_dir}"])
    return load_data(cfg.data, log=None)


@pytest.fixture
def tiny_config(cache_dir):
    """tiny_config("model.cell=atr", ...) -> a Config of a tiny run on the cached tiny corpus."""

    def make(*overrides: str):
        return load_config(None, TINY + [f"data.cache_dir={cache_dir}", *overrides])

    return make


@pytest.fixture
def ray_env(cache_dir):
    """Environment for a study subprocess (own Ray temp dir, shared data cache); cleaned up after."""
    import shutil

    from study_helpers import make_ray_env

    env, ray_tmp = make_ray_env(cache_dir)
    yield env
    shutil.rmtree(ray_tmp, ignore_errors=True)


class SharedCluster:
    """One single-node Ray cluster of 2 CPUs per test process (xdist worker), started when a test first asks
    for it and again if it died; stopped when the session ends."""

    def __init__(self, cache_dir):
        import secrets

        from study_helpers import make_ray_env

        self.env, self.ray_tmp = make_ray_env(cache_dir)
        # token authentication, as the README's cluster set-up says: a token left in ~/.ray by another Ray
        # command cannot turn it on for the head and off for the drivers
        self.env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16))
        self.cluster = None

    def address(self) -> str:
        from study_helpers import LoopbackCluster

        if self.cluster is None or not self.cluster.alive():
            self.stop()
            self.cluster = LoopbackCluster(self.env, nodes=1, cpus=2).__enter__()
        return self.cluster.address

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.__exit__()
            self.cluster = None


@pytest.fixture(scope="session")
def shared_cluster(cache_dir):
    import shutil

    shared = SharedCluster(cache_dir)
    yield shared
    shared.stop()
    shutil.rmtree(shared.ray_tmp, ignore_errors=True)


@pytest.fixture
def cluster_env(ray_env, shared_cluster, monkeypatch):
    """``ray_env`` for a study that needs *a* Ray cluster and nothing of its own: it joins this test
    process's shared one (RAY_ADDRESS), which saves a Ray start and stop (about 3 s of CPU) per study run;
    also set here for studies run in this process. Its drivers must not be killed (their jobs would hold
    the cluster's CPUs until Ray noticed), and --cpus does not apply to a joined cluster: it has 2 CPUs,
    and a study runs as many trials at once as its --cpus (or --max-concurrent) says."""
    env = {**ray_env, "RAY_ADDRESS": shared_cluster.address(),
           **{name: shared_cluster.env[name] for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}}
    for name in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN"):
        monkeypatch.setenv(name, env[name])
    return env


# ---------------------------------------------------------------------------
# an S3 API on loopback for the object-store tests: moto's server, started once per test process on
# 127.0.0.1, with throwaway credentials and a fresh bucket per test

BUCKETS = itertools.count()
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test-key-id", "AWS_SECRET_ACCESS_KEY": "test-secret-never-shown",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture(scope="session")
def s3_endpoint():
    moto_server = pytest.importorskip("moto.server", reason="the [test] extra installs moto[server]")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_env(s3_endpoint, monkeypatch, tmp_path) -> dict:
    """The environment of a process that uses the loopback store (no profile, no config files)."""
    env = {**CREDENTIALS, "AWS_ENDPOINT_URL": s3_endpoint, "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials")}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return env


@pytest.fixture
def bucket(s3_env) -> str:
    import boto3  # with moto: the [test] extra

    name = f"studies-{next(BUCKETS)}"
    boto3.session.Session().client("s3").create_bucket(Bucket=name)
    return name
