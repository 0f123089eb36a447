"""The seam to the report engineer's :mod:`finpod.report` (``write_report``, ``rebuild_report``,
``metrics.metrics_table``).

Looked up when called, so the pipeline imports (and trains) while the report package is absent.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pandas as pd

from finpod.backtest.result import BacktestResult
from finpod.errors import FinpodError


def _report_function(name: str, module_name: str = "finpod.report") -> Any:
    try:
        module = importlib.import_module(module_name)
        return getattr(module, name)
    except (ImportError, AttributeError) as err:
        raise FinpodError(
            f"finpod.report.{name} is not available ({err}); fix: update finpod (the report package)"
        ) from None


def write_report(out_dir: Path, **inputs: Any) -> Any:
    """``finpod.report.write_report(out_dir, **inputs)``; returns its ``ReportPaths``."""
    return _report_function("write_report")(out_dir, **inputs)


def rebuild_report(run_dir: Path) -> Any:
    """``finpod.report.rebuild_report(run_dir)``; returns its ``ReportPaths``."""
    return _report_function("rebuild_report")(run_dir)


def metrics_table(backtest: BacktestResult) -> pd.DataFrame:
    """``finpod.report.metrics.metrics_table``: one row per trader and baseline, one column per metric."""
    table: pd.DataFrame = _report_function("metrics_table", "finpod.report.metrics")(backtest)
    return table
