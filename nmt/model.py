"""The attentional encoder-decoder: embeddings, encoder, decoder, softmax.

``Seq2Seq`` is built from a ``ModelConfig`` alone (plus vocabulary sizes),
so a checkpoint's config rebuilds the exact model.

Dropout is applied once before every parameter matrix that reads a layer's
input (the softmax matrix included), by the module that owns the matrix;
the embeddings themselves are not dropped here, or the first matrix of each
side would see them dropped twice.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from nmt.config import ModelConfig
from nmt.decoders import Memory, make_decoder
from nmt.encoders import make_encoder

PAD = 0


class Seq2Seq(nn.Module):
    def __init__(self, cfg: ModelConfig, src_vocab: int, tgt_vocab: int):
        super().__init__()
        self.cfg = cfg
        self.src_embed = nn.Embedding(src_vocab, cfg.emb, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(tgt_vocab, cfg.emb, padding_idx=PAD)
        self.encoder = make_encoder(cfg)
        self.decoder = make_decoder(cfg, self.encoder.output_size)
        self.generator = nn.Linear(self.decoder.output.size, tgt_vocab)
        self.output_dropout = nn.Dropout(cfg.dropout)  # before the softmax matrix
        if cfg.init == "uniform":
            self.embed_scale = 1.0
            self._init_uniform(cfg.init_range)
        else:
            # Weights N(0, 1/emb), lookups scaled by sqrt(emb): inputs have unit scale
            # and softmax weights tied to the target embeddings start with sane logits.
            self.embed_scale = cfg.emb ** 0.5
            for embedding in (self.src_embed, self.tgt_embed):
                nn.init.normal_(embedding.weight, std=cfg.emb ** -0.5)
        if cfg.init == "he":
            self._init_relu_inputs()
        with torch.no_grad():
            for embedding in (self.src_embed, self.tgt_embed):
                embedding.weight[PAD].zero_()
        if cfg.tie_embeddings:
            self.generator.weight = self.tgt_embed.weight

    def _init_uniform(self, bound: float) -> None:
        """Every weight, bias and embedding U(-bound, bound); layer-norm gains and biases and
        FSMN memory taps keep their starting values (the papers that use this have neither)."""
        kept = {id(p) for module in self.modules()
                if isinstance(module, nn.LayerNorm) or getattr(module, "keeps_initial_values", False)
                for p in module.parameters()}
        for p in self.parameters():
            if id(p) not in kept:
                nn.init.uniform_(p, -bound, bound)

    def _init_relu_inputs(self) -> None:
        """He uniform initialisation of the matrices that feed each ReLU (modules that have them
        name them by ``relu_inputs()``: one tuple per ReLU, the matrices it adds up): weights
        U(+-sqrt(6 / fan_in)) with fan_in summed over the tuple, biases 0, so a pre-activation has
        twice its input's mean square and the ReLU's output keeps the input's scale."""
        for module in self.modules():
            for matrices in getattr(module, "relu_inputs", lambda: ())():
                bound = (6.0 / sum(linear.in_features for linear in matrices)) ** 0.5
                for linear in matrices:
                    nn.init.uniform_(linear.weight, -bound, bound)
                    if linear.bias is not None:
                        nn.init.zeros_(linear.bias)

    def lr_scales(self) -> list[tuple[list[nn.Parameter], float]]:
        """Parameter groups and their learning-rate factors: the parameters of modules whose
        ``lr_scale`` is not 1 (FSMN memory taps with ``memory_lr_scale``) learn at that factor
        times the rate of everything else."""
        scaled: dict[float, list[nn.Parameter]] = {}
        for module in self.modules():
            scale = getattr(module, "lr_scale", 1.0)
            if scale != 1.0:
                scaled.setdefault(scale, []).extend(module.parameters())
        if not scaled:
            return [(list(self.parameters()), 1.0)]
        ids = {id(p) for group in scaled.values() for p in group}
        return [([p for p in self.parameters() if id(p) not in ids], 1.0), *((group, s) for s, group in scaled.items())]

    # --- reporting ---------------------------------------------------------------

    @property
    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())  # tied weights are counted once

    @property
    def weight_matrices(self) -> int:
        """Weight matrices of one recurrent unit, counted as in the ATR paper (LSTM 8, GRU 6, RAN 4, ATR 2)."""
        return self.encoder.weight_matrices

    # --- computation -------------------------------------------------------------

    def embed_target(self, y: Tensor) -> Tensor:
        return self.tgt_embed(y) * self.embed_scale

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        states = self.encoder(self.src_embed(src) * self.embed_scale, src_mask)
        return self.decoder.prepare({"states": states, "mask": src_mask})

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, tgt_mask: Tensor) -> Tensor:
        """Teacher-forced logits (B, T, V)."""
        memory = self.encode(src, src_mask)
        return self.generator(self.output_dropout(self.decoder(memory, self.embed_target(tgt_in), tgt_mask)))

    def loss(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, tgt_out: Tensor, tgt_mask: Tensor,
             label_smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
        """(summed cross-entropy, summed negative log-likelihood) over real target tokens."""
        logits = self.forward(src, src_mask, tgt_in, tgt_mask)
        flat_logits = logits.reshape(-1, logits.size(-1))
        flat_target = tgt_out.masked_fill(~tgt_mask, -100).reshape(-1)
        nll = F.cross_entropy(flat_logits, flat_target, ignore_index=-100, reduction="sum")
        if label_smoothing == 0.0:
            return nll, nll.detach()
        smoothed = F.cross_entropy(flat_logits, flat_target, ignore_index=-100, reduction="sum",
                                   label_smoothing=label_smoothing)
        return smoothed, nll.detach()

    def step_log_probs(self, memory: Memory, y_prev: Tensor, state: dict) -> tuple[Tensor, dict]:
        """One decoding step: log p(y_t | y_<t, x) (B, V) and the new decoder state."""
        o, state = self.decoder.step(memory, self.embed_target(y_prev), state)
        return torch.log_softmax(self.generator(self.output_dropout(o)), dim=-1), state


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> Seq2Seq:
    return Seq2Seq(cfg, src_vocab, tgt_vocab)


class _NoNormalInit(TorchFunctionMode):
    """Leaves ``normal_`` initialisations undone: on the meta device there is nothing to fill, and
    PyTorch's meta ``normal_`` goes through a decomposition that imports ``torch._dynamo`` (about 2 s of
    CPU in a study driver that builds a model only to count its parameters)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is nn.init.normal_ or func is Tensor.normal_:
            return args[0] if args else kwargs["tensor"]
        return func(*args, **(kwargs or {}))


def build_model_shapes(cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> Seq2Seq:
    """The model with its parameters' shapes and no values: built on PyTorch's meta device, which
    allocates nothing (a mistyped huge model costs no memory), for counting its parameters and products."""
    with torch.device("meta"), _NoNormalInit():
        return Seq2Seq(cfg, src_vocab, tgt_vocab)
