"""The SR-NMT weakly-recurrent encoder unit (Di Gangi & Federico 2018,
"Deep Neural Machine Translation with Weakly-Recurrent Units", Sec. 3.1)::

    [x>_i, x<_i, g>_i, g<_i, z_i] = LN(x_i W),     W in R^{d x (4 d/2 + d)}
    h>_i = (1 - σ(g>_i)) * h>_{i-1} + σ(g>_i) * x>_i
    h<_i = (1 - σ(g<_i)) * h<_{i+1} + σ(g<_i) * x<_i
    h_i  = (1 - σ(z_i)) * [h>_i; h<_i] + σ(z_i) * x_i          (highway)

Both directions share one GEMM and one layer normalisation; the recurrences
are linear (class a) and run as scans. Ablations (paper Table 4):
``layer_norm: false`` removes the LN; ``highway: false`` gives
h_i = [h>_i; h<_i] and drops z from W (W in R^{d x 4 d/2}, LN over what is
left). W packs three transforms (candidate, recurrence gate, highway gate):
3 weight matrices. When the input size differs from d the highway reads a
projection of x_i. By default x_i W has a bias b before the LN (LN(x_i W + b));
``norm_bias: false`` leaves it out, the paper's LN(x_i W) (without LN the
bias stays).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.cells.base import RecurrentCell, reference_loop
from nmt.decoders.srnmt import SRNMTDecoder
from nmt.ops.linear_scan import linear_scan
from nmt.typed_config import setting
from nmt.units import Unit


class SRNMTEncoderUnit(RecurrentCell):
    recurrence = "a"

    def __init__(self, input_size: int, hidden_size: int, layer_norm: bool = True, highway: bool = True,
                 norm_bias: bool = True):
        if hidden_size % 2:
            raise ValueError("the SR-NMT encoder unit needs an even size d (d/2 per direction)")
        super().__init__(input_size, hidden_size // 2, directions=2)
        d = hidden_size
        self.d = d
        self.use_highway = highway
        width = 3 * d if highway else 2 * d  # [x>, x<, g>, g<] (+ z)
        self.linear = nn.Linear(input_size, width, bias=norm_bias or not layer_norm)
        self.norm = nn.LayerNorm(width) if layer_norm else nn.Identity()
        self.highway_projection = nn.Linear(input_size, d, bias=False) if highway and input_size != d else None

    @property
    def weight_matrices(self) -> int:
        return 3 if self.use_highway else 2

    def project(self, x: Tensor, skip: Tensor | None = None) -> Tensor:
        u = self.norm(self.linear(x))
        if not self.use_highway:
            return u
        if self.highway_projection is not None:
            x_highway = self.highway_projection(x)
        else:
            x_highway = x if skip is None else skip
        return torch.cat([u, x_highway], dim=-1)

    def _split(self, u: Tensor):
        # one split, not six slices: a slice's backward zero-fills a gradient of u's full size
        half, d = self.d // 2, self.d
        if not self.use_highway:
            return (*u.split(half, dim=-1), None, None)
        return u.split([half, half, half, half, d, d], dim=-1)

    def scan(self, u, mask, state0=None):
        x_fwd, x_bwd, g_fwd, g_bwd, z, x_highway = self._split(u)
        m = mask.unsqueeze(-1)
        states = []
        for direction, (x_dir, g_dir) in enumerate(((x_fwd, g_fwd), (x_bwd, g_bwd))):
            init = state0[direction][0] if state0 is not None else u.new_zeros(u.size(0), self.hidden_size)
            a = torch.where(m, torch.sigmoid(-g_dir), 1.0)  # 1 - σ(g); padding carries the state
            b = torch.where(m, torch.sigmoid(g_dir) * x_dir, 0.0)
            states.append(linear_scan(a, b, init, reverse=direction == 1))
        h = torch.cat(states, dim=-1)
        if self.use_highway:
            gate = torch.sigmoid(z)
            h = (1 - gate) * h + gate * x_highway
        last = (mask.sum(dim=1) - 1).clamp(min=0)
        rows = torch.arange(u.size(0), device=u.device)
        finals = [(states[0][rows, last],), (states[1][:, 0],)]
        return h * m, finals

    def step(self, u_t, state, history_gate=None, direction=0):
        """One step of one direction's recurrence (before the highway, which needs both)."""
        x_fwd, x_bwd, g_fwd, g_bwd, _, _ = self._split(u_t)
        x_dir, g_dir = (x_fwd, g_fwd) if direction == 0 else (x_bwd, g_bwd)
        (h,) = state
        gate = torch.sigmoid(g_dir)
        h_new = (1 - gate) * h + gate * x_dir
        return h_new, (h_new,)

    def reference(self, x, mask, state0=None):
        d, half = self.d, self.d // 2
        projected = F.linear(x, self.linear.weight, self.linear.bias)
        if isinstance(self.norm, nn.LayerNorm):
            projected = F.layer_norm(projected, (projected.size(-1),), self.norm.weight, self.norm.bias,
                                     self.norm.eps)
        x_fwd, x_bwd = projected[..., :half], projected[..., half:d]
        g_fwd, g_bwd = projected[..., d:d + half], projected[..., d + half:2 * d]
        z = projected[..., 2 * d:]  # empty without the highway

        def recurrence(x_dir, g_dir):
            def step(t, state):
                (h_prev,) = state
                h_new = (1 - torch.sigmoid(g_dir[:, t])) * h_prev + torch.sigmoid(g_dir[:, t]) * x_dir[:, t]
                return h_new, (h_new,)
            return step

        finals, states = [], []
        for direction, (x_dir, g_dir) in enumerate(((x_fwd, g_fwd), (x_bwd, g_bwd))):
            init = state0[direction] if state0 is not None else (x.new_zeros(x.size(0), half),)
            out, final = reference_loop(recurrence(x_dir, g_dir), x.size(1), mask, init, reverse=direction == 1)
            states.append(out)
            finals.append(final)
        h = torch.cat(states, dim=-1)
        if self.use_highway:
            x_highway = x @ self.highway_projection.weight.T if self.highway_projection is not None else x
            h = (1 - torch.sigmoid(z)) * h + torch.sigmoid(z) * x_highway
        return h * mask.unsqueeze(-1).to(h.dtype), finals


