"""study.additivity: each combined ablation's drop against the sum of its single ablations' drops,
with the seed interval and the paired bootstrap of that contrast. Runs on the committed 64-unit
ablation study (8 rows, 2 seeds each; no training) and on copies of its records with trials taken
away, as a half-finished study has them."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from study.analysis.additivity import ablation_additivity, removed_components
from study.analysis.significance import contrast_bootstrap_stats, contrast_seed_interval, sentence_stats
from study.analysis.stored_study import load_stored_study
from study.analysis.tables import build_table
from study.table import main as table_main

REFERENCE = Path(__file__).resolve().parents[3] / "results" / "reference"
SINGLES = {"- LN & MA": ["- LayerNorm", "- Multi Attention"], "- LN & highway": ["- LayerNorm", "- Highway"],
           "- MA & highway": ["- Multi Attention", "- Highway"],
           "- LN, MA & highway": ["- LayerNorm", "- Multi Attention", "- Highway"]}


@pytest.fixture(scope="module")
def study():
    return load_stored_study(REFERENCE / "ablation_srnmt")


def additivity_of(study, records):
    layout = study.layout
    table = build_table(records, layout.title, layout.reference, study.references, layout.row_order,
                        layout.planned_seeds)
    return ablation_additivity(study.spec, table, records, study.references)


@pytest.fixture(scope="module")
def additivity(study):
    return additivity_of(study, study.records)


def test_each_combined_ablation_is_measured_against_the_sum_of_its_single_ones(study, additivity):
    own = pd.read_csv(REFERENCE / "ablation_srnmt" / "table.csv").set_index("label")
    rows = additivity.rows.set_index("label")
    assert list(rows.index) == list(SINGLES)
    for label, singles in SINGLES.items():
        assert rows.loc[label, "singles"] == singles
        assert rows.loc[label, "delta"] == pytest.approx(own.loc[label, "delta"])
        assert rows.loc[label, "singles_delta_sum"] == pytest.approx(sum(own.loc[s, "delta"] for s in singles))
        expected = (own.loc[label, "bleu_mean"] - sum(own.loc[s, "bleu_mean"] for s in singles)
                    + (len(singles) - 1) * own.loc["SR-NMT 4L", "bleu_mean"])
        assert rows.loc[label, "departure"] == pytest.approx(expected)
        assert rows.loc[label, "bootstrap_seeds"] == 2 and rows.loc[label, "status"] == "ok"
        assert rows.loc[label, "seeds_ci_low"] < rows.loc[label, "departure"] < rows.loc[label, "seeds_ci_high"]
        assert rows.loc[label, "ci_low"] < rows.loc[label, "bootstrap_departure"] < rows.loc[label, "ci_high"]
    # every row of this 5-epoch study was still improving: each departure says so
    assert rows["still_improving"].all()
    assert "+2.72 †" in additivity.markdown() and "Not a converged result" in additivity.markdown()


def test_the_seed_interval_is_the_welch_interval_of_the_four_row_contrast(study, additivity):
    own = pd.read_csv(REFERENCE / "ablation_srnmt" / "table.csv").set_index("label")
    terms = [(1.0, "- LN & MA"), (-1.0, "- LayerNorm"), (-1.0, "- Multi Attention"), (1.0, "SR-NMT 4L")]
    variances = [own.loc[label, "bleu_std"] ** 2 / 2 for _, label in terms]
    df = sum(variances) ** 2 / sum(v ** 2 for v in variances)  # 2 seeds a row: 1 degree of freedom each
    assert 1 <= df < 2  # fractional, as in scipy and R: the t quantile of exactly this df
    half = stats.t.ppf(0.975, df) * math.sqrt(sum(variances))
    row = additivity.rows.set_index("label").loc["- LN & MA"]
    assert (row["seeds_ci_low"], row["seeds_ci_high"]) == pytest.approx((row["departure"] - half,
                                                                         row["departure"] + half))


def test_the_bootstrap_resamples_the_same_sentences_for_every_row(study, additivity):
    by_seed = {(r["label"], r["seed"]): r["hyp_path"] for r in study.records}
    weights = {"- MA & highway": 1.0, "- Multi Attention": -1.0, "- Highway": -1.0, "SR-NMT 4L": 1.0}

    def pooled(label):
        lines = [line for seed in (1, 2) for line in Path(by_seed[label, seed]).read_text(encoding="utf-8").splitlines()]
        return sentence_stats(lines, study.references * 2)

    test = contrast_bootstrap_stats([pooled(label) for label in weights], list(weights.values()))
    row = additivity.rows.set_index("label").loc["- MA & highway"]
    assert (row["bootstrap_departure"], row["ci_low"], row["ci_high"], row["p_value"]) == pytest.approx(
        (test.delta, test.ci_low, test.ci_high, test.p_value))
    # on this test set the two drops overlap: together they cost 2.7 BLEU less than their sum
    assert row["ci_low"] > 0 and row["p_value"] < 0.01


def test_seeds_drawn_together_resample_test_sentences_with_every_seed_s_translation(study):
    """contrast_test(seeds_together=True) resamples the test sentences, each with the sum of its seeds'
    statistics: the same contrast on the whole test set as the tables' concatenation (BLEU's
    statistics add up), other resamples, and, with one seed a row, exactly the tables' test."""
    from study.analysis.additivity import contrast_test, departure_contrasts

    by_seed = {(r["label"], r["seed"]): r["hyp_path"] for r in study.records}
    singles, weights = departure_contrasts(study.spec, "SR-NMT 4L")["- MA & highway"]
    assert singles == ["- Multi Attention", "- Highway"]
    assert weights == {"- MA & highway": 1.0, "- Multi Attention": -1.0, "- Highway": -1.0, "SR-NMT 4L": 1.0}

    def summed(label):
        return sum(sentence_stats(Path(by_seed[label, seed]).read_text(encoding="utf-8").splitlines(),
                                  study.references) for seed in (1, 2))

    seeds, together = contrast_test(weights, study.records, study.references, {}, seeds_together=True)
    expected = contrast_bootstrap_stats([summed(label) for label in weights], list(weights.values()))
    assert seeds == 2
    assert (together.delta, together.ci_low, together.ci_high) == pytest.approx(
        (expected.delta, expected.ci_low, expected.ci_high))
    _, pooled = contrast_test(weights, study.records, study.references, {})
    assert together.delta == pytest.approx(pooled.delta, abs=1e-9)
    assert (together.ci_low, together.ci_high) != pytest.approx((pooled.ci_low, pooled.ci_high))
    first_seed = [r for r in study.records if r["seed"] == 1]
    one = contrast_test(weights, first_seed, study.references, {}, seeds_together=True)
    assert one == contrast_test(weights, first_seed, study.references, {})


