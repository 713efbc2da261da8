"""The opt-in kernel switch as the user sets it (``NMT_KERNELS``), read without loading torch: a command
checks it before it writes or trains anything. ``nmt.ops.kernels`` dispatches on it."""

from __future__ import annotations

import os

from nmt.errors import UserError
from nmt.units import units

KERNELS_ENV = "NMT_KERNELS"
KERNELS = ("torch", "triton")


def triton_units() -> tuple[str, ...]:
    """The units whose recurrences have Triton kernels, as each declares it (``Unit.triton_kernels``); the others
    compute the same with the switch on or off. It loads the unit modules, and so torch."""
    return tuple(name for name, unit in units().items() if unit.triton_kernels)


def requested_kernels() -> str:
    """``torch`` (the default) or ``triton``, from ``NMT_KERNELS``; any other value is one UserError line."""
    value = os.environ.get(KERNELS_ENV, "") or "torch"
    if value not in KERNELS:
        raise UserError(f"{KERNELS_ENV}={value!r} is not a kernel choice; use torch (the default) or triton")
    return value


def check_kernels() -> str | None:
    """The switch checked (a bad value is one UserError line); a warning line when it asks for Triton where no
    CUDA device is present: Triton's interpreter then runs every kernel, hundreds of times slower than the
    torch paths (it serves the tests)."""
    if requested_kernels() != "triton":
        return None
    # torch only when the switch is on: checking the default costs a command nothing
    import torch

    if torch.cuda.is_available():
        return None
    return (f"{KERNELS_ENV}=triton without a CUDA device: the Triton kernels run in Triton's interpreter, hundreds of "
            f"times slower than the default torch paths (units with Triton kernels: {', '.join(triton_units())}); unset "
            f"{KERNELS_ENV} unless that is what you want")
