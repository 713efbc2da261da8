"""Greedy decoding and batched beam search over any decoder's ``step``.

Beam search keeps K live hypotheses per sentence in one (B*K)-row batch.
Each step takes the top 2K extensions per sentence: extensions ending in EOS
that rank among the top K are finished, and the best K others stay live.
A sentence stops once it has K finished hypotheses or reaches its own
length limit (``max_len_ratio`` * source length + 10), so results do not
depend on which other sentences share the batch. Finished hypotheses are
ranked by log p / length**alpha (``length_penalty`` alpha; 0 = raw log p).
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


@torch.no_grad()
def greedy_decode(model: Seq2Seq, src: Tensor, src_mask: Tensor, max_len_ratio: float = 2.0) -> list[list[int]]:
    batch = src.size(0)
    memory = model.encode(src, src_mask)
    state = model.decoder.init_state(memory)
    limits = max_lengths(src_mask, max_len_ratio)
    y = torch.full((batch,), BOS, dtype=torch.long, device=src.device)
    outputs: list[list[int]] = [[] for _ in range(batch)]
    done = torch.zeros(batch, dtype=torch.bool, device=src.device)
    for t in range(int(limits.max())):
        log_probs, state = model.step_log_probs(memory, y, state)
        y = _forbid_specials(log_probs).argmax(dim=-1)
        for i in (~done).nonzero().flatten().tolist():
            token = int(y[i])
            if token == EOS or t + 1 >= int(limits[i]):
                done[i] = True
                if token != EOS:
                    outputs[i].append(token)
            else:
                outputs[i].append(token)
        if bool(done.all()):
            break
    return outputs


@torch.no_grad()
def beam_search(model: Seq2Seq, src: Tensor, src_mask: Tensor, beam: int = 5, length_penalty: float = 1.0,
                max_len_ratio: float = 2.0) -> list[list[int]]:
    if beam == 1:
        return greedy_decode(model, src, src_mask, max_len_ratio)
    batch, device = src.size(0), src.device
    memory = model.encode(src, src_mask)
    state = model.decoder.init_state(memory)
    rows = torch.arange(batch, device=device).repeat_interleave(beam)
    memory = {k: v.index_select(0, rows) for k, v in memory.items()}
    state = {k: v.index_select(0, rows) for k, v in state.items()}
    limits = max_lengths(src_mask, max_len_ratio).tolist()

    scores = torch.full((batch, beam), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: keep one alive
    tokens = torch.full((batch * beam, 1), BOS, dtype=torch.long, device=device)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]
    done = [False] * batch

    def finish(sentence: int, hypothesis: list[int], score: float, eos: bool = True) -> None:
        length = len(hypothesis) + (1 if eos else 0)
        finished[sentence].append((score / max(length, 1) ** length_penalty, hypothesis))

    for t in range(max(limits)):
        log_probs, state = model.step_log_probs(memory, tokens[:, -1], state)
        log_probs = _forbid_specials(log_probs)
        vocab = log_probs.size(-1)
        candidates = (scores.view(-1, 1) + log_probs).view(batch, beam * vocab)
        top_scores, top_index = candidates.topk(2 * beam, dim=1)
        origin = torch.div(top_index, vocab, rounding_mode="floor")
        words = top_index % vocab
        is_eos = words == EOS

        # Finished: EOS extensions ranked in the top K of a live sentence.
        eos_rank = is_eos & (torch.arange(2 * beam, device=device) < beam)
        for sentence, position in eos_rank.nonzero().tolist():
            if not done[sentence]:
                prefix = tokens[sentence * beam + int(origin[sentence, position]), 1:].tolist()
                finish(sentence, prefix, float(top_scores[sentence, position]))

        # Live: the K best non-EOS extensions (at most K of the 2K can be EOS).
        keep_rank = (~is_eos).cumsum(dim=1)
        keep = (~is_eos) & (keep_rank <= beam)
        order = keep.float().argsort(dim=1, descending=True, stable=True)[:, :beam]
        scores = top_scores.gather(1, order)
        chosen_origin = origin.gather(1, order)
        chosen_words = words.gather(1, order)
        flat_origin = (torch.arange(batch, device=device).unsqueeze(1) * beam + chosen_origin).view(-1)
        tokens = torch.cat([tokens.index_select(0, flat_origin), chosen_words.view(-1, 1)], dim=1)
        state = {k: v.index_select(0, flat_origin) for k, v in state.items()}

        for sentence in range(batch):
            if done[sentence]:
                continue
            if len(finished[sentence]) >= beam:
                done[sentence] = True
            elif t + 1 >= limits[sentence]:
                for k in range(beam):  # out of length: the live beams end here
                    hypothesis = tokens[sentence * beam + k, 1:].tolist()
                    finish(sentence, hypothesis, float(scores[sentence, k]), eos=False)
                done[sentence] = True
        if all(done):
            break

    return [max(hypotheses, key=lambda item: item[0])[1] for hypotheses in finished]
