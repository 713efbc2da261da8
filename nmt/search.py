"""Greedy decoding and batched beam search over any decoder's ``step``.

Beam search keeps K live hypotheses per sentence in one (B*K)-row batch.
Each step takes the top 2K extensions per sentence: extensions ending in EOS
that rank among the top K are finished, and the best K others stay live.
A sentence stops once it has K finished hypotheses or reaches its own
length limit (``max_len_ratio`` * source length + 10), so results do not
depend on which other sentences share the batch. Finished hypotheses are
ranked by log p / length**alpha (``length_penalty`` alpha; 0 = raw log p).

A sentence whose search is over leaves the batch: its rows of the decoder
state and of the memory (encoder states, mask, attention keys) are dropped,
so every step costs what the sentences still searched need. Decoder states
and memories are flat dicts of batch-first tensors, so one ``index_select``
per entry both reorders the beams and drops the finished sentences, for
every decoder alike. Rows do not interact, so dropping them changes no
translation. (A score may change in its last bits: a BLAS may round a row
of a matrix product differently when the product has fewer rows, as it
does between a sentence decoded alone and in a batch.)
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.data.subword import BOS, EOS, PAD
from nmt.model import Seq2Seq


def max_lengths(src_mask: Tensor, ratio: float) -> Tensor:
    """Per-sentence limit on generated tokens (EOS included)."""
    return (src_mask.sum(dim=1).float() * ratio).long() + 10


def _forbid_specials(log_probs: Tensor) -> Tensor:
    log_probs[:, PAD] = float("-inf")
    log_probs[:, BOS] = float("-inf")
    return log_probs


def select_rows(tensors: dict[str, Tensor], rows: Tensor) -> dict[str, Tensor]:
    """The given batch rows of every entry of a decoder state or memory."""
    return {name: tensor.index_select(0, rows) for name, tensor in tensors.items()}


@torch.no_grad()
def greedy_decode(model: Seq2Seq, src: Tensor, src_mask: Tensor, max_len_ratio: float = 2.0) -> list[list[int]]:
    batch, device = src.size(0), src.device
    memory = model.encode(src, src_mask)
    state = model.decoder.init_state(memory)
    limits = max_lengths(src_mask, max_len_ratio).tolist()
    live = list(range(batch))  # the input position of each row still decoded
    y = torch.full((batch,), BOS, dtype=torch.long, device=device)
    outputs: list[list[int]] = [[] for _ in range(batch)]
    for t in range(max(limits)):
        log_probs, state = model.step_log_probs(memory, y, state)
        y = _forbid_specials(log_probs).argmax(dim=-1)
        going_on = []
        for row, (sentence, token) in enumerate(zip(live, y.tolist())):
            if token != EOS:
                outputs[sentence].append(token)
            if token != EOS and t + 1 < limits[sentence]:
                going_on.append(row)
        if not going_on:
            break
        if len(going_on) < len(live):
            rows = torch.tensor(going_on, device=device)
            live = [live[row] for row in going_on]
            y, memory, state = y.index_select(0, rows), select_rows(memory, rows), select_rows(state, rows)
    return outputs


@torch.no_grad()
def beam_search(model: Seq2Seq, src: Tensor, src_mask: Tensor, beam: int = 5, length_penalty: float = 1.0,
                max_len_ratio: float = 2.0) -> list[list[int]]:
    if beam == 1:
        return greedy_decode(model, src, src_mask, max_len_ratio)
    return [hypothesis for _, hypothesis in scored_beam_search(model, src, src_mask, beam, length_penalty,
                                                               max_len_ratio)]


@torch.no_grad()
def scored_beam_search(model: Seq2Seq, src: Tensor, src_mask: Tensor, beam: int = 5, length_penalty: float = 1.0,
                       max_len_ratio: float = 2.0) -> list[tuple[float, list[int]]]:
    """(score, hypothesis) of the best finished hypothesis of each sentence (``beam`` >= 2).

    Each step: the top 2K extensions of every sentence still searched; those ending in EOS that rank
    in the top K finish; the K best others stay live; sentences with K finished hypotheses or at their
    length limit end, and their rows leave the batch."""
    batch, device = src.size(0), src.device
    memory = model.encode(src, src_mask)
    state = model.decoder.init_state(memory)
    rows = torch.arange(batch, device=device).repeat_interleave(beam)
    memory, state = select_rows(memory, rows), select_rows(state, rows)
    limits = max_lengths(src_mask, max_len_ratio).tolist()
    live = list(range(batch))  # the input position of each sentence still searched, in batch order
    beam_offsets = torch.arange(beam, device=device)

    scores = torch.full((batch, beam), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: keep one alive
    tokens = torch.full((batch * beam, 1), BOS, dtype=torch.long, device=device)
    finished = _Finished(batch, length_penalty)

    for t in range(max(limits)):
        n = len(live)
        log_probs, state = model.step_log_probs(memory, tokens[:, -1], state)
        top_scores, origin, words, is_eos = _top_extensions(scores, _forbid_specials(log_probs), beam)
        _finish_eos_extensions(finished, live, tokens, top_scores, origin, is_eos, beam)
        scores, tokens, source_rows = _live_extensions(tokens, top_scores, origin, words, is_eos, beam)
        going_on = _sentences_going_on(finished, live, limits, t, tokens, scores, beam)
        if not going_on:
            break
        if len(going_on) == n:
            state = select_rows(state, source_rows.view(-1))
            continue
        # Drop the finished sentences: the beams' reorder and the drop in one select.
        kept = torch.tensor(going_on, device=device)
        kept_rows = (kept.unsqueeze(1) * beam + beam_offsets).view(-1)
        state = select_rows(state, source_rows.index_select(0, kept).view(-1))
        memory = select_rows(memory, kept_rows)
        tokens, scores = tokens.index_select(0, kept_rows), scores.index_select(0, kept)
        live = [live[row] for row in going_on]

    return finished.best()


class _Finished:
    """The finished hypotheses of each sentence, scored log p / length**alpha (``length_penalty``)."""

    def __init__(self, batch: int, length_penalty: float):
        self.hypotheses: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]
        self.length_penalty = length_penalty

    def add(self, sentence: int, hypothesis: list[int], score: float, eos: bool = True) -> None:
        length = len(hypothesis) + (1 if eos else 0)
        self.hypotheses[sentence].append((score / max(length, 1) ** self.length_penalty, hypothesis))

    def count(self, sentence: int) -> int:
        return len(self.hypotheses[sentence])

    def best(self) -> list[tuple[float, list[int]]]:
        return [max(hypotheses, key=lambda item: item[0]) for hypotheses in self.hypotheses]


def _top_extensions(scores: Tensor, log_probs: Tensor, beam: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(scores, beam of origin, word, ends in EOS) of the top 2K extensions of each sentence's K beams,
    each (n, 2K) for the n sentences in the batch."""
    vocab = log_probs.size(-1)
    candidates = (scores.view(-1, 1) + log_probs).view(scores.size(0), beam * vocab)
    top_scores, top_index = candidates.topk(2 * beam, dim=1)
    origin = torch.div(top_index, vocab, rounding_mode="floor")
    words = top_index % vocab
    return top_scores, origin, words, words == EOS


