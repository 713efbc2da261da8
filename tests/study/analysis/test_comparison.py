"""python -m study.compare: one table over several studies' stored results, with the significance
columns of a study's own table. Runs on copies of two committed reference studies (no training)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from nmt.cli import run_main
from study.analysis.comparison import compare
from study.analysis.speed_columns import TRIAL_TIMINGS_NOTE
from study.analysis.stored_study import load_stored_study
from study.compare import main

REFERENCE = Path(__file__).resolve().parents[3] / "results" / "reference"
ABLATION, DEPTH = "ablation_srnmt", "depth_srnmt"
SIGNIFICANCE = ["delta", "delta_seeds_ci_low", "delta_seeds_ci_high", "delta_ci_low", "delta_ci_high", "p_value"]


def copy_study(name: str, results: Path) -> Path:
    target = results / name
    shutil.copytree(REFERENCE / name, target, ignore=shutil.ignore_patterns("*.png", "*.pdf", "analysis"))
    return target


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("compare") / "results"
    for name in (ABLATION, DEPTH):
        copy_study(name, root)
    return root


@pytest.fixture(scope="module")
def compared(results) -> Path:
    """The two studies compared by name through the command line, once for the module."""
    assert main([ABLATION, DEPTH, "--results", str(results)]) == 0
    return results / "compare" / f"{ABLATION}_vs_{DEPTH}"


def test_one_table_holds_every_row_of_both_studies_with_clashing_labels_prefixed(compared):
    table = pd.read_csv(compared / "table.csv")
    ablation = pd.read_csv(REFERENCE / ABLATION / "table.csv")
    depth = pd.read_csv(REFERENCE / DEPTH / "table.csv")
    assert len(table) == len(ablation) + len(depth)
    assert list(table["source"]) == [ABLATION] * len(ablation) + [DEPTH] * len(depth)
    # only "SR-NMT 4L" is in both studies; it is named with its source, nothing else is
    expected = [f"{ABLATION}: SR-NMT 4L" if label == "SR-NMT 4L" else label for label in ablation["label"]]
    expected += [f"{DEPTH}: SR-NMT 4L" if label == "SR-NMT 4L" else label for label in depth["label"]]
    assert list(table["label"]) == expected
    assert list(table["bleu_mean"]) == list(ablation["bleu_mean"]) + list(depth["bleu_mean"])
    markdown = (compared / "table.md").read_text(encoding="utf-8")
    assert f"| {ABLATION}: SR-NMT 4L " in markdown and f"| {DEPTH}: SR-NMT 4L " in markdown
    assert TRIAL_TIMINGS_NOTE in markdown  # the speeds are each trial's own, taken at other times
    assert "\\label{tab:compare-ablation_srnmt_vs_depth_srnmt}" in (compared / "table.tex").read_text(encoding="utf-8")
    assert (compared / "bleu.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert (compared / "bleu.pdf").read_bytes().startswith(b"%PDF")


def test_significance_against_a_row_of_the_same_study_is_that_studys_own(compared):
    """Reference = the first study's own reference row: its rows' Δ, bootstrap interval and p-value
    are exactly those of its own table; the other study's rows are tested against that row too."""
    table = pd.read_csv(compared / "table.csv")
    ablation = pd.read_csv(REFERENCE / ABLATION / "table.csv")
    ours = table[table["source"] == ABLATION].reset_index(drop=True)
    pd.testing.assert_frame_equal(ours[SIGNIFICANCE], ablation[SIGNIFICANCE])
    depth_rows = table[table["source"] == DEPTH]
    assert depth_rows["p_value"].notna().all()  # same test set: every depth row has a p-value
    assert (depth_rows["p_value_note"].isna()).all()
    reference_mean = ablation["bleu_mean"].iloc[0]
    assert list(depth_rows["delta"]) == pytest.approx(list(depth_rows["bleu_mean"] - reference_mean))


def test_a_study_on_another_test_set_gets_no_p_value_and_the_table_says_why(tmp_path):
    ablation, depth = copy_study(ABLATION, tmp_path), copy_study(DEPTH, tmp_path)
    lines = (depth / "test.ref").read_text(encoding="utf-8").splitlines()
    # as many sentences as the reference's: only the content tells the test sets apart
    (depth / "test.ref").write_text("\n".join(["another sentence"] + lines[1:]) + "\n", encoding="utf-8")
    comparison = compare([load_stored_study(depth), load_stored_study(ablation)], [DEPTH, ABLATION])
    rows = comparison.table.rows
    ablation_rows = [i for i, source in enumerate(comparison.sources) if source == ABLATION]
    assert all(math.isnan(rows["p_value"].iloc[i]) for i in ablation_rows)
    assert all(math.isnan(rows["delta_ci_low"].iloc[i]) for i in ablation_rows)
    assert all(math.isnan(rows["delta_seeds_ci_low"].iloc[i]) for i in ablation_rows)
    frame = comparison.frame()
    assert set(frame.loc[ablation_rows, "p"]) == {"n/a"}
    assert set(frame.loc[ablation_rows, "Δ CI (bootstrap)"]) == set(frame.loc[ablation_rows, "Δ CI (seeds)"]) == {"n/a"}
    markdown = comparison.markdown()
    assert (f"n/a: no paired bootstrap and no seed interval for the rows of {ABLATION}: it was tested on a different "
            "test set") in markdown
    assert "test.ref files differ" in comparison.csv()
    # the reference study's own rows are still tested (against its own reference row)
    depth_rows = [i for i, source in enumerate(comparison.sources) if source == DEPTH][1:]
    assert all(0 <= rows["p_value"].iloc[i] <= 1 for i in depth_rows)


