"""Stored records are input: what study.table, study.list, study.report, study.compare and
--resume read back from a results directory is checked like a study file - never followed out
of the directory, never trusted for a path, never waited on - and a table holds exactly the
study's trials. Real Ray, MLflow and SQLite on a tiny finished study.

Modules covered here: ``nmt.fileio``, ``study.analysis.stored_study``, ``study.store.record_validation`` and
``study.store.study_state``."""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
import signal
import stat
from pathlib import Path

import pytest
from study_helpers import built_once, grid_study, study

from nmt.cli import run_main
from nmt.fileio import write_json

NAME = "stored"
TWO_ROWS = """  - {label: small, set: {}}
  - {label: wide, set: {model.hidden: 24}}"""
SECRET = "secret-token-7f3a9c"  # what no file inside the results directory may ever contain


@pytest.fixture(scope="module")
def finished(tmp_path_factory, shared_cluster):
    """A finished two-trial study, run once for the whole test run (the tests read it or copy it): (its study
    file, its results directory)."""

    def run(base: Path) -> None:
        path = base / f"{NAME}.yaml"
        path.write_text(grid_study(NAME, TWO_ROWS, epochs=1))
        env = {**shared_cluster.env, "RAY_ADDRESS": shared_cluster.address()}
        done = study(str(path), "--cpus", "1", "--results", str(base / "results"), env=env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    base = built_once(tmp_path_factory, "stored", run)
    return base / f"{NAME}.yaml", base / "results"


def copy_results(finished, tmp_path: Path) -> Path:
    copy = tmp_path / "results"
    shutil.copytree(finished[1], copy, symlinks=True)
    return copy


def secret_file(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET + "\n")
    return secret


def leaked(results: Path) -> list[str]:
    """Files inside ``results`` that hold the secret: a read outside the results directory."""
    found = []
    for parent, _, files in os.walk(results):
        for name in files:
            path = Path(parent) / name
            if path.is_file() and not path.is_symlink() and SECRET.encode() in path.read_bytes():
                found.append(str(path))
    return found


def command(module: str, argv: list[str], capsys) -> tuple[int, str, str]:
    """One command in this process (its imports paid once), stopped with an error after 60 s: a
    read that blocks (a FIFO) fails the test instead of hanging it."""
    main = __import__(module, fromlist=["main"]).main

    def hang(signum, frame):
        raise TimeoutError(f"{module} {argv} still running after 60 s")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(60)
    try:
        code = run_main(main, argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    return code, out, err


def refused(code: int, err: str, *needles: str) -> None:
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err


# --- security -------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_record_naming_paths_outside_the_results_directory_is_refused(finished, tmp_path, capsys):
    results = copy_results(finished, tmp_path)
    secret = secret_file(tmp_path)
    shutil.rmtree(results / "ray")  # a copy of the tables and records only, as a colleague sends it
    saved = results / NAME / "trials.jsonl"
    lines = saved.read_text().splitlines()
    record = json.loads(lines[0])
    record.update(key="../../../outside/pwned", hyp_file=f"../../{secret.name}")
    saved.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    code, _, err = command("study.table", [NAME, "--results", str(results)], capsys)
    refused(code, err, "line 1: 'key' is '../../../outside/pwned', not a trial key")
    record.update(key=json.loads(lines[0])["key"])
    saved.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    code, _, err = command("study.table", [NAME, "--results", str(results)], capsys)
    refused(code, err, "'hyp_file' is '../../secret.txt', not hyps/")
    assert not (tmp_path / "outside").exists() and not leaked(results)


@pytest.mark.slow
def test_a_link_in_a_study_folder_is_never_embedded_in_the_report(finished, tmp_path, capsys):
    results = copy_results(finished, tmp_path)
    secret = secret_file(tmp_path)
    (results / NAME / "zz.png").symlink_to(secret)
    for module, argv in (("study.report", [NAME, "--results", str(results)]),
                         ("study.table", [NAME, "--results", str(results)])):
        code, _, err = command(module, argv, capsys)
        refused(code, err, "zz.png is a symbolic link")
    assert not leaked(results)


def test_written_files_follow_the_umask(tmp_path):
    previous = os.umask(0o002)  # a lab's shared results directory: group-writable
    try:
        write_json(tmp_path / "shared.json", {"a": 1})
        os.umask(0o077)
        write_json(tmp_path / "private.json", {"a": 1})
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "shared.json").stat().st_mode) == 0o664
    assert stat.S_IMODE((tmp_path / "private.json").stat().st_mode) == 0o600


# --- a table holds exactly the study's trials ----------------------------------------------