def _finish_eos_extensions(finished: _Finished, live: list[int], tokens: Tensor, top_scores: Tensor, origin: Tensor,
                           is_eos: Tensor, beam: int) -> None:
    """Finished: EOS extensions ranked in the top K (every sentence in the batch is live)."""
    eos_rank = is_eos & (torch.arange(2 * beam, device=is_eos.device) < beam)
    for row, position in eos_rank.nonzero().tolist():
        prefix = tokens[row * beam + int(origin[row, position]), 1:].tolist()
        finished.add(live[row], prefix, float(top_scores[row, position]))


def _live_extensions(tokens: Tensor, top_scores: Tensor, origin: Tensor, words: Tensor, is_eos: Tensor,
                     beam: int) -> tuple[Tensor, Tensor, Tensor]:
    """Live: the K best non-EOS extensions (at most K of the 2K can be EOS). Returns their scores
    (n, K), the tokens of every row extended by its word, and the row each comes from (n, K)."""
    keep_rank = (~is_eos).cumsum(dim=1)
    keep = (~is_eos) & (keep_rank <= beam)
    order = keep.float().argsort(dim=1, descending=True, stable=True)[:, :beam]
    scores = top_scores.gather(1, order)
    chosen_origin = origin.gather(1, order)
    chosen_words = words.gather(1, order)
    source_rows = torch.arange(top_scores.size(0), device=top_scores.device).unsqueeze(1) * beam + chosen_origin
    tokens = torch.cat([tokens.index_select(0, source_rows.view(-1)), chosen_words.view(-1, 1)], dim=1)
    return scores, tokens, source_rows


def _sentences_going_on(finished: _Finished, live: list[int], limits: list[int], t: int, tokens: Tensor,
                        scores: Tensor, beam: int) -> list[int]:
    """The batch rows of the sentences still searched after step ``t``: a sentence ends with K finished
    hypotheses, or at its length limit, where its live beams end as they are."""
    going_on = []
    for row, sentence in enumerate(live):
        if finished.count(sentence) >= beam:
            continue
        if t + 1 >= limits[sentence]:
            for k in range(beam):  # out of length: the live beams end here
                hypothesis = tokens[row * beam + k, 1:].tolist()
                finished.add(sentence, hypothesis, float(scores[row, k]), eos=False)
            continue
        going_on.append(row)
    return going_on
