"""The pyfolio-reloaded returns tear sheet of one trader, as a PNG plus pyfolio's HTML tables.

pyfolio draws on pyplot and prints its tables through IPython's ``display``; here the tables are
captured (shown in the HTML report) and nothing reaches stdout. pyfolio needs enough data for some
panels; whatever it cannot draw is caught and reported as a note instead of failing the report.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import matplotlib.pyplot as plt
import pandas as pd

from finpod.report.atomic import write_bytes_atomic
from finpod.report.quiet import quiet_analytics

TEARSHEET_DPI = 60
"""Resolution of the tear sheet PNG, dots per inch (the figure is 14 x ~70 inches)."""
MIN_TEARSHEET_SESSIONS = 2
"""Fewest sessions pyfolio can draw anything from."""


@dataclass(frozen=True)
class TearSheet:
    """What the tear sheet step produced.

    Attributes:
        path: the PNG written, or ``None`` when pyfolio could not draw it.
        png: the PNG bytes, or ``None``.
        tables_html: pyfolio's HTML tables (performance statistics, worst drawdowns), in order.
        note: why the tear sheet is missing (``None`` when it was drawn).
    """

    path: Path | None
    png: bytes | None
    tables_html: list[str]
    note: str | None


def write_tearsheet(
    returns: pd.Series,
    benchmark_returns: pd.Series | None,
    *,
    trader_name: str,
    benchmark_name: str,
    path: Path,
) -> TearSheet:
    """Draw ``pyfolio.create_returns_tear_sheet`` for one trader and save it as a PNG.

    Args:
        returns: the trader's daily simple returns (fraction), UTC session index.
        benchmark_returns: the benchmark's daily simple returns on the same sessions, or ``None``.
        trader_name: the trader's name (pyfolio itself labels it "Backtest").
        benchmark_name: shown in pyfolio's legends for the benchmark.
        path: where to write the PNG (atomically).

    Returns:
        The tear sheet, or a note saying what pyfolio could not do (never raises for pyfolio errors).
    """
    if len(returns) < MIN_TEARSHEET_SESSIONS:
        note = f"pyfolio tear sheet skipped: {len(returns)} session(s), needs {MIN_TEARSHEET_SESSIONS}."
        return TearSheet(None, None, [], note)
    tables_html: list[str] = []

    def capture(shown: Any) -> None:
        tables_html.append(str(getattr(shown, "data", shown)))

    figure = None
    try:
        with quiet_analytics():
            import pyfolio  # imported here: slow, and it warns about zipline at import time
            import pyfolio.utils

        with quiet_analytics(), mock.patch.object(pyfolio.utils, "display", capture):
            figure = pyfolio.create_returns_tear_sheet(
                returns.astype(float).rename(trader_name),
                benchmark_rets=None
                if benchmark_returns is None
                else benchmark_returns.astype(float).rename(benchmark_name),
                return_fig=True,
            )
            buffer = io.BytesIO()
            figure.savefig(buffer, format="png", dpi=TEARSHEET_DPI, bbox_inches="tight", facecolor="white")
    except Exception as error:  # pyfolio raises many kinds on short or degenerate data
        note = f"pyfolio could not draw the tear sheet ({type(error).__name__}: {error})."
        return TearSheet(None, None, tables_html, " ".join(note.split()))
    finally:
        if figure is not None:
            plt.close(figure)
    png = buffer.getvalue()
    write_bytes_atomic(path, png)
    return TearSheet(path, png, tables_html, None)