def test_three_components_weigh_the_full_model_twice(study, additivity):
    from sacrebleu import corpus_bleu

    by_seed = {(r["label"], r["seed"]): r["hyp_path"] for r in study.records}

    def pooled_bleu(label):
        lines = [line for seed in (1, 2) for line in Path(by_seed[label, seed]).read_text(encoding="utf-8").splitlines()]
        return corpus_bleu(lines, [study.references * 2]).score

    expected = (pooled_bleu("- LN, MA & highway") - pooled_bleu("- LayerNorm") - pooled_bleu("- Multi Attention")
                - pooled_bleu("- Highway") + 2 * pooled_bleu("SR-NMT 4L"))
    row = additivity.rows.set_index("label").loc["- LN, MA & highway"]
    assert row["bootstrap_departure"] == pytest.approx(expected, abs=1e-4)
    assert row["components"] == 3


def test_a_half_finished_study_says_which_rows_it_waits_for(study):
    # - LN & MA not started, - Highway with one seed of two
    records = [r for r in study.records if r["label"] != "- LN & MA" and (r["label"], r["seed"]) != ("- Highway", 2)]
    rows = additivity_of(study, records).rows.set_index("label")
    assert math.isnan(rows.loc["- LN & MA", "departure"]) and math.isnan(rows.loc["- LN & MA", "ci_low"])
    assert rows.loc["- LN & MA", "status"] == "- LN & MA: not started"
    # one seed of - Highway: no spread to measure, so no seed interval; the bootstrap runs on seed 1
    highway = rows.loc["- MA & highway"]
    assert highway["status"] == "- Highway: 1 ok, 1 not started"
    assert math.isnan(highway["seeds_ci_low"]) and highway["bootstrap_seeds"] == 1
    assert highway["ci_low"] < highway["bootstrap_departure"] < highway["ci_high"]
    # rows that need neither are measured as in the whole study
    whole = additivity_of(study, study.records).rows.set_index("label")
    assert rows.loc["- LN, MA & highway", "status"] == "- Highway: 1 ok, 1 not started"
    assert rows.loc["- LN & highway", "departure"] != whole.loc["- LN & highway", "departure"]  # a seed fewer
    shown = additivity_of(study, records).frame().set_index("Model")
    assert list(shown.loc["- LN & MA", ["departure", "CI (seeds)", "CI (bootstrap)", "p"]]) == ["-", "-", "-", "-"]


