"""finpod: deep-RL trading agents trained in a podracer tournament on minute-level NASDAQ-100 bars."""

from finpod.errors import BrokerError, DataError, FinpodError, SpecError

__all__ = ["BrokerError", "DataError", "FinpodError", "SpecError"]
__version__ = "0.1.0"
