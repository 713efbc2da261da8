"""Encoder-decoder behaviour: parallel training paths equal step-by-step decoding,
padding and batch composition change nothing, every component trains, and the
parameter count matches a hand computation."""

from __future__ import annotations

import itertools

import pytest
import torch

from nmt.config import load_config
from nmt.model import Seq2Seq
from nmt.search import beam_search, greedy_decode

V = 23
MODELS = {
    "lstm": ["model.cell=lstm"],
    "lstm-peephole-3L-multi-highway": ["model.cell=lstm", "model.peephole=true", "model.enc_layers=2",
                                       "model.dec_layers=3", "model.multi_attention=true",
                                       "model.layer_connection=highway"],
    "lstm-no-feeding-residual": ["model.cell=lstm", "model.input_feeding=false", "model.dec_layers=2",
                                 "model.enc_layers=2", "model.layer_connection=residual", "model.dir_size=full"],
    "gru-general-ln": ["model.cell=gru", "model.attention=general", "model.layer_norm=true", "model.tie_embeddings=true"],
    "gru-dot-unidirectional": ["model.cell=gru", "model.attention=dot", "model.bidirectional=false",
                               "model.deep_output=false"],
    "rnn-bahdanau": ["model.cell=rnn", "model.decoder_style=bahdanau"],
    "ran": ["model.cell=ran"],
    "atr-independent": ["model.cell=atr", "model.gates=independent"],
    "sru": ["model.cell=sru", "model.dec_layers=2"],
    "sru-peephole-bahdanau": ["model.cell=sru", "model.peephole=true", "model.decoder_style=bahdanau"],
    "srnmt": ["model.cell=srnmt", "model.enc_layers=2", "model.dec_layers=2"],
    "fsmn": ["model.cell=fsmn", "model.attention=general"],
    "fsmn-window2-vector-multi": ["model.cell=fsmn", "model.input_window=2", "model.memory=vector",
                                  "model.dec_layers=2", "model.multi_attention=true", "model.dir_size=full"],
}
SRNMT_FLAGS = list(itertools.product([True, False], repeat=3))
GATES = [(strategy, cell) for strategy in ("none", "source", "target", "both") for cell in ("rnn", "gru", "lstm", "atr", "ran")]
GATE_VARIANTS = [
    ["model.gate_inputs=[state]", "model.gate_granularity=scalar", "model.context_gate=source"],  # Xu et al.'s gating scalar
    ["model.gate_inputs=[state]"], ["model.gate_inputs=[state, source]"], ["model.gate_inputs=[prev_word]"],
]


def build(overrides, hidden=8, emb=6, seed=0) -> Seq2Seq:
    torch.manual_seed(seed)
    cfg = load_config(None, [*overrides, f"model.hidden={hidden}", f"model.emb={emb}"]).model
    return Seq2Seq(cfg, V, V).double().eval()


def batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (3, 7), generator=g)
    src_mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4], dtype=torch.bool)
    src = src.masked_fill(~src_mask, 0)
    tgt = torch.randint(4, V, (3, 6), generator=g)
    tgt_mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 5 + [0]], dtype=torch.bool)
    return src, src_mask, tgt.masked_fill(~tgt_mask, 0), tgt_mask


@pytest.mark.parametrize("name", list(MODELS))
def test_parallel_training_path_equals_step_by_step(name):
    model = build(MODELS[name])
    src, src_mask, tgt, tgt_mask = batch()
    memory = model.encode(src, src_mask)
    y = model.embed_target(tgt)
    parallel = model.decoder(memory, y, tgt_mask)
    stepped = model.decoder.forward_by_steps(memory, y)
    real = tgt_mask.unsqueeze(-1)
    torch.testing.assert_close(parallel * real, stepped * real, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", list(MODELS))
def test_sentence_alone_equals_sentence_in_padded_batch(name):
    """Encoder states, loss and beam output of a sentence do not depend on its batch."""
    model = build(MODELS[name], hidden=16, emb=8)
    src, src_mask, tgt, tgt_mask = batch()
    row = 2  # the shortest source: padded inside the batch
    n_src, n_tgt = int(src_mask[row].sum()), int(tgt_mask[row].sum())
    alone = (src[row:row + 1, :n_src], src_mask[row:row + 1, :n_src], tgt[row:row + 1, :n_tgt],
             tgt_mask[row:row + 1, :n_tgt])
    states = model.encode(src, src_mask)["states"]
    states_alone = model.encode(alone[0], alone[1])["states"]
    torch.testing.assert_close(states[row:row + 1, :n_src], states_alone, rtol=1e-9, atol=1e-10)

    def per_sentence_loss(s, sm, t, tm):
        logits = model(s, sm, t, tm)
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), t, reduction="none")
        return (nll * tm).sum(dim=1)

    losses = per_sentence_loss(src, src_mask, tgt, tgt_mask)
    torch.testing.assert_close(losses[row:row + 1], per_sentence_loss(*alone), rtol=1e-9, atol=1e-10)
    in_batch = beam_search(model, src, src_mask, beam=3, max_len_ratio=1.5)
    assert beam_search(model, alone[0], alone[1], beam=3, max_len_ratio=1.5)[0] == in_batch[row]


