"""The analysis tools: their quantities against hand computations (eq. (10) rebuilds
the ATR state, Pearson's r, length buckets), the recorded gates against the
paper's gate equations, and every command end to end on tiny trained runs,
including its bad-input paths.

Modules covered here: ``nmt.analysis.atr_gates``, ``nmt.analysis.common``, ``nmt.analysis.context_gates``,
``nmt.analysis.fsmn_filters`` and ``nmt.analysis.length_buckets``."""

from __future__ import annotations

import json
import statistics

import pytest
import torch

from nmt.analysis import atr_gates, context_gates, fsmn_filters, length_buckets
from nmt.analysis.common import evaluation_text, load_run, teacher_forced_batches
from nmt.measures import pearson
from nmt.cells.atr import ATRCell
from nmt.cli import run_main
from nmt.trainer import Trainer


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_config, tiny_data):
    """Four tiny trained runs: ATR (2 decoder layers), ATR on the conditional decoder, FSMN, GRU with a
    context gate (both)."""
    root = tmp_path_factory.mktemp("analysis-runs")
    made = {}
    for name, overrides in {
        "atr": ["model.cell=atr", "model.dec_layers=2"],
        "atr-conditional": ["model.cell=atr", "model.decoder_style=conditional"],
        "fsmn": ["model.cell=fsmn", "model.enc_layers=2", "model.memory=vector", "model.order=4"],
        "cg": ["model.cell=gru", "model.decoder_style=bahdanau", "model.context_gate=both"],
    }.items():
        Trainer(tiny_config(*overrides), root / name, log=lambda _: None, data=tiny_data).fit()
        made[name] = root / name
    return made


@pytest.fixture(scope="module")
def tiny_config(cache_dir):  # module scope for the runs fixture
    from conftest import TINY

    from nmt.config import load_config

    return lambda *overrides: load_config(None, TINY + [f"data.cache_dir={cache_dir}", *overrides])


def test_pearson_matches_statistics_module():
    x, y = [1.0, 2.0, 4.0, 3.5, 0.5], [2.0, 1.0, -3.0, 0.0, 2.5]
    assert pearson(x, y) == pytest.approx(statistics.correlation(x, y), abs=1e-12)
    assert pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) != pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])  # nan: no variance


def test_eq10_weights_rebuild_the_atr_state_exactly():
    """h_t = Σ_k g_k ⊙ W_x x_k + (Π f) ⊙ h_0 with g_k = i_k ⊙ Π_{l=k+1..t} f_l (paper eq. 10)."""
    torch.manual_seed(0)
    cell = ATRCell(5, 4).double()
    x = torch.randn(1, 7, 5, dtype=torch.double)
    h0 = torch.randn(1, 4, dtype=torch.double)
    cell.trace = []
    out, _ = cell(x, torch.ones(1, 7, dtype=torch.bool), [(h0,)])
    i = torch.cat([i for i, _, _ in cell.trace])
    f = torch.cat([f for _, f, _ in cell.trace])
    # the recorded gates are the paper's eq. (7)-(8): i = σ(q + p), f = σ(q - p) with p from the previous state
    q = cell.project(x)[0]
    previous = torch.cat([h0, out[0, :-1]])
    p = previous @ cell.recurrent_weight[0].T + cell.recurrent_bias[0]
    torch.testing.assert_close(i, torch.sigmoid(q + p))
    torch.testing.assert_close(f, torch.sigmoid(q - p))
    g = atr_gates.dependency_vectors(i, f)
    future = torch.ones(7, 7, dtype=torch.bool).triu(diagonal=1)
    assert torch.all(g[future] == 0)  # no weight on future inputs
    for t in range(7):
        rebuilt = (g[t, : t + 1] * q[: t + 1]).sum(dim=0) + f[: t + 1].prod(dim=0) * h0[0]
        torch.testing.assert_close(rebuilt, out[0, t])