def test_a_reference_study_without_test_references_gives_no_p_value_at_all(tmp_path):
    ablation, depth = copy_study(ABLATION, tmp_path), copy_study(DEPTH, tmp_path)
    (ablation / "test.ref").unlink()
    comparison = compare([load_stored_study(ablation), load_stored_study(depth)], [ABLATION, DEPTH])
    assert comparison.table.rows["p_value"].isna().all()
    assert set(comparison.frame()["p"]) == {"-", "n/a"}  # the reference row itself shows "-"
    assert "kept no test references" in comparison.markdown()


def test_a_reference_chosen_by_label_in_the_second_study_gives_that_studys_own_significance(results):
    studies = [load_stored_study(results / ABLATION), load_stored_study(results / DEPTH)]
    comparison = compare(studies, [ABLATION, DEPTH], reference="SR-NMT 1L", title="depth against 1 layer")
    assert comparison.table.reference == "SR-NMT 1L"  # depth_srnmt's own reference row
    assert comparison.table.title == "depth against 1 layer"
    rows = comparison.table.rows
    depth_rows = rows[[source == DEPTH for source in comparison.sources]].reset_index(drop=True)
    depth = pd.read_csv(REFERENCE / DEPTH / "table.csv")
    pd.testing.assert_frame_equal(depth_rows[SIGNIFICANCE], depth[SIGNIFICANCE])
    assert "| SR-NMT 1L " in comparison.markdown()


def test_one_study_against_another_of_its_rows_mirrors_its_own_table(results):
    """One study with --reference: the old reference row, measured against the new one, gets its own
    table's Δ, bootstrap interval and seed interval with the sign turned and the same p-value."""
    assert main([ABLATION, "--reference", "- Highway", "--results", str(results)]) == 0
    out = results / "compare" / f"{ABLATION}_against_highway"
    table = pd.read_csv(out / "table.csv").set_index("label")
    own = pd.read_csv(REFERENCE / ABLATION / "table.csv").set_index("label")
    assert list(table.index) == list(own.index)  # one source: no label is prefixed
    full, highway = table.loc["SR-NMT 4L"], own.loc["- Highway"]
    assert full["delta"] == pytest.approx(-highway["delta"])
    assert (full["delta_ci_low"], full["delta_ci_high"]) == pytest.approx((-highway["delta_ci_high"],
                                                                           -highway["delta_ci_low"]))
    assert (full["delta_seeds_ci_low"], full["delta_seeds_ci_high"]) == pytest.approx(
        (-highway["delta_seeds_ci_high"], -highway["delta_seeds_ci_low"]))
    assert full["p_value"] == pytest.approx(highway["p_value"])
    assert math.isnan(table.loc["- Highway", "p_value"])
    others = table.drop(index="- Highway")
    assert list(others["delta"]) == pytest.approx(list(others["bleu_mean"] - own.loc["- Highway", "bleu_mean"]))
    markdown = (out / "table.md").read_text(encoding="utf-8")
    assert markdown.startswith(f"**{ABLATION} against its row - Highway: test BLEU**")


def test_a_half_finished_study_counts_its_rows_trials_not_started(tmp_path):
    """As in the study's own table: n counts the trials each row will have, and the status says
    how many have not started."""
    study = copy_study(ABLATION, tmp_path)
    lines = (study / "trials.jsonl").read_text(encoding="utf-8").splitlines()
    dropped = [line for line in lines if '"label": "- Highway"' in line]
    assert len(dropped) == 2
    (study / "trials.jsonl").write_text("\n".join(line for line in lines if line not in dropped[:1]) + "\n",
                                        encoding="utf-8")
    comparison = compare([load_stored_study(study)], [ABLATION], reference="SR-NMT 4L")
    frame = comparison.frame().set_index("Model")
    assert frame.loc["- Highway", "n"] == "1/2" and "1 not started" in frame.loc["- Highway", "status"]
    assert frame.loc["- LayerNorm", "n"] == "2/2"


def error_of(capsys, *argv: str) -> str:
    """The one-line error of a bad command line (exit status 2)."""
    assert run_main(main, list(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_bad_input_is_one_line_and_a_nonzero_exit(results, tmp_path, capsys):
    root = str(results)
    assert "unknown study 'nonexistent'" in error_of(capsys, ABLATION, "nonexistent", "--results", root)
    assert "no such directory" in error_of(capsys, ABLATION, "no/such/dir", "--results", root)
    alone = error_of(capsys, ABLATION, "--results", root)
    assert "at least two studies" in alone and "one with --reference LABEL" in alone
    assert "given twice" in error_of(capsys, ABLATION, str(results / ABLATION), "--results", root)
    not_a_study = tmp_path / "plain_dir"
    not_a_study.mkdir()
    assert "no study.json" in error_of(capsys, ABLATION, str(not_a_study), "--results", root)
    no_records = tmp_path / "no_records"
    no_records.mkdir()
    shutil.copy(REFERENCE / DEPTH / "study.json", no_records / "study.json")
    assert "no trial records" in error_of(capsys, ABLATION, str(no_records), "--results", root)
    assert "several sources" in error_of(capsys, ABLATION, DEPTH, "--reference", "SR-NMT 4L", "--results", root)
    assert "no such row" in error_of(capsys, ABLATION, DEPTH, "--reference", "SR-NMT 9L", "--results", root)
    assert "not inside the results directory" in error_of(capsys, ABLATION, DEPTH, "--results", root,
                                                          "--out", str(tmp_path / "elsewhere"))
    assert "holds a study's results" in error_of(capsys, ABLATION, DEPTH, "--results", root,
                                                 "--out", str(results / DEPTH))
    assert not (tmp_path / "elsewhere").exists()


def test_help_names_every_option(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in ("--results", "--out", "--reference", "--title"):
        assert option in text
