"""Backtests: one deterministic pass of traders and baselines over a segment.

``finpod.backtest`` is this package AND the public replay function :func:`finpod.replay.backtest`:
the package module is callable, so ``finpod.backtest(run, start=..., end=...)`` works whether or
not a submodule such as ``finpod.backtest.result`` was imported first.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    """This package's module type: calling it calls :func:`finpod.replay.backtest`."""

    def __call__(self, run: Any, **options: Any) -> Any:
        from finpod.replay import backtest

        return backtest(run, **options)


sys.modules[__name__].__class__ = _CallablePackage
