"""The recorded commit says "+dirty" when the code differs from it, and only then: records
that a resumed run rewrites inside the repository's results folder leave the code clean."""

import subprocess

import pytest

from study.store.provenance import code_commit


def _git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "nmt").mkdir()
    (tmp_path / "nmt" / "model.py").write_text("LAYERS = 4\n")
    (tmp_path / "results" / "study").mkdir(parents=True)
    (tmp_path / "results" / "study" / "history.json").write_text('{"epochs": []}\n')
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "records and code")
    return tmp_path


def test_clean_tree_gives_the_bare_commit(repo):
    assert code_commit.__wrapped__(repo) == _git(repo, "rev-parse", "HEAD")


def test_rewritten_records_leave_the_code_clean(repo):
    (repo / "results" / "study" / "history.json").write_text('{"epochs": [1]}\n')
    assert code_commit.__wrapped__(repo) == _git(repo, "rev-parse", "HEAD")


def test_changed_code_is_dirty(repo):
    (repo / "nmt" / "model.py").write_text("LAYERS = 6\n")
    assert code_commit.__wrapped__(repo) == _git(repo, "rev-parse", "HEAD") + "+dirty"


def test_untracked_files_do_not_count(repo):
    (repo / "nmt" / "scratch.py").write_text("x = 1\n")
    assert code_commit.__wrapped__(repo) == _git(repo, "rev-parse", "HEAD")


def test_a_copy_without_git_history_is_unknown(tmp_path):
    assert code_commit.__wrapped__(tmp_path) == "unknown"


def test_the_cpu_is_named_with_its_family_model_and_vector_flags(tmp_path):
    from study.store.provenance import cpu_description, environment

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                       "model name\t: AMD EPYC\nstepping\t: 1\nflags\t\t: fpu sse2 avx fma avx2 avx512f\n\n"
                       "processor\t: 1\nmodel name\t: another core, not read\n")
    assert cpu_description.__wrapped__(cpuinfo) == "AMD EPYC (family 25, model 17, stepping 1; avx512f, avx2, fma)"
    # an ARM machine's cpuinfo names no model but its features
    cpuinfo.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd sve\nCPU part\t: 0xd40\n")
    assert cpu_description.__wrapped__(cpuinfo).endswith("(asimd, sve)")
    missing = cpu_description.__wrapped__(tmp_path / "none")
    assert missing and "(" not in missing  # the platform's processor name, or "unknown"
    assert environment()["cpu"] == cpu_description()
