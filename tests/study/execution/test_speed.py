"""study.speed: every row of a stored study timed in one pass, and the tables built from it.

Modules covered here: ``study.analysis.speed_columns`` and ``study.execution.row_timing``."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import queue
import threading
import time
from concurrent.futures import Future

import pandas as pd
import pytest

from nmt.cli import run_main
from nmt.errors import UserError
from nmt.memory import MALLOC_ENV
from nmt.numerics import PINNING
from study.analysis.speed_columns import TRIAL_TIMINGS_NOTE, read_speed, with_speed
from study.speed import main
from study.store.provenance import cpu_description

TINY = ["data.size=300", "data.valid_size=20", "data.test_size=20", "data.spm.vocab_size=200", "model.hidden=16",
        "model.emb=16", "seeds=1"]
TRIAL_SPEED = {"train_tokens_per_s": 50.0, "decode_words_per_s": 20.0}  # what the records say they ran at


@pytest.fixture(scope="module")
def stored(tmp_path_factory, cache_dir):
    """A finished context_gates study on the tiny corpus as its run stores it (study.json, trial records,
    tables), each trial claiming the same speeds."""
    from study.analysis.exports import write_exports
    from study.store.study_state import write_state
    from study.spec.expansion import expand
    from study.spec.loading import load_study, spec_to_dict

    results = tmp_path_factory.mktemp("speed") / "results"
    spec = load_study("context_gates", TINY)
    study_dir = results / spec.name
    metrics = {"params": 1000, "weight_matrices": 3, "numerics": "portable", "pinning": PINNING, **TRIAL_SPEED}
    records = [{"key": t.key, "label": t.label, "row": t.row, "seed": t.seed, "config": t.config, "params": {},
                "status": "ok", "error": "", "hyp_path": None, "artifacts": [],
                "metrics": {**metrics, "test_bleu": 10.0 + t.row, "valid_bleu": 9.0, "epochs": 3, "best_epoch": 2}}
               for t in expand(spec)]
    write_state(study_dir, {"study": spec.name, "spec": spec_to_dict(spec), "request": spec.tree})
    write_exports(spec, records, None, study_dir)
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        assert run_main(main, [spec.name, "--results", str(results), "--batches", "1", "--sentences", "3",
                               "--repeats", "2"]) == 0
    SAID[:] = said.getvalue().splitlines()
    return study_dir


SAID: list[str] = []  # what the timing pass of ``stored`` printed


def test_the_pass_s_progress_lines_come_from_its_process_in_order(stored):
    rows = [row["label"] for row in json.loads((stored / "speed.json").read_text())["rows"]]
    first = next(i for i, line in enumerate(SAID) if line.startswith("timing "))
    child = SAID[first + 1:first + 3 + len(rows)]
    assert [line.split(":")[0].strip() for line in child[:len(rows)]] == rows, SAID
    assert child[len(rows)].startswith("training: ") and child[len(rows) + 1].startswith("decoding: "), SAID
    assert SAID[first + 3 + len(rows)].strip().startswith(f"{rows[0]} ") and "train tok/s" in SAID[first + 3 + len(rows)]


def test_a_line_is_relayed_while_the_pass_still_runs_and_the_end_mark_ends_the_relay():
    from study.execution.row_timing import _DONE, _relay

    lines, timing, said = queue.Queue(), Future(), []
    relay = threading.Thread(target=_relay, args=(lines, timing, said.append))
    relay.start()
    lines.put("  GRU: 10 target tokens")
    deadline = time.monotonic() + 10
    while not said and time.monotonic() < deadline:
        time.sleep(0.01)
    assert said == ["  GRU: 10 target tokens"] and relay.is_alive() and not timing.done()
    lines.put(_DONE)
    relay.join(10)
    assert not relay.is_alive()
    # a pass that died puts no end mark: the relay ends once its result is an error
    died = Future()
    died.set_exception(RuntimeError("killed"))
    _relay(queue.Queue(), died, said.append)


def test_every_row_is_timed_and_the_tables_show_the_pass_not_the_trials(stored):
    speed = json.loads((stored / "speed.json").read_text())
    table = pd.read_csv(stored / "table.csv")
    assert [row["label"] for row in speed["rows"]] == list(table["label"])
    timed = {row["label"]: row for row in speed["rows"]}
    for row in table.to_dict("records"):
        assert row["train_tokens_per_s"] == pytest.approx(timed[row["label"]]["train_tokens_per_s"])
        assert row["decode_words_per_s"] == pytest.approx(timed[row["label"]]["decode_words_per_s"])
        assert row["train_tokens_per_s"] not in (50.0, 0.0) and math.isfinite(row["train_tokens_per_s"])
        assert row["decode_words_per_s"] not in (20.0, 0.0) and math.isfinite(row["decode_words_per_s"])
    assert all(row["train_tokens"] > 0 and row["decode_words"] > 0 for row in speed["rows"])
    # every round is kept (the samples of a claim on a timing), the table shows the fastest
    for row in speed["rows"]:
        for metric in ("train_tokens_per_s", "decode_words_per_s"):
            rounds = row[metric + "_rounds"]
            assert len(rounds) == 2 and row[metric] == max(rounds) and all(0 < value <= max(rounds) for value in rounds)
    assert speed["cpu"] == cpu_description() and speed["repeats"] == 2
    # timed in a process that started with the trials' numerics (portable: ATen pinned to AVX2, MKL's compatible
    # path), whatever this test process computed with before, and freed memory kept as the trial workers keep it
    assert speed["numerics"] == {"numerics": "portable", "pinning": PINNING, "cpu_capability": "AVX2",
                                 "mkl_cbwr": "COMPATIBLE"}
    assert speed["malloc"] == [name for name in MALLOC_ENV if name not in os.environ]
    # the trials' own timings stay in the per-trial CSV
    assert set(pd.read_csv(stored / "trials.csv")["train_tokens_per_s"]) == {50.0}
    note = (f"train tok/s and decode w/s: one timing pass of every row (python -m study.speed, {speed['date']}, "
            f"{speed['machine']}, 1 thread, fastest of 2 interleaved rounds), not the trials' own timings.")
    for name in ("table.md", "table.tex", "report.html"):
        text = (stored / name).read_text()
        assert "one timing pass of every row" in text, name
    assert note in (stored / "table.md").read_text()


def test_a_rebuilt_table_is_the_same_from_the_same_pass(stored):
    from study.table import main as table_main

    before = {name: (stored / name).read_bytes() for name in ("table.md", "table.csv", "table.tex", "bleu_vs_speed.pdf")}
    assert table_main([stored.name, "--results", str(stored.parent)]) == 0
    assert {name: (stored / name).read_bytes() for name in before} == before


def test_rows_the_pass_lacks_show_no_speed_and_the_note_names_them():
    rows = pd.DataFrame({"label": ["GRU", "GRU + CG"], "train_tokens_per_s": [50.0, 50.0],
                         "decode_words_per_s": [20.0, 20.0]})
    speed = {"date": "2026-11-26", "machine": "a CPU", "threads": 2, "repeats": 3,
             "rows": [{"label": "GRU", "train_tokens_per_s": 900.0, "decode_words_per_s": 300.0}]}
    shown = with_speed(rows, speed)
    assert shown["train_tokens_per_s"][0] == 900.0 and math.isnan(shown["train_tokens_per_s"][1])
    assert shown["decode_words_per_s"][0] == 300.0 and math.isnan(shown["decode_words_per_s"][1])
    assert shown.attrs["speed_note"].endswith("2 threads, fastest of 3 interleaved rounds), not the trials' own "
                                              "timings. Not in that pass (run it again): GRU + CG.")
    trials_own = with_speed(rows, None)  # without a pass: the trials' speeds, and a note that says so
    assert list(trials_own["train_tokens_per_s"]) == [50.0, 50.0] and trials_own.attrs["speed_note"] == TRIAL_TIMINGS_NOTE
    assert "speed_note" not in rows.attrs


def test_the_speed_note_goes_under_the_tables_and_the_speed_plot_not_the_bleu_plot(stored, tmp_path):
    import shutil

    from study.analysis.plots import _note_lines
    from study.table import main as table_main

    copy = tmp_path / "results" / stored.name
    shutil.copytree(stored, copy)
    (copy / "speed.json").unlink()
    assert table_main([stored.name, "--results", str(copy.parent)]) == 0
    said = "taken while they trained, so they also measure what else the machine ran then"  # no quote: HTML escapes it
    for name in ("table.md", "table.tex", "report.html"):
        assert said in (copy / name).read_text(), name
    rows = with_speed(pd.read_csv(copy / "table.csv").assign(still_improving=0, uneven_epochs=False), None)
    assert "".join(_note_lines(rows, 30, shows_speed=True)) == TRIAL_TIMINGS_NOTE
    assert _note_lines(rows, 30, shows_speed=False) == []


def error_of(capsys, *argv: str) -> str:
    assert run_main(main, list(argv)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_bad_input_is_one_line_and_a_nonzero_exit(tmp_path, capsys):
    assert "no stored results" in error_of(capsys, "cells", "--results", str(tmp_path))
    assert "plain identifier" in error_of(capsys, "..", "--results", str(tmp_path))
    with pytest.raises(SystemExit) as exit_:
        main(["cells", "--batches", "0"])
    assert exit_.value.code == 2 and "at least 1" in capsys.readouterr().err
    (tmp_path / "speed.json").write_text('{"date": "2026-11-26", "rows": []}')
    with pytest.raises(UserError) as err:
        read_speed(tmp_path)
    assert "speed.json" in str(err.value) and "machine" in str(err.value) and "delete it" in str(err.value)
    (tmp_path / "speed.json").write_text('{"date": "x", "machine": "y", "threads": 1, "repeats": 1, '
                                         '"rows": [{"label": "GRU", "train_tokens_per_s": "fast"}]}')
    with pytest.raises(UserError, match="two speeds"):
        read_speed(tmp_path)
    row = {"label": "GRU", "train_tokens_per_s": 9.0, "decode_words_per_s": 3.0}

    def refused(speed: dict, message: str) -> None:
        (tmp_path / "speed.json").write_text(json.dumps({"date": "x", "machine": "y", "threads": 1, "repeats": 2,
                                                         **speed}))
        with pytest.raises(UserError, match=message):
            read_speed(tmp_path)

    for rounds in ([9.0], [9.0, -1.0], [9.0, 0.0], [9.0, True], "9.0, 8.0"):
        refused({"rows": [{**row, "train_tokens_per_s_rounds": rounds}]},
                r"row 'GRU': train_tokens_per_s_rounds is not 2 speeds \(its repeats\)")
    refused({"rows": [{**row, "train_tokens_per_s_rounds": [8.0, 7.0]}]},
            r"row 'GRU': train_tokens_per_s 9.0 is not the fastest of its rounds")
    refused({"rows": [{**row, "decode_words_per_s": 0}]}, "two speeds")
    refused({"rows": [{**row, "decode_words_per_s": True}]}, "two speeds")
    refused({"rows": [row, row]}, "a row is timed twice: GRU")
    refused({"repeats": True, "rows": [row]}, "repeats True: a whole number, at least 1")
    refused({"threads": 0, "rows": [row]}, "threads 0: a whole number, at least 1")


def test_a_speed_claim_in_the_study_file_is_judged_from_the_pass_in_every_table(stored, tmp_path):
    """The tables study.table writes and the HTML report both judge a timing claim from speed.json."""
    import copy
    import html
    import shutil

    from study.analysis.exports import write_exports
    from study.analysis.html_report import write_html_report
    from study.spec.loading import spec_from_dict, spec_to_dict
    from study.store.records import load_saved_records
    from study.store.study_state import read_state, write_state

    study_dir = tmp_path / stored.name
    shutil.copytree(stored, study_dir)
    tree = copy.deepcopy(read_state(study_dir)["request"])
    tree["claims"] = [{"name": "cg-slower", "says": "a context gate slows training", "claim": "direction",
                       "metric": "train_tokens_per_s", "row": "GRU + CG (both)", "against": "GRU",
                       "paper": {"value": -100.0, "reference": 1000.0, "source": "x"}}]
    spec = spec_from_dict(tree, "cg.yaml")
    write_exports(spec, load_saved_records(study_dir), None, study_dir)
    said = "cg-slower: judged from the study's timing pass (python -m study.speed"
    assert said in (study_dir / "claims.md").read_text()
    write_state(study_dir, {**read_state(study_dir), "spec": spec_to_dict(spec)})
    (study_dir / "report.html").unlink()
    write_html_report(study_dir)  # rebuilt from what is stored, as python -m study.report does
    assert html.escape(said) in (study_dir / "report.html").read_text()


def test_a_broken_pass_stops_the_table_rebuild_with_one_line(stored, tmp_path, capsys):
    import shutil

    from study.table import main as table_main

    copy = tmp_path / "results" / stored.name
    shutil.copytree(stored, copy)
    (copy / "speed.json").write_text("{not json")
    assert run_main(table_main, [stored.name, "--results", str(copy.parent)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "speed.json" in err[0] and "python -m study.speed" in err[0]


class EndsTheProcessWhenLoaded:
    """Unpickled in the timing pass's process, it ends that process at once, as the kernel's out-of-memory
    killer would."""

    def __reduce__(self):
        return os._exit, (9,)


def test_a_timing_process_that_dies_is_one_line_not_a_hang():
    from study.execution.row_timing import measure_as_trials_run

    with pytest.raises(UserError, match=r"the timing pass's process ended without a result \(killed, out of memory"):
        measure_as_trials_run({"GRU": EndsTheProcessWhenLoaded()}, 1, 1, 1, 1, "native")
