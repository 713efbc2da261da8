"""What an object store holds is input: a key or a listed name that could climb out of the folder it is
read into is one line, exit 2, before anything is written (canaries compared byte for byte). Real S3 API
on loopback (moto's server, tests/conftest.py)."""

from __future__ import annotations

import boto3
import pytest
from study_helpers import in_process

from nmt.errors import UserError
from study.store.ownership import key_path


@pytest.fixture
def planted(s3_env, bucket, tmp_path):
    """(the store's URI, a function that puts an object under its prefix, the canary file outside, --results)"""
    client = boto3.session.Session().client("s3")
    canary = tmp_path / "outside" / "canary.txt"
    canary.parent.mkdir()
    canary.write_text("keep me")

    def put(key: str, data: bytes = b"{}") -> None:
        client.put_object(Bucket=bucket, Key=f"lab/{key}", Body=data)

    return f"s3://{bucket}/lab", put, canary, tmp_path / "results"


def refused(result, *needles: str) -> str:
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    (line,) = result.stderr.strip().splitlines()
    assert all(needle in line for needle in needles), line
    return line


@pytest.mark.parametrize("command", ["study.table", "study.list", "study.compare"])
def test_a_key_with_an_empty_part_is_not_read_to_an_absolute_path(planted, command):
    uri, put, canary, results = planted
    put("ray/x/trials/aaaaaaaaaaaa/trial.json")
    put(f"x/{canary}", b"overwritten")  # x//tmp/.../canary.txt: the rest of the key is an absolute path
    extra = ["--reference", "a"] if command == "study.compare" else []
    refused(in_process("x", *extra, "--results", str(results), "--storage", uri, module=command),
            f"{uri}/x/ object", "'' is not a plain name")
    assert canary.read_text() == "keep me" and not results.exists()


def test_a_listed_study_named_dot_dot_is_one_line_and_writes_nothing(planted):
    uri, put, canary, results = planted
    put("ray/../trials/aaaaaaaaaaaa/trial.json")
    put("ray/ok/trials/aaaaaaaaaaaa/trial.json")
    refused(in_process("--results", str(results), "--storage", uri, module="study.list"),
            f"{uri}/ray/../: '..' is not a study name")
    assert not results.exists() and sorted(p.name for p in canary.parent.parent.iterdir()) == ["outside"]


def test_a_trial_key_that_climbs_out_of_the_trial_store_is_one_line(planted):
    uri, put, canary, results = planted
    put("ray/x/trials/../trial.json", b'{"written": "outside its trial"}')
    refused(in_process("x", "--results", str(results), "--storage", uri, module="study.table"),
            f"{uri}/ray/x/ object 'trials/../trial.json'", "'..' is not a plain name")
    assert not (results / "ray" / "x" / "trial.json").exists()


def test_an_empty_directory_uri_is_one_line_not_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for uri in ("file://", ""):
        for command in (["ablation_srnmt", "--smoke"], ["ablation_srnmt", "--smoke", "--dry-run"]):
            refused(in_process(*command, "--results", str(tmp_path / "r"), "--storage", uri), "--storage", "name a directory")
        refused(in_process("--results", str(tmp_path / "r"), "--storage", uri, module="study.list"), "storage")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("relative", ["a//b", "/etc/passwd", "a/../../b", ".", "a/./b", "a\\b", "a\0b", ""])
def test_key_path_refuses_every_part_that_is_not_a_plain_name(tmp_path, relative):
    with pytest.raises(UserError, match="is not a plain name"):
        key_path(tmp_path, relative, "object")
    assert key_path(tmp_path, "a/b.json", "object") == tmp_path.resolve() / "a" / "b.json"


@pytest.mark.parametrize("command", ["study.table", "study.list"])
def test_results_that_is_a_file_is_one_line_before_anything_comes_down(planted, command):
    uri, put, _, results = planted
    put("ray/x/trials/aaaaaaaaaaaa/trial.json")
    results.write_text("a file")
    refused(in_process("x", "--results", str(results), "--storage", uri, module=command),
            f"--results {results} is a file, not a directory")
    assert results.read_text() == "a file"