@pytest.mark.slow
def test_a_stored_trial_of_another_config_is_left_out_and_named(finished, tmp_path, capsys):
    results = copy_results(finished, tmp_path)
    store = results / "ray" / NAME
    key = json.loads((results / NAME / "trials.jsonl").read_text().splitlines()[0])["key"]
    stray = "0123456789ab"  # the same label and seed, another config (hidden 17): not a trial of this study
    shutil.copytree(store / "trials" / key, store / "trials" / stray)
    shutil.copytree(store / "finished" / key, store / "finished" / stray)
    identity = json.loads((store / "trials" / stray / "trial.json").read_text())
    identity["config"]["model"]["hidden"] = 17
    (store / "trials" / stray / "trial.json").write_text(json.dumps({**identity, "key": stray}))
    code, out, err = command("study.table", [NAME, "--results", str(results)], capsys)
    assert code == 0, err
    rows = list(csv.DictReader(open(results / NAME / "table.csv", encoding="utf-8")))
    assert [(row["label"], row["n"]) for row in rows] == [("small", "1"), ("wide", "1")]
    assert "Left out: 1 stored trial(s) that are not trials of this study" in out and stray in out
    assert stray not in (results / NAME / "trials.jsonl").read_text()


# --- late failures, exports and names --------------------------------------------------------


@pytest.mark.slow
def test_titles_and_labels_that_latex_markdown_or_mathtext_read_as_markup_are_written_as_text(finished, tmp_path,
                                                                                                 capsys):
    results = copy_results(finished, tmp_path)
    state_path = results / NAME / "study.json"
    state = json.loads(state_path.read_text())
    state["spec"]["table"]["title"] = r"$\textbf{GRU}$ {x} ^ ~ 50%"
    state["spec"]["variants"][0]["label"] = "sm|all"  # the study's row, as its file would name it
    state_path.write_text(json.dumps(state))
    saved = results / NAME / "trials.jsonl"
    saved.write_text(saved.read_text().replace('"label": "small"', '"label": "sm|all"'))
    shutil.rmtree(results / "ray")
    code, _, err = command("study.table", [NAME, "--results", str(results)], capsys)
    assert code == 0, err
    tex = (results / NAME / "table.tex").read_text()
    assert r"\caption{\$\textbackslash{}textbf\{GRU\}\$ \{x\} \textasciicircum{} \textasciitilde{} 50\%}" in tex
    table = (results / NAME / "table.md").read_text().splitlines()
    assert any(line.startswith(r"| sm\|all ") for line in table)
    assert len({line.count("|") - line.count(r"\|") for line in table if line.startswith("|")}) == 1


def test_a_comparison_of_long_study_names_gets_a_short_folder(tmp_path):
    from study.analysis.comparison import output_dir

    names = [f"study_{index}_" + "x" * 90 for index in range(4)]
    out = output_dir(None, names, tmp_path)
    assert len(out.name.encode()) <= 120 and out.parent == tmp_path.resolve() / "compare"
    assert output_dir(None, names, tmp_path) == out != output_dir(None, names[:3], tmp_path)


# --- the advice when the study's folder is lost ------------------------------------------------


@pytest.mark.slow
def test_a_lost_study_folder_is_rebuilt_from_the_trial_store_by_resume(finished, tmp_path, cluster_env, capsys):
    results = copy_results(finished, tmp_path)
    before = [(row["label"], row["bleu_mean"]) for row in csv.DictReader(open(results / NAME / "table.csv"))]
    shutil.rmtree(results / NAME)
    code, _, err = command("study.table", [NAME, "--results", str(results)], capsys)
    refused(code, err, "is missing, but its trial store", "--resume")
    resumed = study(str(finished[0]), "--cpus", "1", "--results", str(results), "--resume", env=cluster_env)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "continues from its trial store" in resumed.stdout and "(finished before this run)" in resumed.stdout
    after = [(row["label"], row["bleu_mean"]) for row in csv.DictReader(open(results / NAME / "table.csv"))]
    assert after == before


# --- the fuzz test: records damaged at random --------------------------------------------------


def damage_value(rng: random.Random):
    """A value of another type, out of range, non-finite, or huge."""
    return rng.choice(["abc", None, [1, 2], {"x": 1}, True, -5, 10**400, float("inf"), float("nan")])


def damaged_text(text: str, rng: random.Random) -> str:
    kind = rng.choice(["truncate", "field", "deep", "not a mapping", "empty"])
    if kind == "truncate":
        return text[:rng.randrange(1, max(2, len(text)))]
    if kind == "empty":
        return ""
    if kind == "deep":
        return "[" * 200_000 + "]" * 200_000
    if kind == "not a mapping":
        return "[]"
    data = json.loads(text)
    if isinstance(data, dict) and data:
        field = rng.choice(sorted(data))
        if field == "epochs" and data[field]:
            entry = rng.choice(data[field])
            entry[rng.choice(sorted(entry))] = damage_value(rng)
        else:
            data[field] = damage_value(rng)
    return json.dumps(data)  # NaN and Infinity as Python writes them


