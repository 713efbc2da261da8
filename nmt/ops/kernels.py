"""Which kernels the recurrences run on: the opt-in switch to the Triton kernels (issue 67).

By default every recurrence runs on its torch path (``linear_scan``'s sequential or doubling scan,
``sru_v2_memory``'s, ``atr_scan``'s and ``ran_scan``'s step loops), exactly as without this module. With
``NMT_KERNELS=triton`` in the environment (a process's own; a study's Ray trial workers, on any node,
get the driver's) the recurrences whose ``method`` is ``auto`` run on Triton kernels instead:

- ``linear_scan`` (SR-NMT's encoder unit and decoder, SRU v1, minGRU, minLSTM): one kernel over
  the whole sequence forward and one backward (``nmt.ops.triton_scan``);
- ``sru_v2_memory`` (SRU v2's memory, whose gate reads c_{t-1}): the same, in one walk each way;
- ``atr_scan`` and ``ran_scan``: the step loop keeps its GEMM in torch, and each step's gate
  arithmetic is one fused kernel, forward and backward (``nmt.ops.triton_steps``).

They need the ``triton`` extra (``pip install -e '.[triton]'``). A CUDA tensor runs on the
compiled kernels; a CPU tensor does so only where no CUDA device is present, in Triton's
interpreter (``TRITON_INTERPRET=1``, set by ``nmt.ops.triton_common``), which is slow and serves
the tests. Other tensors (a CPU tensor on a GPU machine, a 16-bit dtype) keep the torch path.
The kernels compute the same functions to rounding (the tests compare them with the torch paths
and the cells' reference loops), not bit for bit: the golden numbers hold for the default only.
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.ops.kernel_choice import KERNELS_ENV, requested_kernels, triton_units

__all__ = ["KERNELS_ENV", "triton_units", "requested_kernels", "kernels_run", "triton_runs_on", "use_triton",
           "choose_method"]

TRITON_DTYPES = (torch.float32, torch.float64)


def kernels_run(cell: str, device: torch.device) -> str:
    """The kernels a model of ``cell`` on ``device`` runs its recurrences on, as a trial records it: ``triton``
    only where the switch is on, the unit declares Triton kernels and they can take tensors on that device."""
    on_device = device.type == "cuda" or not torch.cuda.is_available()
    return "triton" if requested_kernels() == "triton" and cell in triton_units() and on_device else "torch"


def triton_runs_on(x: Tensor) -> bool:
    """Whether the Triton kernels can take ``x``: a float32 or float64 tensor on CUDA, or on the
    CPU where no CUDA device is present (the interpreter)."""
    return x.dtype in TRITON_DTYPES and (x.is_cuda or not torch.cuda.is_available())


def use_triton(x: Tensor) -> bool:
    """Whether an ``auto`` recurrence on ``x`` runs on the Triton kernels."""
    return requested_kernels() == "triton" and triton_runs_on(x)


def choose_method(method: str, x: Tensor, name: str, default: str = "torch",
                  torch_methods: tuple[str, ...] = ("torch",)) -> str:
    """The method recurrence ``name`` runs on ``x``: ``auto`` is ``triton`` where ``use_triton(x)``,
    else ``default``; ``triton`` and ``torch_methods`` stand; anything else is refused."""
    if method == "auto":
        return "triton" if use_triton(x) else default
    if method != "triton" and method not in torch_methods:
        raise ValueError(f"unknown {name} method {method!r}")
    return method
