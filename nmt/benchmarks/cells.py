"""Part 1 of ``nmt.bench``: forward + backward of one unidirectional layer (input GEMM included) of
every unit, B x T tokens, D = H. Reported: tokens/s, the ratio to ``torch.nn.LSTM`` of the same size
measured in the same run, achieved GFLOP/s (the weight-matrix FLOPs: 2 per weight element per token,
x3 for forward + backward) and its fraction of the machine's GEMM peak, measured in the same rounds."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from nmt.benchmarks.timing import gemm_call, interleaved_fastest, synchronize
from nmt.cells import make_cell
from nmt.config import config_from_dict
from nmt.typed_config import apply_overrides
from nmt.units import units


class TorchModule(nn.Module):
    """A torch RNN module called as the units' layers are, ``layer(x, mask)``."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, x, mask):
        return self.module(x)


def bench_cells_names() -> list[str]:
    """torch's fused LSTM and GRU, then every unit of the registry and the variants it asks the
    benchmark to time."""
    names = ["nn.LSTM", "nn.GRU"]
    for unit in units().values():
        names += [unit.name, *unit.bench]
    return names


def build_layer(name: str, hidden: int) -> nn.Module:
    """One layer of ``name`` (a name of ``bench_cells_names``), input size = hidden size."""
    if name == "nn.LSTM":
        return TorchModule(nn.LSTM(hidden, hidden, batch_first=True))
    if name == "nn.GRU":
        return TorchModule(nn.GRU(hidden, hidden, batch_first=True))
    unit = next(u for u in units().values() if name == u.name or name in u.variants)
    if unit.cell is None:
        return unit.bench_layer(hidden)
    changes = unit.variants.get(name, {})
    cfg = config_from_dict(apply_overrides({"model": {"cell": unit.name}}, list(changes.items()))).model
    return make_cell(cfg, hidden, hidden)  # a unit bidirectional by construction takes d = hidden in total


def matrix_elements(module: nn.Module) -> int:
    """Weight-matrix elements: each is one multiply-add per token in the forward pass."""
    return sum(p.numel() for p in module.parameters() if p.dim() >= 2)


def cell_step(name: str, hidden: int, batch: int, length: int, device: torch.device) -> tuple[Callable[[], None], int]:
    """(one forward + backward of the layer, its weight-matrix elements)."""
    layer = build_layer(name, hidden).to(device)
    x = torch.randn(batch, length, hidden, device=device, requires_grad=True)  # inside a model: dL/dx is needed
    mask = torch.ones(batch, length, dtype=torch.bool, device=device)

    def run():
        x.grad = None
        out = layer(x, mask)
        (out[0] if isinstance(out, tuple) else out).sum().backward()
        synchronize(device)

    return run, matrix_elements(layer)


def bench_cells(names: list[str], hidden: int, batch: int, length: int, device: torch.device,
                repeats: int) -> tuple[dict[str, dict], float]:
    """({cell: its row}, the GEMM peak in GFLOP/s), all timed in the same interleaved rounds."""
    steps = {name: cell_step(name, hidden, batch, length, device) for name in names}
    gemm, gemm_flops = gemm_call(batch, length, hidden, device)
    fastest = interleaved_fastest({"GEMM": gemm, **{name: run for name, (run, _) in steps.items()}}, repeats)
    results = {}
    for name, (_, elements) in steps.items():
        seconds = fastest[name]
        flops = 3 * 2 * batch * length * elements
        results[name] = {"cell": name, "hidden": hidden, "tokens_per_s": batch * length / seconds, "seconds": seconds,
                         "gflops": flops / seconds / 1e9}
    return results, gemm_flops / fastest["GEMM"] / 1e9


def cell_table(hiddens: list[int], threads: list[int], batch: int, length: int, device: torch.device,
               repeats: int, cells: list[str], log) -> list[dict]:
    """Part 1's rows: every cell at every size and CPU thread count, each line also logged."""
    rows = []
    for n in threads:
        if device.type == "cpu":
            torch.set_num_threads(n)
        for hidden in hiddens:
            results, peak = bench_cells(cells, hidden, batch, length, device, repeats)
            log(f"cells: {n} thread(s), H={hidden}: GEMM peak {peak:.1f} GFLOP/s")
            lstm = results.get("nn.LSTM", {}).get("tokens_per_s")
            for name in cells:
                r = results[name]
                r.update(threads=n, vs_lstm=r["tokens_per_s"] / lstm if lstm else None, peak_gflops=peak,
                         of_peak=r["gflops"] / peak)
                rows.append(r)
                log(f"  {name:8s} {r['tokens_per_s']:>10,.0f} tok/s  x{r['vs_lstm'] or 0:5.2f} nn.LSTM  "
                    f"{r['gflops']:6.1f} GFLOP/s ({100 * r['of_peak']:3.0f}% of peak)")
    return rows