@dataclass
class SRNMTOptions:
    highway: bool = setting(True, "the unit's highway gate z; false removes it (h = [h>; h<], s = o)")
    # LN(c_i W_c + b_c) would cancel the factor without the bias b_c; with it, the factor matters.
    context_scale: bool = setting(False, "divide every attention context by sqrt(d), the paper's "
                                         "c_i = attn(s~_i, H) / sqrt(d); false leaves it unscaled")
    norm_bias: bool = setting(True, "a bias in every matrix a layer norm reads, LN(x W + b) (unit, decoder and "
                                    "attention keys); false is the paper's LN(x W)")


def _validate(model, fail) -> None:
    if not model.bidirectional or model.dir_size != "half":
        fail("model.dir_size", model.dir_size, "the srnmt encoder unit is bidirectional with d/2 per direction; "
             "use bidirectional: true, dir_size: half")


UNIT = Unit(
    name="srnmt", label="SR-NMT", rank=7, options=SRNMTOptions,
    paper="Di Gangi & Federico 2018, Deep Neural Machine Translation with Weakly-Recurrent Units",
    cell=lambda options, model, input_size, hidden, directions: SRNMTEncoderUnit(
        input_size, hidden, layer_norm=model.layer_norm, highway=options.highway, norm_bias=options.norm_bias),
    recurrence="a", triton_kernels=True, bidirectional="total",
    defaults={"layer_norm": True, "multi_attention": True},
    decoder=SRNMTDecoder, validate=_validate,
    variants={"srnmt-no-ln-no-highway": {"model.layer_norm": False, "model.srnmt.highway": False}},
)
