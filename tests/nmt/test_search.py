"""Batched search drops finished sentences from the batch and changes no result: for every unit and
decoder option of test_model's MODELS, a padded batch mixing very short and long sentences gives each
sentence the hypothesis and score it gets alone and with the baseline that kept finished sentences in
the batch; a test set decoded in length-sorted batches comes back in input order, as if unsorted.

Modules covered here: ``nmt.translator``."""

from __future__ import annotations

import pytest
import torch
from test_model import MODELS, V, build

from nmt.benchmarks.decoding import ScriptedEnds, baseline_beam_search, decoding_row, scripted_test_set
from nmt.config import DecodeConfig
from nmt.data.batching import pad_sources
from nmt.data.subword import EOS
from nmt.search import beam_search, greedy_decode, scored_beam_search
from nmt.translator import translate

LENGTHS = [1, 14, 2, 9, 1, 20, 5]  # very short next to long: most rows of the batch finish early
MAX_LEN_RATIO = 1.5


def sources(seed: int = 1, lengths: list[int] = LENGTHS) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(4, V, (n,), generator=g).tolist() for n in lengths]


def model_ending_unevenly(name: str, eos_shift: float):
    """A tiny random model; ``eos_shift`` on the EOS bias makes some searches end after a few steps and
    others only at their length limit (0.5), or most at the limit (0.0)."""
    model = build(MODELS[name], hidden=16, emb=8)
    with torch.no_grad():
        model.generator.bias[EOS] += eos_shift
    return model


class RowCounter:
    """Records how many decoder rows each step computes."""

    def __init__(self, model):
        self.model, self.decoder, self.rows = model, model.decoder, []

    def encode(self, src, src_mask):
        return self.model.encode(src, src_mask)

    def step_log_probs(self, memory, y_prev, state):
        self.rows.append(y_prev.size(0))
        return self.model.step_log_probs(memory, y_prev, state)


@pytest.mark.parametrize("eos_shift", [0.0, 0.5])
@pytest.mark.parametrize("name", list(MODELS))
def test_batched_beam_search_equals_each_sentence_alone_and_the_baseline(name, eos_shift):
    model = model_ending_unevenly(name, eos_shift)
    src, src_mask = pad_sources(sources())
    counter = RowCounter(model)
    batched = scored_beam_search(counter, src, src_mask, beam=5, max_len_ratio=MAX_LEN_RATIO)
    steps_alone = []
    for row, source in enumerate(sources()):
        alone = RowCounter(model)
        (score, hypothesis), = scored_beam_search(alone, *pad_sources([source]), beam=5, max_len_ratio=MAX_LEN_RATIO)
        steps_alone.append(len(alone.rows))
        assert batched[row][1] == hypothesis
        # the same up to rounding: a BLAS may round a row differently in a product with more rows
        assert batched[row][0] == pytest.approx(score, rel=1e-12, abs=0.0)
    # every step computes the rows of the sentences still searched, and no others
    assert counter.rows == [5 * sum(steps > t for steps in steps_alone) for t in range(max(steps_alone))]
    assert baseline_beam_search(model, src, src_mask, beam=5, max_len_ratio=MAX_LEN_RATIO) == [h for _, h in batched]


@pytest.mark.parametrize("name", list(MODELS))
def test_batched_greedy_decoding_equals_each_sentence_alone(name):
    model = model_ending_unevenly(name, 0.5)
    batched = greedy_decode(model, *pad_sources(sources()), max_len_ratio=MAX_LEN_RATIO)
    assert batched == [greedy_decode(model, *pad_sources([source]), max_len_ratio=MAX_LEN_RATIO)[0]
                       for source in sources()]


def test_beam_search_with_length_penalty_and_beam_3_equals_the_baseline():
    model = model_ending_unevenly("gru-cg-paper", 0.5)
    src, src_mask = pad_sources(sources(seed=2))
    for beam, length_penalty in ((3, 0.0), (3, 1.0), (2, 0.6)):
        assert beam_search(model, src, src_mask, beam, length_penalty, MAX_LEN_RATIO) == \
            baseline_beam_search(model, src, src_mask, beam, length_penalty, MAX_LEN_RATIO)


class IdsAsText:
    """A target vocabulary that writes ids as text: what translate's output order needs, no SentencePiece."""

    def decode(self, ids: list[int]) -> str:
        return " ".join(map(str, ids))


@pytest.mark.parametrize("beam", [1, 4])
def test_sorted_translation_returns_input_order_and_unsorted_results(beam):
    model = model_ending_unevenly("lstm", 0.0)
    test_set = sources(seed=3, lengths=[3, 17, 1, 8, 25, 2, 11, 6, 1, 19])
    decode = DecodeConfig(beam=beam, batch_size=4, max_len_ratio=MAX_LEN_RATIO)
    texts = translate(model, test_set, IdsAsText(), decode).texts
    # unsorted: batches of 4 in input order, and each sentence alone
    in_input_order = [hypothesis for start in range(0, len(test_set), 4)
                      for hypothesis in beam_search(model, *pad_sources(test_set[start:start + 4]), beam=beam,
                                                    max_len_ratio=MAX_LEN_RATIO)]
    alone = [beam_search(model, *pad_sources([source]), beam=beam, max_len_ratio=MAX_LEN_RATIO)[0]
             for source in test_set]
    assert texts == [IdsAsText().decode(hypothesis) for hypothesis in in_input_order]
    assert in_input_order == alone


def test_scripted_searches_end_at_their_drawn_step():
    model = build(MODELS["gru-defaults"], hidden=16, emb=8)
    test_set, ends = scripted_test_set(12, V, max_len_ratio=2.0)
    scripted = ScriptedEnds(model, ends)
    for source in test_set:
        hypothesis, = beam_search(scripted, *pad_sources([source]), beam=5)
        assert len(hypothesis) + 1 == ends[tuple(source)]  # + EOS


def test_decoding_benchmark_reports_the_ratio_to_the_baseline():
    row = decoding_row(hidden=8, vocab=30, sentences=40, device=torch.device("cpu"), repeats=1)
    assert row["words"] > 0 and row["words_per_s"] > 0 and row["baseline_words_per_s"] > 0
    assert row["speedup"] == pytest.approx(row["words_per_s"] / row["baseline_words_per_s"])
    assert 0 < row["baseline_useful_rows"] < 1
