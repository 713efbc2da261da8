"""What the Triton kernels share (``nmt.ops.triton_scan``, ``nmt.ops.triton_steps``): triton
itself, imported the one way that also works without a GPU, the block layout, and the
element-wise functions triton.language lacks in its interpreter.

Without a CUDA device the kernels run in Triton's interpreter, on CPU tensors (how the tests
check them in CI). ``triton.jit`` picks the interpreter when it decorates a kernel, by
``TRITON_INTERPRET``, so it is set here before triton loads and before any kernel is defined;
a value already set (``TRITON_INTERPRET=0`` to see the failure) is kept. triton.language's own
jit functions (``tl.sigmoid``, ``tl.zeros_like``, ...) are decorated when triton loads, which may
be before this module (another library, a test importing triton first) and so compiled where the
kernels are interpreted; the kernels therefore call only triton.language's builtins and the
functions defined here.
"""

from __future__ import annotations

import os

import torch

from nmt.errors import UserError

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

try:
    import triton
    import triton.language as tl
except ModuleNotFoundError as error:  # an optional dependency
    raise UserError("the Triton kernels (NMT_KERNELS=triton, method='triton') need triton: "
                    "pip install -e '.[triton]'") from error

#: hidden units per program, at most; every program carries one block of a row through all steps
MAX_BLOCK = 128


def grid(batch: int, size: int) -> tuple[tuple[int, int], int]:
    """(launch grid, BLOCK): one program per sequence and block of hidden units."""
    block = min(triton.next_power_of_2(size), MAX_BLOCK)
    return (batch, triton.cdiv(size, block)), block


def check_inputs(*tensors: torch.Tensor) -> None:
    dtype, device = tensors[0].dtype, tensors[0].device
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"the Triton kernels take float32 or float64 tensors, not {dtype}")
    if any(t.dtype != dtype or t.device != device for t in tensors):
        raise ValueError("the Triton kernels take tensors of one dtype on one device")


@triton.jit
def tanh(x):
    """tanh(x) = sign(x) (1 - e^{-2|x|}) / (1 + e^{-2|x|}); below |x| = 0.04, where 1 - e^{-2|x|}
    would lose digits, its Taylor series to x^11 (truncation error below 1e-19 relative). Within a
    few ulps of torch.tanh in float32 and float64 (libdevice's tanh has no interpreter version)."""
    ax = tl.abs(x)
    e = tl.exp(-2.0 * ax)
    large = (1.0 - e) / (1.0 + e)
    near = tl.minimum(ax, 0.04)  # the series only where it is taken (no inf * 0 for |x| = inf)
    x2 = near * near
    series = 62.0 / 2835.0 + x2 * (-1382.0 / 155925.0)
    series = -17.0 / 315.0 + x2 * series
    series = 2.0 / 15.0 + x2 * series
    series = -1.0 / 3.0 + x2 * series
    small = near + near * x2 * series
    magnitude = tl.where(ax < 0.04, small, large)
    return tl.where(x < 0, -magnitude, magnitude)


@triton.jit
def sigmoid(x):
    """σ(x) = 1 / (1 + e^{-x}) (e^{-x} = inf gives 0, no nan)."""
    return 1.0 / (1.0 + tl.exp(-x))