@pytest.mark.slow
def test_atr_gates_command(runs, tmp_path, capsys):
    out = tmp_path / "atr"
    assert atr_gates.main(["--checkpoint", str(runs["atr"]), "--out", str(out), "--layer", "2", "--sentence", "3"]) == 0
    summary = json.loads((out / "atr_gates.json").read_text())
    assert summary["layer"] == 2 and summary["sentences"] == 20
    for kind in ("elements", "token_means", "position_means"):
        assert -1.0 <= summary[f"pearson_r_{kind}"] <= 1.0
    assert 0.0 < summary["mean_input_gate"] < 1.0 and 0.0 < summary["mean_forget_gate"] < 1.0
    positions = summary["positions"]
    assert positions[0]["position"] == 1 and positions[0]["sentences"] == 20
    example = summary["example"]
    assert example["tokens"][0] == "<s>" and len(example["dependencies"]) == len(example["tokens"]) - 1
    for name in ("atr_gates_positions.png", "atr_dependencies.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
        assert (out / name).with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"
    assert "Pearson r(input gate, forget gate)" in capsys.readouterr().out
    run = load_run(runs["atr"])
    assert all(cell.trace is None for cell in run.model.decoder.cells)  # recording leaves no trace behind


@pytest.mark.slow
def test_atr_gates_command_on_a_conditional_decoder(runs, tmp_path, capsys):
    out = tmp_path / "atr-conditional"
    assert atr_gates.main(["--checkpoint", str(runs["atr-conditional"]), "--out", str(out), "--sentence", "1"]) == 0
    summary = json.loads((out / "atr_gates.json").read_text())
    assert summary["cell"].startswith("lower")
    assert -1.0 <= summary["pearson_r_elements_higher_cell"] <= 1.0
    assert summary["pearson_r_elements_higher_cell"] != summary["pearson_r_elements"]
    assert "its higher cell's r" in capsys.readouterr().out
    run = load_run(runs["atr-conditional"])
    assert run.model.decoder.higher_cells["0"].trace is None and run.model.decoder.cells[0].trace is None


@pytest.mark.slow
def test_atr_gates_counts_every_real_position_once(runs):
    run = load_run(runs["atr"])
    pairs = evaluation_text(run.cfg, None, None, 6)
    gates = atr_gates.record_gates(run, run.model.decoder.cells[0], pairs, "decoder")
    for (i, f), (_, reference) in zip(gates, pairs):
        assert i.shape == f.shape == (len(run.tgt_vocab.encode(reference)) + 1, 16)  # BOS + target
    encoder = atr_gates.record_gates(run, run.model.encoder.cells[0], pairs, "encoder")
    for (i, _), (source, _) in zip(encoder, pairs):
        assert i.shape == (len(run.src_vocab.encode(source)) + 1, 8)  # source + EOS, one direction of 8


@pytest.mark.slow
def test_fsmn_filters_command_reports_the_learned_taps(runs, tmp_path):
    out = tmp_path / "fsmn"
    assert fsmn_filters.main(["--checkpoint", str(runs["fsmn"]), "--out", str(out), "--all-layers"]) == 0
    summary = json.loads((out / "fsmn_filters.json").read_text())
    run = load_run(runs["fsmn"])
    block = run.model.encoder.networks[1]["layers"][1].memory
    reverse = summary["filters"]["FSMNEnc-R layer 2"]
    assert reverse["kind"] == "vector" and len(reverse["taps"]) == 5
    assert reverse["taps"] == pytest.approx(block.taps.detach().double().mean(dim=1).tolist())
    assert set(summary["filters"]) == {"FSMNEnc layer 1", "FSMNEnc layer 2", "FSMNEnc-R layer 1",
                                       "FSMNEnc-R layer 2", "FSMNDec layer 1"}
    assert (out / "fsmn_filters.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "fsmn_filters.pdf").read_bytes()[:5] == b"%PDF-"


def test_fsmn_filters_name_a_middle_block_by_the_hidden_layer_it_reads():
    """memory_layers: middle puts the paper's blocks on hidden layers 2 and 3 of 4; the layer holding
    each block is the one above, so the names must count hidden layers, as the paper does."""
    from types import SimpleNamespace

    from nmt.config import load_config
    from nmt.model import Seq2Seq

    cfg = load_config(None, ["model.cell=fsmn", "model.enc_layers=4", "model.fsmn.memory_layers=middle",
                             "model.hidden=8", "model.emb=6"])
    run = SimpleNamespace(cfg=cfg, model=Seq2Seq(cfg.model, 20, 20), directory="memory")
    blocks = fsmn_filters.memory_blocks(run, all_layers=True)
    assert set(blocks) == {"FSMNEnc layer 2", "FSMNEnc layer 3", "FSMNEnc-R layer 2", "FSMNEnc-R layer 3",
                           "FSMNDec layer 1"}
    assert torch.equal(blocks["FSMNEnc layer 2"], run.model.encoder.networks[0]["layers"][2].memory.taps.double())


@pytest.mark.slow
def test_context_gates_command(runs, tmp_path):
    out = tmp_path / "cg"
    assert context_gates.main(["--checkpoint", str(runs["cg"]), "--out", str(out), "--beam", "1",
                               "--split-length", "8"]) == 0
    summary = json.loads((out / "context_gates.json").read_text())
    assert summary["strategy"] == "both" and summary["sentences"] == 20
    assert 0.0 < summary["mean_gate"] < 1.0
    groups = summary["correlation"]
    assert groups["all"]["sentences"] == groups["<= 8 words"]["sentences"] + groups["> 8 words"]["sentences"] == 20
    assert (out / "context_gate_vs_bleu.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "context_gate_vs_bleu.pdf").read_bytes()[:5] == b"%PDF-"


@pytest.mark.slow
def test_context_gate_means_follow_the_recorded_gates(runs):
    run = load_run(runs["cg"])
    gate = context_gates.context_gate(run)
    pairs = evaluation_text(run.cfg, None, None, 4)
    means = context_gates.sentence_gate_means(run, gate, pairs)
    for (source, target), mean in zip(pairs, means):  # one sentence alone: the mean over its steps and elements
        gate.trace = []
        batch = next(iter(teacher_forced_batches(run, [(source, target)])))
        with torch.no_grad():
            run.model(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask)
        expected = torch.stack(gate.trace, dim=1).double().mean().item()
        gate.trace = None
        assert mean == pytest.approx(expected, rel=1e-6)


def test_length_buckets_by_hand(tmp_path):
    sources = ["a b", "a b c d e", "a b c d e f g h", "a"]
    references = ["x y", "x y z w v", "x y z w v u t s", "x"]
    hyps = ["x y", "x y z", "x y z w v u t s", "q"]
    summary = length_buckets.analyse(sources, references, {"sys": [hyps]}, [3, 6])
    names = [b["bucket"] for b in summary["buckets"]]
    assert names == ["< 3", "3-5", ">= 6"]
    assert [b["sentences"] for b in summary["buckets"]] == [2, 1, 1]
    short, middle, long = (b["systems"]["sys"] for b in summary["buckets"])
    assert short["length_ratio"] == 1.0 and middle["length_ratio"] == pytest.approx(3 / 5)
    assert long["bleu"] == pytest.approx(100.0) and long["length_ratio"] == 1.0
    # two runs under one label are pooled: the middle bucket holds both runs' sentences
    pooled = length_buckets.analyse(sources, references, {"sys": [hyps, references]}, [3, 6])
    assert pooled["buckets"][1]["systems"]["sys"]["length_ratio"] == pytest.approx((3 + 5) / (5 + 5))
    assert pooled["overall"]["sys"]["runs"] == 2


def test_length_buckets_command(tmp_path, capsys):
    (tmp_path / "src").write_text("a b\na b c d e\na b c d e f g h\n")
    (tmp_path / "ref").write_text("x y\nx y z w v\nx y z w v u t s\n")
    (tmp_path / "hyp").write_text("x y\nx y z\nx y z w v u t s\n")
    out = tmp_path / "out"
    code = length_buckets.main(["--source", str(tmp_path / "src"), "--reference", str(tmp_path / "ref"),
                                "--hyp", f"A=B={tmp_path / 'hyp'}", "--hyp", f"ref={tmp_path / 'ref'}",
                                "--edges", "3", "6", "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "length_buckets.json").read_text())
    assert set(summary["overall"]) == {"A=B", "ref"} and summary["overall"]["ref"]["bleu"] == pytest.approx(100.0)
    assert (out / "length_buckets.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "length_buckets.pdf").read_bytes()[:5] == b"%PDF-"
    assert "3-5" in capsys.readouterr().out


def bad(main, argv, capsys, *expected):
    code = run_main(main, argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), err
    for text in expected:
        assert text in err, err


def test_atr_gates_unrolls_eq_10_through_both_cells_of_a_conditional_decoder():
    """decoder_style: conditional has two ATR cells per step: s_t = i ⊙ W y_t + f ⊙ h_{t-1} and
    h_t = i' ⊙ W' c_t + f' ⊙ s_t. The chained gates give each word's weight exactly: h_t is the
    words' sum with g = dependency_vectors(i ⊙ f', f ⊙ f'), plus the contexts' sum with
    dependency_vectors(i', f ⊙ f'), plus the start state carried by Π (f ⊙ f')."""
    from types import SimpleNamespace

    from nmt.config import load_config
    from nmt.model import Seq2Seq

    torch.manual_seed(0)
    cfg = load_config(None, ["model.cell=atr", "model.decoder_style=conditional", "model.hidden=8", "model.emb=6"])
    model = Seq2Seq(cfg.model, 20, 20).double().eval()
    run = SimpleNamespace(cfg=cfg, model=model, directory="conditional")
    lower, higher = atr_gates.atr_layer(run, "decoder", 1)
    assert lower is model.decoder.cells[0] and higher is model.decoder.higher_cells["0"]
    assert atr_gates.atr_layer(run, "encoder", 1) == (model.encoder.cells[0], None)
    decoder = model.decoder
    src = torch.tensor([[5, 6, 7, 8, 2]])
    memory = model.encode(src, torch.ones_like(src, dtype=torch.bool))
    y = model.embed_target(torch.tensor([[1, 9, 10, 11, 12, 13]]))
    state = decoder.init_state(memory)
    h0 = state["0.0"][0]
    words, contexts, states = [], [], []
    lower.trace, higher.trace = [], []
    with torch.no_grad():
        for t in range(6):
            s, _ = lower.step(lower.project(y[:, t]), (state["0.0"],))
            context, _ = decoder.attend("0", s, memory)
            words.append(lower.project(y[:, t])[0])
            contexts.append(higher.project(context)[0])
            _, state = decoder.step(memory, y[:, t], state)
            states.append(state["0.0"][0])
    i, f = (torch.cat([gate for gate, _, _ in lower.trace[1::2]]), torch.cat([gate for _, gate, _ in lower.trace[1::2]]))
    i_h, f_h = (torch.cat([gate for gate, _, _ in higher.trace]), torch.cat([gate for _, gate, _ in higher.trace]))
    lower.trace = higher.trace = None
    word_weights = atr_gates.dependency_vectors(*atr_gates.chained_gates((i, f), (i_h, f_h)))
    context_weights = atr_gates.dependency_vectors(i_h, f * f_h)
    for t in range(6):
        rebuilt = (word_weights[t, : t + 1] * torch.stack(words[: t + 1])).sum(dim=0) + \
            (context_weights[t, : t + 1] * torch.stack(contexts[: t + 1])).sum(dim=0) + \
            (f[: t + 1] * f_h[: t + 1]).prod(dim=0) * h0
        torch.testing.assert_close(rebuilt, states[t])


@pytest.mark.slow
def test_analysis_bad_input_is_one_line_and_writes_nothing(runs, tmp_path, capsys):
    out = tmp_path / "never"
    bad(atr_gates.main, ["--checkpoint", str(runs["fsmn"]), "--out", str(out)], capsys, "model.cell is fsmn", "atr")
    bad(atr_gates.main, ["--checkpoint", str(runs["atr"]), "--out", str(out), "--layer", "3"], capsys, "--layer 3", "1..2")
    bad(atr_gates.main, ["--checkpoint", str(runs["atr"]), "--out", str(out), "--sentence", "99"], capsys, "--sentence 99")
    bad(atr_gates.main, ["--checkpoint", str(runs["atr"]), "--out", str(out), "--limit", "0"], capsys, "--limit 0")
    bad(atr_gates.main, ["--checkpoint", str(runs["atr"]), "--out", str(out), "--source", "x"], capsys, "--reference")
    bad(atr_gates.main, ["--checkpoint", str(tmp_path / "missing"), "--out", str(out)], capsys, "not found")
    bad(fsmn_filters.main, ["--checkpoint", str(runs["atr"]), "--out", str(out)], capsys, "model.cell is atr")
    bad(context_gates.main, ["--checkpoint", str(runs["atr"]), "--out", str(out)], capsys, "no context gate")
    bad(context_gates.main, ["--checkpoint", str(runs["cg"]), "--out", str(out), "--beam", "0"], capsys, "--beam 0")
    (tmp_path / "two").write_text("a\nb\n")
    (tmp_path / "one").write_text("a\n")
    lines = ["--source", str(tmp_path / "two"), "--reference", str(tmp_path / "two"), "--out", str(out)]
    bad(length_buckets.main, [*lines, "--hyp", str(tmp_path / "two")], capsys, "LABEL=FILE")
    bad(length_buckets.main, [*lines, "--hyp", f"a={tmp_path / 'one'}"], capsys, "1 lines", "line-aligned")
    bad(length_buckets.main, [*lines, "--hyp", f"a={tmp_path / 'nope'}"], capsys, "nope")
    bad(length_buckets.main, [*lines, "--hyp", f"a={tmp_path / 'two'}", "--edges", "5", "3"], capsys, "increasing")
    assert not out.exists()
