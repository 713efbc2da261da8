"""Part 3 of ``nmt.bench``: beam-5 words/s of the search, which drops finished sentences from the
batch, next to the baseline that kept them (its old loop, frozen here), over the same length-sorted
batches of a 512-sentence test set; medians of interleaved rounds. The GRU models have random
weights, and each search ends where a trained GRU's would (``ScriptedEnds``), so that sentences leave
a batch as unevenly as in real use. The only assertion of ``nmt.bench``: both give the same
translations."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable

import torch
from torch import Tensor, nn

from nmt.benchmarks.models import model_config
from nmt.benchmarks.timing import interleaved_times, synchronize
from nmt.config import DecodeConfig
from nmt.data.batching import make_source_batches
from nmt.data.subword import BOS, EOS, PAD
from nmt.data.synthetic import generate_corpus, tokenize
from nmt.model import build_model
from nmt.search import beam_search, max_lengths


@torch.no_grad()
def baseline_beam_search(model, src: Tensor, src_mask: Tensor, beam: int = 5, length_penalty: float = 1.0,
                         max_len_ratio: float = 2.0) -> list[list[int]]:
    """``nmt.search.beam_search`` as it was before finished sentences left the batch (every sentence
    keeps its K rows until the batch's last search ends), kept here only as the baseline of the
    decoding ratio: the speed-up of dropping finished sentences is measured against it in every run,
    and the translations of both must agree. Frozen on purpose, so one function of more than 60
    lines: splitting it into steps or sharing them with ``nmt.search`` would change the code it
    times, and a baseline that follows the search's changes measures nothing."""
    batch, device = src.size(0), src.device
    memory = model.encode(src, src_mask)
    state = model.decoder.init_state(memory)
    rows = torch.arange(batch, device=device).repeat_interleave(beam)
    memory = {k: v.index_select(0, rows) for k, v in memory.items()}
    state = {k: v.index_select(0, rows) for k, v in state.items()}
    limits = max_lengths(src_mask, max_len_ratio).tolist()

    scores = torch.full((batch, beam), float("-inf"), device=device)
    scores[:, 0] = 0.0
    tokens = torch.full((batch * beam, 1), BOS, dtype=torch.long, device=device)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]
    done = [False] * batch

    def finish(sentence: int, hypothesis: list[int], score: float, eos: bool = True) -> None:
        length = len(hypothesis) + (1 if eos else 0)
        finished[sentence].append((score / max(length, 1) ** length_penalty, hypothesis))

    for t in range(max(limits)):
        log_probs, state = model.step_log_probs(memory, tokens[:, -1], state)
        log_probs[:, PAD] = float("-inf")
        log_probs[:, BOS] = float("-inf")
        vocab = log_probs.size(-1)
        candidates = (scores.view(-1, 1) + log_probs).view(batch, beam * vocab)
        top_scores, top_index = candidates.topk(2 * beam, dim=1)
        origin = torch.div(top_index, vocab, rounding_mode="floor")
        words = top_index % vocab
        is_eos = words == EOS

        eos_rank = is_eos & (torch.arange(2 * beam, device=device) < beam)
        for sentence, position in eos_rank.nonzero().tolist():
            if not done[sentence]:
                prefix = tokens[sentence * beam + int(origin[sentence, position]), 1:].tolist()
                finish(sentence, prefix, float(top_scores[sentence, position]))

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
                for k in range(beam):
                    hypothesis = tokens[sentence * beam + k, 1:].tolist()
                    finish(sentence, hypothesis, float(scores[sentence, k]), eos=False)
                done[sentence] = True
        if all(done):
            break

    return [max(hypotheses, key=lambda item: item[0])[1] for hypotheses in finished]


class ScriptedEnds:
    """A random-weight model whose searches end where a trained model's would: EOS is impossible
    before the step drawn for the sentence and the only word at it. A random model's own EOS
    probability ends nearly every search at once or at the length limit, and how many rows the
    baseline keeps busy for nothing depends on how unevenly the searches of a batch end.
    Everything else - encoder, decoder steps, softmax, search - is the real model's work."""

    def __init__(self, model: nn.Module, ends: dict[tuple[int, ...], int]):
        self.model, self.decoder, self.ends = model, model.decoder, ends
        self.rows = 0  # decoder rows computed, summed over steps

    def encode(self, src: Tensor, src_mask: Tensor) -> dict[str, Tensor]:
        memory = self.model.encode(src, src_mask)
        ends = [self.ends[tuple(ids[real][:-1].tolist())] for ids, real in zip(src, src_mask)]  # source without EOS
        memory["scripted_end"] = torch.tensor(ends, device=src.device)  # a batch row like any, so the search moves it
        return memory

    def step_log_probs(self, memory: dict[str, Tensor], y_prev: Tensor, state: dict) -> tuple[Tensor, dict]:
        state = dict(state)
        steps = state.pop("scripted_steps", torch.zeros_like(y_prev)) + 1
        self.rows += y_prev.size(0)
        log_probs, state = self.model.step_log_probs(memory, y_prev, state)
        # rows past their end belong to finished searches; a row index, not a mask: no pass over (rows, V)
        ending = (steps == memory["scripted_end"]).nonzero().squeeze(1)
        log_probs[:, EOS] = float("-inf")
        log_probs.index_fill_(0, ending, float("-inf"))
        log_probs[ending, EOS] = 0.0
        state["scripted_steps"] = steps
        return log_probs, state