def test_a_row_that_diverged_is_named_with_its_status(study):
    # the SR-NMT paper's - LN & highway "failed to converge"; here its seeds are marked diverged
    records = [{**r, "status": "diverged"} if r["label"] == "- LN & highway" else r for r in study.records]
    additivity = additivity_of(study, records)
    row = additivity.rows.set_index("label").loc["- LN & highway"]
    assert math.isnan(row["departure"]) and row["status"] == "- LN & highway: diverged"
    improving = next(note for note in additivity.notes() if note.startswith("†"))
    assert "- LN & MA" in improving and "- LN & highway" not in improving  # no † for a row with no departure


def test_a_translation_of_another_length_is_named_where_the_bootstrap_is_blank(study, tmp_path):
    victim = next(r for r in study.records if r["label"] == "- Highway" and r["seed"] == 2)
    short = tmp_path / "test.hyp"
    short.write_text("\n".join(Path(victim["hyp_path"]).read_text(encoding="utf-8").splitlines()[:-3]) + "\n")
    records = [{**r, "hyp_path": str(short)} if r is victim else r for r in study.records]
    rows = additivity_of(study, records).rows.set_index("label")
    uses_highway = [label for label, singles in SINGLES.items() if "- Highway" in singles]
    assert rows.loc[uses_highway, "p_value"].isna().all() and rows.loc["- LN & MA", "p_value"] > 0
    assert any("- Highway seed 2 has 997 lines" in note for note in additivity_of(study, records).notes())
    assert not any("lines" in note for note in additivity_of(study, study.records).notes())


def test_without_the_test_references_only_the_seed_interval_is_given(study):
    layout = study.layout
    table = build_table(study.records, layout.title, layout.reference, None, layout.row_order, layout.planned_seeds)
    rows = ablation_additivity(study.spec, table, study.records, None).rows
    assert rows["seeds_ci_low"].notna().all() and rows["ci_low"].isna().all() and rows["p_value"].isna().all()
    assert (rows["bootstrap_seeds"] == 0).all()


def test_only_ablation_studies_of_two_or_more_components_get_one():
    depth = load_stored_study(REFERENCE / "depth_srnmt")
    assert ablation_additivity(depth.spec, depth.table(), depth.records, depth.references) is None


def test_rows_know_the_components_they_remove(study):
    removed = removed_components(study.spec)
    assert removed["SR-NMT 4L"] == ()
    assert removed["- LN, MA & highway"] == tuple(study.spec.fields.ablate)
    assert removed["- MA & highway"] == tuple(study.spec.fields.ablate[1:])


def test_study_table_writes_and_prints_it(tmp_path, capsys):
    copy = tmp_path / "results" / "ablation_srnmt"
    shutil.copytree(REFERENCE / "ablation_srnmt", copy, ignore=shutil.ignore_patterns("*.png", "*.pdf", "additivity.*"))
    assert table_main(["ablation_srnmt", "--results", str(tmp_path / "results")]) == 0
    printed = capsys.readouterr().out
    assert "**Are the drops additive? SR-NMT 4L ablation" in printed
    assert printed.index("| - LN, MA & highway |  15.80 |") < printed.index("| - LN & MA          | - LayerNorm, -")
    for name in ("additivity.md", "additivity.csv", "additivity.tex"):
        assert (copy / name).is_file() and str((copy / name).resolve()) in printed
    assert "Are the drops additive?" in (copy / "report.html").read_text(encoding="utf-8")
    csv = pd.read_csv(copy / "additivity.csv")
    assert list(csv["singles"])[-1] == "- LayerNorm | - Multi Attention | - Highway"


def test_contrast_seed_interval_is_welch_satterthwaite():
    # two rows: variances 4/3 and 9/2, df = (4/3 + 9/2)^2 / ((4/3)^2 / 2 + (9/2)^2 / 1) = 1.61, not rounded
    low, high = contrast_seed_interval([(1.0, 22.0, 2.0, 3), (-1.0, 10.0, 3.0, 2)])
    df = (4 / 3 + 9 / 2) ** 2 / ((4 / 3) ** 2 / 2 + (9 / 2) ** 2 / 1)
    half = stats.t.ppf(0.975, df) * math.sqrt(4 / 3 + 9 / 2)
    assert (low, high) == pytest.approx((12.0 - half, 12.0 + half))
    # three rows of equal variance and 2 seeds: df 3
    low, high = contrast_seed_interval([(1.0, 5.0, 0.1, 2), (-1.0, 4.0, 0.1, 2), (-1.0, 3.0, 0.1, 2)])
    assert high - (-2.0) == pytest.approx(stats.t.ppf(0.975, 3) * math.sqrt(3 * 0.01 / 2))
    assert all(math.isnan(v) for v in contrast_seed_interval([(1.0, 22.0, 2.0, 3), (2.0, 10.0, 1.0, 1)]))
    # a weight counts twice over in the variance: 2 * a row of std 1 over 4 seeds has variance 4 / 4
    low, high = contrast_seed_interval([(2.0, 5.0, 1.0, 4), (-1.0, 1.0, 0.0, 3)])
    assert (low + high) / 2 == pytest.approx(9.0) and high - 9.0 == pytest.approx(stats.t.ppf(0.975, 3) * 1.0)


