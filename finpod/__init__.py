"""finpod: deep-RL trading agents trained in a podracer tournament on minute-level NASDAQ-100 bars."""

import os
from typing import TYPE_CHECKING, Any

from finpod.cpu_kernels import pin_cpu_kernels
from finpod.errors import BrokerError, DataError, FinpodError, SpecError
from finpod.gym_ids import GYM_ID, register_envs
from finpod.version import __version__ as __version__

pin_cpu_kernels(os.environ)  # before torch's first kernel: the same CPU kernels on every x86-64 machine

if TYPE_CHECKING:
    from finpod.api import (
        RunResult,
        Spec,
        TraderPolicy,
        backtest_run,
        compare_runs,
        load_dataset,
        load_run,
        make_env,
        run,
        runs,
    )

__all__ = [
    "GYM_ID",
    "BrokerError",
    "DataError",
    "FinpodError",
    "RunResult",
    "Spec",
    "SpecError",
    "TraderPolicy",
    "backtest_run",
    "compare_runs",
    "load_dataset",
    "load_run",
    "make_env",
    "run",
    "runs",
]
_API = (
    "RunResult",
    "Spec",
    "TraderPolicy",
    "backtest_run",
    "compare_runs",
    "load_dataset",
    "load_run",
    "make_env",
    "run",
    "runs",
)

register_envs()


def __getattr__(name: str) -> Any:
    """The Python API (:mod:`finpod.api`), imported on first use so ``import finpod`` stays light."""
    if name in _API:
        from finpod import api

        return getattr(api, name)
    raise AttributeError(f"module 'finpod' has no attribute {name!r}")