def scripted_test_set(sentences: int, vocab: int, max_len_ratio: float, seed: int = 1
                      ) -> tuple[list[list[int]], dict[tuple[int, ...], int]]:
    """(sources, the step where each one's search ends). Sources have the lengths of the synthetic
    corpus's test set (3-50 tokens, mean 16; Multi30k's test set has 14 BPE pieces on average) and
    random ids. A search ends after its source length (+ EOS) x a log-normal factor, median 1.15
    and sigma 0.29: fitted to what beam 5 gives with a GRU trained for one epoch on Multi30k
    (median 1.15, 5th to 95th percentile 0.77 to 2.0; half of the baseline's rows work there, as here)."""
    rng = random.Random(seed)
    sources, ends = [], {}
    for source, _ in generate_corpus(seed, 1, 1, sentences)["test"]:
        ids = [rng.randrange(4, vocab) for _ in tokenize(source)]
        length = len(ids) + 1
        limit = int(length * max_len_ratio) + 10  # nmt.search.max_lengths
        ends[tuple(ids)] = min(max(2, round(length * math.exp(rng.gauss(0.14, 0.29)))), limit)
        sources.append(ids)
    return sources, ends


def decoding_row(hidden: int, vocab: int, sentences: int, device: torch.device, repeats: int) -> dict:
    """Beam-search words/s of the GRU model (the studies' unit) at one size, the search as it is and
    the baseline, both over the same length-sorted batches as ``nmt.translator``, timed in
    interleaved rounds (medians); the translations must be the same."""
    decode = DecodeConfig()
    torch.manual_seed(0)
    model = build_model(model_config({"hidden": hidden, "emb": hidden, "cell": "gru"}), vocab, vocab)
    sources, ends = scripted_test_set(sentences, vocab, decode.max_len_ratio)
    scripted = ScriptedEnds(model.to(device).eval(), ends)
    batches = [(src.to(device), mask.to(device), indices)
               for src, mask, indices in make_source_batches(sources, decode.batch_size)]
    outputs: dict[str, list] = {}
    rows: dict[str, int] = {}

    def translate_with(name: str, search) -> Callable[[], None]:
        def run():
            start, translations = scripted.rows, [None] * len(sources)
            for src, mask, indices in batches:
                hypotheses = search(scripted, src, mask, beam=decode.beam, length_penalty=decode.length_penalty,
                                    max_len_ratio=decode.max_len_ratio)
                for index, hypothesis in zip(indices, hypotheses):
                    translations[index] = hypothesis
            synchronize(device)
            outputs[name], rows[name] = translations, scripted.rows - start

        return run

    seconds = interleaved_times({"baseline": translate_with("baseline", baseline_beam_search),
                                 "search": translate_with("search", beam_search)}, repeats)
    if outputs["search"] != outputs["baseline"]:
        raise AssertionError(f"H={hidden}, vocab {vocab}: the search and its baseline translate differently")
    words = sum(len(hypothesis) for hypothesis in outputs["search"])
    median = {name: statistics.median(values) for name, values in seconds.items()}
    return {"hidden": hidden, "vocab": vocab, "sentences": sentences, "beam": decode.beam, "words": words,
            "words_per_s": words / median["search"], "baseline_words_per_s": words / median["baseline"],
            "speedup": median["baseline"] / median["search"], "seconds": seconds["search"],
            "baseline_seconds": seconds["baseline"], "baseline_useful_rows": rows["search"] / rows["baseline"]}


def decoding_table(sizes: list[tuple[int, int]], sentences: int, device: torch.device, repeats: int,
                   log) -> list[dict]:
    """Part 3's rows: one per (hidden size, vocabulary), each also logged."""
    rows = []
    for hidden, vocab in sizes:
        row = decoding_row(hidden, vocab, sentences, device, repeats)
        rows.append(row)
        log(f"  H={hidden:<4d} vocab {vocab:<6,d} {row['words_per_s']:>8,.0f} words/s  baseline "
            f"{row['baseline_words_per_s']:>8,.0f} words/s  x{row['speedup']:.2f} (medians of {repeats} interleaved "
            f"rounds; the baseline's rows doing useful work: {100 * row['baseline_useful_rows']:.0f}%; same translations)")
    return rows
