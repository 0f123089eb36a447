"""float32 matmul precision on a CUDA device: full float32 (``"highest"``) or TF32 (``"high"``).

``torch.set_float32_matmul_precision`` is process-wide; finpod sets it only for CUDA work (on the
CPU it changes nothing useful) and puts the previous value back afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Literal, get_args

import torch

from finpod.errors import SpecError

MatmulPrecision = Literal["highest", "high"]
"""``"highest"``: full float32 matmuls (the default, reproducible); ``"high"``: TF32 tensor cores."""
MATMUL_PRECISIONS: tuple[str, ...] = get_args(MatmulPrecision)


def check_matmul_precision(precision: str, option: str) -> MatmulPrecision:
    """``precision`` as a :data:`MatmulPrecision`; a one-line error naming ``option`` otherwise."""
    if precision == "highest":
        return "highest"
    if precision == "high":
        return "high"
    raise SpecError(f"{option} must be one of {', '.join(MATMUL_PRECISIONS)}, got {precision!r}")


def set_cuda_matmul_precision(device: torch.device, precision: str) -> None:
    """``torch.set_float32_matmul_precision(precision)`` when ``device`` is a CUDA device, else nothing."""
    if device.type == "cuda":
        torch.set_float32_matmul_precision(precision)


@contextlib.contextmanager
def cuda_matmul_precision(device: torch.device, precision: str) -> Iterator[None]:
    """float32 matmuls at ``precision`` inside the block on a CUDA device; the CPU is left alone.

    The previous setting comes back on exit (e.g. a run's validation passes and backtests after
    training run as before).
    """
    previous = torch.get_float32_matmul_precision()
    set_cuda_matmul_precision(device, precision)
    try:
        yield
    finally:
        set_cuda_matmul_precision(device, previous)
