"""An S3 API on loopback for the object-store tests: moto's server, started once per test process on
127.0.0.1, with throwaway credentials and a fresh bucket per test."""

from __future__ import annotations

import itertools

import pytest

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
