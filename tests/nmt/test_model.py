"""Encoder-decoder behaviour: parallel training paths equal step-by-step decoding,
padding and batch composition change nothing, every component trains, and the
parameter count matches a hand computation.

Modules covered here: ``nmt.cells.fsmn``, ``nmt.decoders``, ``nmt.decoders.base``, ``nmt.decoders.fsmn``,
``nmt.decoders.recurrent``, ``nmt.decoders.srnmt``, ``nmt.encoders``, ``nmt.encoders.fsmn``,
``nmt.encoders.recurrent``, ``nmt.modules.attention``, ``nmt.modules.context_gate`` and
``nmt.modules.layers``."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nmt.config import load_config
from nmt.model import Seq2Seq, build_model_shapes
from nmt.search import beam_search, greedy_decode
from nmt.units import units

ROOT = Path(__file__).resolve().parents[2]
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
    "lstm-conditional-3L-multi-feeding": ["model.cell=lstm", "model.decoder_style=conditional", "model.dec_layers=3",
                                          "model.multi_attention=true", "model.input_feeding=true"],
    "atr-conditional-2L-paper": ["model.cell=atr", "model.decoder_style=conditional", "model.dec_layers=2",
                                 "model.init=uniform", "model.dir_size=full"],
    "srnmt": ["model.cell=srnmt", "model.enc_layers=2", "model.dec_layers=2"],
    "fsmn": ["model.cell=fsmn", "model.attention=general"],
    "fsmn-window2-vector-multi": ["model.cell=fsmn", "model.input_window=2", "model.memory=vector",
                                  "model.dec_layers=2", "model.multi_attention=true", "model.dir_size=full"],
    # the papers' own settings where they differ from our defaults
    "srnmt-paper-no-ln": ["model.cell=srnmt", "model.enc_layers=2", "model.dec_layers=2", "model.layer_norm=false",
                          "model.context_scale=true", "model.plain_output=true", "model.deep_output=false",
                          "model.init=uniform"],
    "srnmt-paper": ["model.cell=srnmt", "model.enc_layers=2", "model.dec_layers=2", "model.srnmt.norm_bias=false",
                    "model.attention_dropout=true", "model.context_scale=true", "model.plain_output=true",
                    "model.deep_output=false", "model.init=uniform"],
    "gru-general-attention-dropout": ["model.cell=gru", "model.attention=general", "model.attention_dropout=true"],
    "gru-cg-paper": ["model.cell=gru", "model.decoder_style=bahdanau", "model.context_gate=both",
                     "model.init=uniform", "model.dropout=0.3"],
    "fsmn-paper": ["model.cell=fsmn", "model.enc_layers=4", "model.memory_layers=middle", "model.order=5",
                   "model.memory_lr_scale=0.01", "model.dropout=0.0"],
}
# every unit of the registry at its defaults, and on a bahdanau decoder where it has the step-by-step one:
# a unit added to nmt/cells/ gets these tests without a line here
for _unit in units().values():
    MODELS.setdefault(f"{_unit.name}-defaults", [f"model.cell={_unit.name}", "model.dec_layers=2"])
    if _unit.recurrent_decoder:
        MODELS.setdefault(f"{_unit.name}-bahdanau", [f"model.cell={_unit.name}", "model.decoder_style=bahdanau"])
        MODELS.setdefault(f"{_unit.name}-conditional", [f"model.cell={_unit.name}", "model.decoder_style=conditional"])
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


@pytest.mark.parametrize("cell", ["atr", "lstm"])
def test_conditional_decoder_step_is_lower_cell_attention_higher_cell(cell):
    """decoder_style: conditional (ATR's systems): s_i = cell_lower(y_{i-1}, h_{i-1}), c_i = attn(s_i, H),
    h_i = cell_higher(c_i, s_i), each cell by its reference equations; two steps, so the second
    starts from the higher cell's state."""
    model = build([f"model.cell={cell}", "model.decoder_style=conditional"], hidden=16, emb=8)
    decoder = model.decoder
    src, src_mask, tgt, _ = batch()
    memory = model.encode(src, src_mask)
    y = model.embed_target(tgt)
    state = decoder.init_state(memory)
    lower, higher = decoder.cells[0], decoder.higher_cells["0"]
    previous = tuple(state[f"0.{j}"] for j in range(lower.state_size))
    for t in range(2):
        output, state = decoder.step(memory, y[:, t], state)
        s, s_state = lower.reference_step(y[:, t], previous, 0)
        context, _ = decoder.attend("0", s, memory)
        h, previous = higher.reference_step(context, s_state, 0)
        for j, part in enumerate(previous):
            torch.testing.assert_close(state[f"0.{j}"], part, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(output, decoder.output(h, context, y[:, t]), rtol=1e-10, atol=1e-12)


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


EMBEDDING_READERS = {
    "lstm": ["model.cell=lstm"],
    "sru": ["model.cell=sru"],
    "atr-bahdanau-cg": ["model.cell=atr", "model.decoder_style=bahdanau", "model.context_gate=both"],
    "gru-luong-no-feeding": ["model.cell=gru", "model.input_feeding=false"],
    "srnmt": ["model.cell=srnmt"],
    "fsmn": ["model.cell=fsmn"],
    **{f"{unit.name}-defaults": [f"model.cell={unit.name}"] for unit in units().values()},
}


@pytest.mark.parametrize("name", list(EMBEDDING_READERS))
def test_dropout_hits_each_embedding_once_before_every_matrix_that_reads_it(name):
    """With dropout p, a p share of the embedding entries each matrix reads is zero (p^2 + ... more
    if the embeddings were dropped twice, as before: 75% zeros at p = 0.5)."""
    emb, p = 12, 0.5
    torch.manual_seed(0)
    cfg = load_config(None, [*EMBEDDING_READERS[name], "model.hidden=16", f"model.emb={emb}", f"model.dropout={p}"]).model
    model = Seq2Seq(cfg, V, V).train()
    g = torch.Generator().manual_seed(2)
    src, tgt = torch.randint(4, V, (16, 10), generator=g), torch.randint(4, V, (16, 10), generator=g)
    mask = torch.ones(16, 10, dtype=torch.bool)  # no padding: every zero comes from dropout
    seen: list[torch.Tensor] = []

    class RecordLinearInputs(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is torch.nn.functional.linear and args[0].size(-1) == emb:
                seen.append(args[0].detach())
            return func(*args, **(kwargs or {}))

    deep_output_words: list[torch.Tensor] = []
    model.decoder.output.proj.register_forward_pre_hook(lambda m, a: deep_output_words.append(a[0][..., -emb:]))
    with RecordLinearInputs():
        model.loss(src, mask, tgt, tgt, mask)
    seen += deep_output_words
    assert len(seen) >= 2
    zero_share = [float((x == 0).double().mean()) for x in seen]
    assert all(0.3 < share < 0.7 for share in zero_share), zero_share  # each reader: dropped once
    total = sum(float((x == 0).sum()) for x in seen) / sum(x.numel() for x in seen)
    assert abs(total - p) < 0.03, total


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


@pytest.mark.parametrize("name", list(MODELS))
def test_a_shapes_only_build_has_every_parameter_of_the_built_model_and_no_values(name):
    cfg = load_config(None, [*MODELS[name], "model.hidden=8", "model.emb=6"]).model
    shapes, built = build_model_shapes(cfg, V, V), Seq2Seq(cfg, V, V)
    assert [(n, p.shape) for n, p in shapes.named_parameters()] == [(n, p.shape) for n, p in built.named_parameters()]
    assert all(p.is_meta for p in shapes.parameters())
    assert (shapes.parameter_count, shapes.weight_matrices) == (built.parameter_count, built.weight_matrices)


def test_a_shapes_only_build_does_not_load_torch_dynamo():
    """Why it skips normal_: on the meta device it would import torch._dynamo (seconds of a driver's start)."""
    code = ("import sys; from nmt.config import load_config; from nmt.model import build_model_shapes; "
            "build_model_shapes(load_config(None, []).model, 50, 50); print('torch._dynamo' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr[-2000:]


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


def test_uniform_init_draws_every_weight_from_the_range_and_reads_embeddings_unscaled():
    model = build(["model.cell=srnmt", "model.init=uniform", "model.init_range=0.05"], hidden=16, emb=16)
    for name, parameter in model.named_parameters():
        if "norm" in name:  # layer-norm gains and biases keep 1 and 0
            assert parameter.abs().max() <= 1.0 and parameter.std() == 0, name
            continue
        assert parameter.abs().max() <= 0.05, name
        assert parameter.abs().max() > 0.03 or name.endswith("embed.weight"), name  # drawn, not left at zero
    assert model.embed_scale == 1.0
    scaled = build(["model.cell=srnmt"], hidden=16, emb=16)
    assert scaled.embed_scale == 4.0


def test_he_init_keeps_the_fsmn_signal_scale_where_scaled_shrinks_it():
    overrides = ["model.cell=fsmn", "model.enc_layers=4", "model.fsmn.memory_layers=middle", "model.dec_layers=2"]
    he, scaled = build([*overrides, "model.init=he"], hidden=64, emb=64), build(overrides, hidden=64, emb=64)
    for module in he.modules():
        for matrices in getattr(module, "relu_inputs", lambda: ())():
            bound = (6.0 / sum(linear.in_features for linear in matrices)) ** 0.5
            for linear in matrices:  # U(+-bound) over the matrices one ReLU adds up, biases 0
                assert bound * 0.9 < linear.weight.abs().max() <= bound
                assert linear.bias is None or not linear.bias.any()
    fed = {id(linear) for m in he.modules() for group in getattr(m, "relu_inputs", lambda: ())() for linear in group}
    # encoder: 2 plain + 2 memory layers (W and W~) a direction; decoder: W_v, W', W~, and W_H where it attends (the top)
    assert len(fed) == 2 * (2 + 2 * 2) + 3 + 4
    src, src_mask, _, _ = batch()
    src_mask = src_mask.bool()
    scale = {name: model.encode(src, src_mask)["states"][src_mask].pow(2).mean().sqrt().item()
             for name, model in (("he", he), ("scaled", scaled))}
    assert scale["he"] > 0.3 and scale["scaled"] < 0.2, scale


def test_plain_output_feeds_the_top_state_to_the_softmax():
    model = build(["model.cell=srnmt", "model.plain_output=true", "model.deep_output=false"], hidden=8, emb=6)
    assert model.generator.in_features == 8  # the state's size, not the embedding's
    assert not hasattr(model.decoder.output, "proj")
    deep = build(["model.cell=srnmt"], hidden=8, emb=6)
    assert deep.parameter_count - model.parameter_count == (8 + 8 + 6) * 6 + 6 + (6 - 8) * V


def test_srnmt_context_scale_divides_every_context_by_sqrt_d():
    overrides = ["model.cell=srnmt", "model.layer_norm=false", "model.enc_layers=2", "model.dec_layers=2"]
    plain, scaled = build(overrides, hidden=16, emb=16), build([*overrides, "model.context_scale=true"], hidden=16, emb=16)
    src, src_mask, tgt, tgt_mask = batch()
    memory = plain.encode(src, src_mask)
    query = torch.randn(3, 16, dtype=torch.float64)
    torch.testing.assert_close(scaled.decoder.attend_scaled("0", query, memory),
                               plain.decoder.attend_scaled("0", query, memory) / 4.0)
    assert not torch.allclose(plain(src, src_mask, tgt, tgt_mask), scaled(src, src_mask, tgt, tgt_mask))
    # With LN, the factor changes the model only through the bias of c W_c + b (the paper's
    # LN(c W_c) has none): zero the biases and the two agree; the plain output does not read c again.
    with_ln = ["model.cell=srnmt", "model.enc_layers=2", "model.dec_layers=2", "model.plain_output=true",
               "model.deep_output=false"]
    outputs = []
    for flags in (with_ln, [*with_ln, "model.context_scale=true"]):
        model = build(flags, hidden=16, emb=16)
        with torch.no_grad():
            for layer in model.decoder.layers:
                layer.context_proj.bias.zero_()
        outputs.append(model(src, src_mask, tgt, tgt_mask))
    torch.testing.assert_close(outputs[0], outputs[1], rtol=0, atol=1e-2)  # up to LN's epsilon


def test_srnmt_norm_bias_false_leaves_out_the_bias_of_every_matrix_a_layer_norm_reads():
    H, layers = 8, 2
    flags = ["model.cell=srnmt", f"model.enc_layers={layers}", f"model.dec_layers={layers}"]
    with_bias, paper = build(flags, hidden=H), build([*flags, "model.srnmt.norm_bias=false"], hidden=H)
    # encoder W (3H), decoder W (3H), W_s and W_c (H each), attention W_k (H) in both attending layers
    assert with_bias.parameter_count - paper.parameter_count == layers * 3 * H + layers * (3 * H + 2 * H) + layers * H
    for layer in paper.decoder.layers:
        assert layer.linear.bias is None and layer.state_proj.bias is None and layer.context_proj.bias is None
    assert all(attention.key_proj.bias is None for attention in paper.decoder.attentions.values())
    no_ln = ["model.layer_norm=false", *flags]  # nothing normalises: every bias stays
    assert build(no_ln, hidden=H).parameter_count == build([*no_ln, "model.srnmt.norm_bias=false"], hidden=H).parameter_count
    # without the bias the LN after c W_c cancels the context's 1/sqrt(d), as in the paper's equations
    src, src_mask, tgt, tgt_mask = batch()
    plain = ["model.plain_output=true", "model.deep_output=false", "model.srnmt.norm_bias=false", *flags]
    unscaled, scaled = build(plain, hidden=16, emb=16), build([*plain, "model.context_scale=true"], hidden=16, emb=16)
    torch.testing.assert_close(unscaled(src, src_mask, tgt, tgt_mask), scaled(src, src_mask, tgt, tgt_mask),
                               rtol=0, atol=1e-2)  # up to LN's epsilon


@pytest.mark.parametrize("flags", [["model.cell=srnmt"], ["model.cell=gru"], ["model.cell=gru", "model.attention=general"]],
                         ids=["srnmt", "gru-mlp", "gru-general"])
def test_attention_dropout_drops_the_inputs_of_the_query_and_key_matrices(flags):
    p = 0.5
    shares = {}
    for on in (False, True):
        torch.manual_seed(0)
        cfg = load_config(None, [*flags, "model.hidden=16", "model.emb=12", f"model.dropout={p}",
                                 f"model.attention_dropout={str(on).lower()}"]).model
        model = Seq2Seq(cfg, V, V).train()
        seen: list[torch.Tensor] = []
        for attention in model.decoder.attentions.values():
            for name in ("query_proj", "key_proj"):
                if hasattr(attention, name):
                    getattr(attention, name).register_forward_pre_hook(lambda m, a, seen=seen: seen.append(a[0].detach()))
        g = torch.Generator().manual_seed(2)
        src, tgt = torch.randint(4, V, (16, 10), generator=g), torch.randint(4, V, (16, 10), generator=g)
        mask = torch.ones(16, 10, dtype=torch.bool)  # no padding: every zero comes from dropout
        model.loss(src, mask, tgt, tgt, mask)
        assert seen
        shares[on] = [float((x == 0).double().mean()) for x in seen]
    assert all(share == 0.0 for share in shares[False]), shares[False]
    assert all(0.4 < share < 0.6 for share in shares[True]), shares[True]


def test_fsmn_middle_encoder_is_the_papers_four_hidden_layers():
    """memory_layers: middle, enc_layers 4 (Hou et al.): four ReLU hidden layers, memory blocks on the
    second and third, each read by the layer above, h^l = f(W h^{l-1} + W~ h~^{l-1} + b), by hand."""
    model = build(MODELS["fsmn-paper"], hidden=16, emb=8)
    network = model.encoder.networks[0]
    first, second, third, fourth = network["layers"]
    assert sum(isinstance(m, torch.nn.Linear) for m in network.modules()) == 4 + 2  # W^1..W^4, W~^3, W~^4

    def memory(block, h):  # eq. (1), one position at a time
        taps = block.taps
        return torch.stack([torch.relu(sum(taps[i] * h[:, t - i] for i in range(min(t, block.order) + 1)))
                            for t in range(h.size(1))], dim=1)

    torch.manual_seed(3)
    x = torch.randn(3, 9, 8, dtype=torch.double)
    mask = torch.arange(9) < torch.tensor([[9], [6], [2]])
    h1 = torch.relu(first.hidden(x))
    h2 = torch.relu(second.hidden(h1))
    h3 = torch.relu(third.out_hidden(h2) + third.out_memory(memory(third.memory, h2)))
    h4 = torch.relu(fourth.out_hidden(h3) + fourth.out_memory(memory(fourth.memory, h3)))
    out = model.encoder._run(network, x, mask)
    torch.testing.assert_close(out[mask], h4[mask])


def test_fsmn_middle_memory_layers_and_slower_filters():
    model = build(MODELS["fsmn-paper"], hidden=16, emb=8)
    for network in model.encoder.networks:
        assert [layer.memory is not None for layer in network["layers"]] == [False, False, True, True]
    groups = model.lr_scales()
    assert [scale for _, scale in groups] == [1.0, 0.01]
    taps = {id(p) for p in groups[1][0]}
    assert len(taps) == 4 + 1  # two middle layers x two directions, one decoder layer
    assert all(id(p) not in taps for p in groups[0][0])
    assert sum(len(params) for params, _ in groups) == len(list(model.parameters()))