def test_contrast_bootstrap_draws_the_same_sentences_for_every_system():
    """Against a plain loop: sacreBLEU's resample indices, each resample's corpus BLEU by sacrebleu.corpus_bleu."""
    from sacrebleu import corpus_bleu

    from study.analysis.significance import SEED

    rng = np.random.default_rng(1)
    references = [" ".join(rng.choice(list("abcdefghij"), size=9)) for _ in range(40)]
    systems = [[" ".join(w for w in ref.split() if rng.random() > drop) for ref in references] for drop in (0.1, 0.3, 0.5)]
    weights = [1.0, -2.0, 1.0]
    samples = 40
    indices = np.random.default_rng(SEED).choice(len(references), size=(samples, len(references)), replace=True)
    contrasts = [sum(w * corpus_bleu([hyps[i] for i in draw], [[references[i] for i in draw]]).score
                     for w, hyps in zip(weights, systems)) for draw in indices]
    test = contrast_bootstrap_stats([sentence_stats(hyps, references) for hyps in systems], weights, samples=samples)
    assert (test.ci_low, test.ci_high) == pytest.approx(tuple(np.percentile(contrasts, [2.5, 97.5])), abs=1e-3)
    observed = sum(w * corpus_bleu(hyps, [references]).score for w, hyps in zip(weights, systems))
    assert test.delta == pytest.approx(observed, abs=1e-4)


def test_contrast_bootstrap_of_two_systems_is_sacrebleus_paired_bootstrap():
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    rng = np.random.default_rng(0)
    references = [" ".join(rng.choice(list("abcdefgh"), size=8)) for _ in range(60)]
    system = [" ".join(w for w in ref.split() if rng.random() > 0.2) for ref in references]
    baseline = [" ".join(w for w in ref.split() if rng.random() > 0.22) for ref in references]
    a, b = sentence_stats(system, references), sentence_stats(baseline, references)
    ours = contrast_bootstrap_stats([a, b], [1.0, -1.0], samples=200)
    _, scores = PairedTest([("baseline", baseline), ("system", system)], {"BLEU": BLEU(references=[references])},
                           references=None, test_type="bs", n_samples=200)()
    assert 0.05 < ours.p_value < 0.5  # close enough that the p-value depends on every resample
    assert ours.p_value == pytest.approx(scores["BLEU"][1].p_value)
    assert ours.delta == pytest.approx(scores["BLEU"][1].score - scores["BLEU"][0].score, abs=1e-4)
    # systems that cancel on every resample are not called different
    same = contrast_bootstrap_stats([a, a], [1.0, -1.0], samples=200)
    assert same.p_value == 1.0 and same.delta == 0.0
    with pytest.raises(ValueError, match="same sentences"):
        contrast_bootstrap_stats([a, b[:-1]], [1.0, -1.0])


def test_a_lost_translation_leaves_the_bootstrap_blank_and_is_named_not_skipped(study):
    victim = next(r for r in study.records if r["label"] == "- Highway" and r["seed"] == 2)
    records = [{**r, "hyp_path": None, "artifacts": []} if r is victim else r for r in study.records]
    rows = additivity_of(study, records).rows.set_index("label")
    uses_highway = [label for label, singles in SINGLES.items() if "- Highway" in singles]
    assert rows.loc[uses_highway, "p_value"].isna().all() and rows.loc["- LN & MA", "p_value"] > 0
    assert any("- Highway seed 2 has none (its file is missing)" in note for note in additivity_of(study, records).notes())
    layout = study.layout
    table = build_table(records, layout.title, layout.reference, study.references, layout.row_order, layout.planned_seeds)
    assert math.isnan(table.rows.set_index("label").loc["- Highway", "p_value"])  # not a 1-seed interval
