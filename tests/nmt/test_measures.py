"""The measurements a run takes when it ends (``nmt.measures``): ATR's gate correlation in
``metrics.json`` equals what ``nmt.analysis.atr_gates`` measures on the selected model over the same
text (its own code path: whole sentences kept), every real position counted once on each decoder style
(against a hand loop, one sentence at a time), the running sums equal to Pearson's r of the whole
series, a failing measurement leaves the run's scores, and a unit without measurements records none.

Modules covered here: ``nmt.measures``."""

from __future__ import annotations

import json
import math

import pytest
import torch

from nmt.analysis import atr_gates
from nmt.analysis.common import load_run
from nmt.data.batching import make_batches
from nmt.measures import MEASURES, CoMoments, atr_decoder_gates, measured_cells, pearson, take_measures
from nmt.trainer import Trainer, run


def test_every_measurement_is_a_metric_the_study_registry_declares():
    from study.spec.metrics import METRICS

    declared = {metric.name: metric for metric in METRICS}
    for measure in MEASURES.values():
        for name in measure.names:
            assert declared[name].known == "end" and declared[name].claim is not None
    assert measured_cells("atr_gate_r") == ("atr",) and measured_cells("test_bleu") == ()


def test_pearson_stays_inside_minus_one_to_one_and_is_nan_without_spread():
    x = torch.tensor([0.48184840078170854, 0.4408004990443595], dtype=torch.float64)
    assert pearson(x, x * 1e-3 + 7) == 1.0  # computed plainly, rounding gives 1.0000000000000002
    assert pearson(x, -x) == -1.0
    assert math.isnan(pearson([0.5, 0.5, 0.5], [1.0, 2.0, 3.0])) and math.isnan(pearson([1.0], [2.0]))


def test_running_sums_give_the_r_of_the_whole_series():
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(5000, generator=generator, dtype=torch.float64) * 0.2 + 0.4
    y = 1 - x + 0.05 * torch.rand(5000, generator=generator, dtype=torch.float64)
    moments = CoMoments()
    for start, stop in ((0, 1), (1, 700), (700, 700), (700, 4999), (4999, 5000)):  # uneven chunks, an empty one
        moments.add(x[start:stop], y[start:stop])
    assert moments.n == 5000 and moments.r() == pytest.approx(pearson(x, y), abs=1e-12)
    assert math.isnan(CoMoments().r())


def test_a_finished_atr_run_records_the_gate_correlation_the_analysis_measures(tiny_config, tiny_data, tmp_path):
    cfg = tiny_config("model.cell=atr", "model.decoder_style=conditional", "train.max_epochs=2")
    trainer = Trainer(cfg, tmp_path / "atr", log=lambda _: None, data=tiny_data)
    trainer.fit()
    metrics = trainer.final_metrics()
    analysed = load_run(tmp_path / "atr")  # the selected epoch's model, as the analysis command loads it
    cell, higher = atr_gates.atr_layer(analysed, "decoder", 1)
    summary, _ = atr_gates.analyse(analysed, cell, tiny_data.valid_text, "decoder", 1, 0, higher)
    assert -1.0 <= metrics["atr_gate_r"] <= 1.0
    # the gates are float32, computed in batches of other shapes (600 vs 3000 tokens): equal to rounding
    assert metrics["atr_gate_r"] == pytest.approx(summary["pearson_r_elements"], abs=1e-6)
    assert metrics["atr_gate_r_token_means"] == pytest.approx(summary["pearson_r_token_means"], abs=1e-6)
    assert all(c.trace is None for c in trainer.model.decoder.cells)  # measuring leaves no trace switched on


@pytest.mark.parametrize("style", [[], ["model.decoder_style=conditional"], ["model.input_feeding=false"]])
def test_the_correlation_counts_every_real_target_position_once(tiny_config, tiny_data, style):
    """A hand loop: one sentence at a time (no padding at all), the first cell's gates at each target position."""
    from nmt.model import build_model

    cfg = tiny_config("model.cell=atr", *style)
    torch.manual_seed(3)
    model = build_model(cfg.model, len(tiny_data.src_vocab), len(tiny_data.tgt_vocab)).eval()
    examples = tiny_data.valid[:7]
    measured = take_measures(model, "atr", examples, 600, torch.device("cpu"))
    inputs, forgets = [], []
    cell = model.decoder.cells[0]
    for example in examples:
        (batch,) = make_batches([example], 10_000, shuffle=False)
        cell.trace = []
        with torch.no_grad():
            model(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask)
        assert len(cell.trace) == len(example[1]) + 1  # BOS and every target token
        inputs += [i.flatten() for i, _, _ in cell.trace]
        forgets += [f.flatten() for _, f, _ in cell.trace]
        cell.trace = None
    i, f = torch.cat(inputs).double(), torch.cat(forgets).double()
    expected = float(torch.corrcoef(torch.stack([i, f]))[0, 1])
    assert measured["atr_gate_r"] == pytest.approx(expected, abs=1e-6)  # float32 gates, padded vs unpadded batches


def test_a_measurement_that_fails_leaves_the_run_scored(tiny_config, tiny_data, tmp_path, monkeypatch):
    import nmt.trainer

    def broken(*_):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(nmt.trainer, "take_measures", broken)
    lines = []
    trainer = Trainer(tiny_config("model.cell=atr"), tmp_path / "atr", log=lines.append, data=tiny_data)
    trainer.fit()
    metrics = trainer.final_metrics()
    assert "test_bleu" in metrics and "atr_gate_r" not in metrics
    assert any("measuring the trained model failed (RuntimeError: out of memory)" in line for line in lines)


def test_a_unit_without_measurements_records_none(tiny_config, tmp_path):
    metrics = run(tiny_config("model.cell=gru"), tmp_path / "gru", log=lambda _: None)
    stored = json.loads((tmp_path / "gru" / "metrics.json").read_text())
    assert not any(name.startswith("atr_") for name in (*metrics, *stored))

    class WithoutRecurrentDecoder:  # an FSMN's decoder has no cells to trace
        decoder = None

    assert atr_decoder_gates(WithoutRecurrentDecoder(), []) == {}
