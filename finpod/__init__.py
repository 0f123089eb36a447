"""finpod: deep-RL trading agents trained in a podracer tournament on minute-level NASDAQ-100 bars."""

from typing import TYPE_CHECKING, Any

from finpod.errors import BrokerError, DataError, FinpodError, SpecError

if TYPE_CHECKING:
    from finpod.api import RunResult, Spec, load_dataset, load_run, run

__all__ = [
    "BrokerError",
    "DataError",
    "FinpodError",
    "RunResult",
    "Spec",
    "SpecError",
    "load_dataset",
    "load_run",
    "run",
]
__version__ = "0.1.0"
_API = ("RunResult", "Spec", "load_dataset", "load_run", "run")


def __getattr__(name: str) -> Any:
    """The Python API (:mod:`finpod.api`), imported on first use so ``import finpod`` stays light."""
    if name in _API:
        from finpod import api

        return getattr(api, name)
    raise AttributeError(f"module 'finpod' has no attribute {name!r}")