def damage(results: Path, rng: random.Random, secret: Path) -> Path:
    """Damage one stored file at random; the file damaged."""
    candidates = sorted(path for path in results.rglob("*") if path.is_file() and path.suffix in (
        ".json", ".jsonl", ".ref", ".hyp", ".png") and "mlflow" not in path.name)
    target = rng.choice(candidates)
    how = rng.choice(["content", "content", "content", "link", "fifo", "directory"])
    if how == "content" and target.suffix in (".json", ".jsonl"):
        text = target.read_text()
        if target.suffix == ".jsonl":
            lines = text.splitlines()
            index = rng.randrange(len(lines))
            lines[index] = damaged_text(lines[index], rng)
            target.write_text("\n".join(lines) + "\n")
        else:
            target.write_text(damaged_text(text, rng))
    elif how == "content":
        target.write_bytes(target.read_bytes()[:rng.randrange(0, 64)])
    else:
        target.unlink()
        if how == "link":
            target.symlink_to(secret)
        elif how == "fifo":
            os.mkfifo(target)
        else:
            target.mkdir()
    return target


def trial_rows(results: Path) -> dict[str, tuple]:
    """key -> (label, seed, test BLEU) of trials.csv, or {} when there is none."""
    path = results / NAME / "trials.csv"
    if not path.is_file() or path.is_symlink():
        return {}
    return {row["key"]: (row["label"], row["seed"], row["test_bleu"]) for row in csv.DictReader(open(path))}


CASES = 16


@pytest.mark.slow
def test_records_damaged_at_random_never_give_a_traceback_a_hang_or_a_leak(finished, tmp_path, capsys):
    rng = random.Random(69)
    original = trial_rows(finished[1])
    assert len(original) == 2
    for case in range(CASES):
        place = tmp_path / f"case{case}"
        place.mkdir()
        secret = secret_file(place)
        results = copy_results(finished, place)
        target = damage(results, rng, secret)
        for module, argv in (("study.table", [NAME]), ("study.list", [NAME]), ("study.report", [NAME]),
                             ("study.compare", [NAME, "--reference", "wide"])):
            code, out, err = command(module, [*argv, "--results", str(results)], capsys)
            what = f"case {case}: {target.relative_to(results)} damaged; {module}: {err[-2000:]}"
            assert code in (0, 2) and "Traceback" not in err, what
            if code == 2:
                assert err.count("\n") == 1, what
        assert secret.read_bytes() == (SECRET + "\n").encode() and not leaked(results), target
        damaged_keys = {part for part in target.relative_to(results).parts if len(part) == 12}
        after = trial_rows(results)
        for key, row in original.items():  # every trial whose records are whole is tabled as before
            if key not in damaged_keys and key in after:
                assert after[key] == row, (case, target)
        shutil.rmtree(place)


@pytest.mark.slow
def test_resume_on_damaged_records_is_one_line_or_a_clean_run(finished, tmp_path, cluster_env):
    rng = random.Random(68)
    for case in range(3):
        place = tmp_path / f"case{case}"
        place.mkdir()
        secret = secret_file(place)
        results = copy_results(finished, place)
        store = results / "ray" / NAME
        while True:  # a record of the trial store: what --resume acts on
            target = damage(results, rng, secret)
            if store in target.parents:
                break
            shutil.rmtree(results)
            results = copy_results(finished, place)
        resumed = study(str(finished[0]), "--cpus", "1", "--results", str(results), "--resume", env=cluster_env)
        assert resumed.returncode in (0, 2) and "Traceback" not in resumed.stderr, resumed.stderr[-3000:]
        if resumed.returncode == 2:
            assert resumed.stderr.count("\n") == 1, resumed.stderr
        assert secret.read_bytes() == (SECRET + "\n").encode() and not leaked(results)


@pytest.mark.slow
def test_fresh_replaces_a_damaged_study_state_that_a_plain_run_refuses(finished, tmp_path, cluster_env):
    results = copy_results(finished, tmp_path)
    (results / NAME / "study.json").write_text("[")  # cut short
    args = [str(finished[0]), "--cpus", "1", "--results", str(results)]
    plain = study(*args, env=cluster_env)
    assert plain.returncode == 2 and "unreadable study state" in plain.stderr and "--fresh" in plain.stderr
    fresh = study(*args, "--fresh", env=cluster_env)  # the advice works: no loop
    assert fresh.returncode == 0, fresh.stdout[-3000:] + fresh.stderr[-3000:]
    assert json.loads((results / NAME / "study.json").read_text())["status"] == "complete"


def test_a_folder_where_a_file_goes_is_one_line_and_is_left_as_it_is(tmp_path):
    from nmt.errors import UserError
    from nmt.fileio import write_lines

    folder = tmp_path / "table.md"
    (folder / "mine.txt").parent.mkdir()
    (folder / "mine.txt").write_text("keep")
    with pytest.raises(UserError, match=r"table.md is a folder, where this tool writes a file of that name; move"):
        write_lines(folder, ["| a |"])
    assert (folder / "mine.txt").read_text() == "keep" and [p.name for p in tmp_path.iterdir()] == ["table.md"]