@pytest.mark.parametrize("flags", SRNMT_FLAGS, ids=lambda f: "LN{}-MA{}-HW{}".format(*map(int, f)))
def test_every_srnmt_ablation_builds_and_learns(flags):
    layer_norm, multi, highway = flags
    model = build(["model.cell=srnmt", "model.enc_layers=2", "model.dec_layers=2",
                   f"model.layer_norm={str(layer_norm).lower()}", f"model.multi_attention={str(multi).lower()}",
                   f"model.highway={str(highway).lower()}"], hidden=16, emb=16)
    assert learns(model)
    # the ablation removes what it says
    layer = model.decoder.layers[0]
    assert isinstance(layer.norm, torch.nn.LayerNorm) == layer_norm
    assert (layer.context_proj is not None) == multi
    assert model.decoder.layers[-1].context_proj is not None  # the top layer always attends
    assert layer.highway == highway and model.encoder.cells[0].use_highway == highway


@pytest.mark.parametrize("strategy,cell", GATES)
def test_every_context_gate_strategy_learns(strategy, cell):
    model = build([f"model.cell={cell}", "model.decoder_style=bahdanau", f"model.context_gate={strategy}"],
                  hidden=16, emb=16)
    assert ("0" in model.decoder.gates) == (strategy != "none")
    assert learns(model)


@pytest.mark.parametrize("variant", GATE_VARIANTS, ids=lambda v: "-".join(x.split("=")[1] for x in v))
def test_context_gate_inputs_and_granularity_learn(variant):
    overrides = ["model.cell=gru", "model.decoder_style=bahdanau", "model.context_gate=both", *variant]
    model = build(overrides, hidden=16, emb=16)
    gate = model.decoder.gates["0"]
    cfg = load_config(None, overrides).model
    assert list(gate.proj) == cfg.gate_inputs
    assert next(iter(gate.proj.values())).out_features == (1 if cfg.gate_granularity == "scalar" else 16)
    assert learns(model)


def learns(model: Seq2Seq, steps: int = 8) -> bool:
    """A few Adam steps on one batch lower its loss, and every parameter gets a gradient."""
    model.train()
    src, src_mask, tgt, tgt_mask = batch(seed=5)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss, _ = model.loss(src, src_mask, tgt, tgt, tgt_mask)
        loss.backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None and n != "src_embed.weight"]
        assert not missing, f"no gradient for {missing}"
        optimizer.step()
        losses.append(loss.item())
    return all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]


def test_gru_parameter_count_by_hand():
    E, H = 6, 8
    model = build(["model.cell=gru"], hidden=H, emb=E)
    h = H // 2  # bidirectional, dir_size half
    embeddings = 2 * V * E
    encoder = 2 * 3 * (h * E + h * h + 2 * h)
    decoder_cell = 3 * (H * 2 * E + H * H + 2 * H)  # input feeding: [e(y); o] has 2E
    attention = H * H + (H * H + H) + H  # W_q (no bias), W_k + b, v
    init = H * H + H
    deep_output = (H + H + E) * E + E  # tanh(W_o [t; c; e(y)]) to the embedding size
    generator = E * V + V
    assert model.parameter_count == embeddings + encoder + decoder_cell + attention + init + deep_output + generator
    assert model.weight_matrices == 6


def test_tied_embeddings_share_one_matrix():
    tied = build(["model.cell=gru", "model.tie_embeddings=true"])
    untied = build(["model.cell=gru"])
    assert tied.generator.weight is tied.tgt_embed.weight
    assert untied.parameter_count - tied.parameter_count == V * 6


def test_beam_one_is_greedy_and_wider_beams_score_at_least_as_well():
    model = build(MODELS["gru-general-ln"], hidden=16, emb=8, seed=3)
    src, src_mask, _, _ = batch()
    greedy = greedy_decode(model, src, src_mask)
    assert beam_search(model, src, src_mask, beam=1) == greedy

    def log_prob(row, hypothesis):
        memory = model.encode(src[row:row + 1], src_mask[row:row + 1])
        state = model.decoder.init_state(memory)
        total, prev = 0.0, 2  # BOS
        for token in hypothesis + [3]:  # ... EOS
            log_probs, state = model.step_log_probs(memory, torch.tensor([prev]), state)
            total += log_probs[0, token].item()
            prev = token
        return total

    wide = beam_search(model, src, src_mask, beam=6, length_penalty=0.0)
    for row in range(3):
        if len(greedy[row]) < 24:  # greedy hypotheses cut at the length limit have no EOS score
            assert log_prob(row, wide[row]) >= log_prob(row, greedy[row]) - 1e-9


def test_beam_search_respects_length_limit():
    model = build(MODELS["rnn-bahdanau"], seed=4)
    src, src_mask, _, _ = batch()
    for hypothesis, length in zip(beam_search(model, src, src_mask, beam=3, max_len_ratio=0.5),
                                  src_mask.sum(dim=1).tolist()):
        assert len(hypothesis) <= int(length * 0.5) + 10


def test_embeddings_have_unit_scale_and_tied_logits_start_near_uniform():
    model = build(["model.cell=gru", "model.tie_embeddings=true"], hidden=32, emb=64)
    y = torch.randint(4, V, (8, 20))
    assert 0.7 < model.embed_target(y).std().item() < 1.3
    src, src_mask, tgt, tgt_mask = batch()
    _, nll = model.loss(src, src_mask, tgt, tgt, tgt_mask)
    per_token = float(nll) / int(tgt_mask.sum())
    assert abs(per_token - torch.log(torch.tensor(float(V))).item()) < 0.5
