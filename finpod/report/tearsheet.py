"""pyfolio-reloaded tear sheets of one trader: returns, positions, transactions, round trips.

finpod draws equity, drawdowns, rolling Sharpe and the monthly heatmap itself, so only the panels
it does not have are taken from pyfolio, each drawn on its own figure in the report's style:

- returns: annual returns, distribution of monthly returns, return quantiles, rolling volatility
  and rolling beta (with the report's rolling window, fitted to the segment's length);
- positions (from ``positions.csv``): long/short exposure, top and median position
  concentration, number of holdings, gross leverage;
- transactions (from ``transactions.csv``): daily turnover, daily traded shares, turnover
  histogram;
- round trips: the lifetime of each round trip (open to close of a position), and its statistics.

pyfolio's tables (performance statistics, worst drawdowns, round-trip summary) are captured from
its ``display`` calls. A panel pyfolio cannot draw, or draws empty, is left out with a note saying
why; nothing here raises for pyfolio errors.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import empyrical as ep
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from finpod.backtest.result import TraderResult
from finpod.report.quiet import quiet_analytics
from finpod.report.style import format_date_axis, new_figure, report_style, save_png

MIN_TEARSHEET_SESSIONS = 2
"""Fewest sessions pyfolio can draw anything from."""
SECTIONS = ("returns", "positions", "transactions", "round trips")
"""Tear sheets, in page order."""


@dataclass(frozen=True)
class SheetPanel:
    """One pyfolio panel of the page.

    Attributes:
        section: one of :data:`SECTIONS`.
        name: file stem under ``plots/``, e.g. ``"pyfolio_exposures"``.
        title: caption.
        path: the PNG written.
        png: its bytes.
    """

    section: str
    name: str
    title: str
    path: Path
    png: bytes


@dataclass(frozen=True)
class TearSheet:
    """What the tear-sheet step produced.

    Attributes:
        panels: the panels drawn, in page order.
        tables_html: pyfolio's HTML tables (performance statistics, worst drawdowns, round trips).
        notes: one sentence per panel or table that could not be drawn, and why.
    """

    panels: list[SheetPanel]
    tables_html: list[str]
    notes: list[str]

    @property
    def note(self) -> str | None:
        """All notes as one string (``metrics.json``'s ``tearsheet_note``), ``None`` when complete."""
        return " ".join(self.notes) if self.notes else None

    @staticmethod
    def joined(parts: Sequence[TearSheet]) -> TearSheet:
        """One tear sheet of ``parts`` drawn for consecutive groups of :data:`SECTIONS`, in order."""
        return TearSheet(
            [panel for part in parts for panel in part.panels],
            [table for part in parts for table in part.tables_html],
            [note for part in parts for note in part.notes],
        )


def import_pyfolio() -> Any:
    """The ``pyfolio`` package with its ``round_trips`` and ``utils`` modules loaded (imported on first
    use, not with this module: slow, and it warns about zipline at import time)."""
    with quiet_analytics():
        import pyfolio
        import pyfolio.round_trips
        import pyfolio.utils
    return pyfolio


def write_tearsheet(
    result: TraderResult,
    benchmark_returns: pd.Series | None,
    *,
    benchmark_name: str,
    rolling_window: int | None,
    plots_dir: Path,
    sections: Collection[str] = SECTIONS,
) -> TearSheet:
    """Draw the pyfolio panels and tables of one trader (see the module doc) into ``plots_dir``.

    Args:
        result: the trader: daily returns, positions (USD, with ``cash``), transactions and equity.
        benchmark_returns: the benchmark's daily returns on the same sessions, or ``None``.
        benchmark_name: the benchmark's name in titles.
        rolling_window: sessions of the rolling volatility and beta windows (``None``: too short).
        plots_dir: where ``pyfolio_<name>.png`` files go.
        sections: the tear sheets to draw, of :data:`SECTIONS` (the performance statistics and worst
            drawdowns tables belong to ``"returns"``); sheets drawn for consecutive groups of sections
            and :meth:`TearSheet.joined` give the sheet of all of them.
    """
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise ValueError(f"unknown tear sheet sections {sorted(unknown)}; use some of {list(SECTIONS)}")
    returns = result.returns.astype(float).rename(result.name)
    if len(returns) < MIN_TEARSHEET_SESSIONS:
        if SECTIONS[0] not in sections:
            return TearSheet([], [], [])  # the note comes with the first section's sheet
        note = f"pyfolio tear sheets skipped: {len(returns)} session(s), needs {MIN_TEARSHEET_SESSIONS}."
        return TearSheet([], [], [note])
    pyfolio = import_pyfolio()
    factor = None if benchmark_returns is None else benchmark_returns.astype(float).rename(benchmark_name)
    positions = result.positions_usd.astype(float)
    # A symbol never held is no position (and a run read back from its CSVs has no such column).
    positions = positions.loc[:, (positions != 0.0).any() | (positions.columns == "cash")]
    # No calendar frequency on the index: pandas would then plot on a period axis, so a run read back
    # from its CSVs (no frequency) would draw a different picture of the same numbers.
    positions = positions.set_axis(_plain_index(positions.index))
    returns = returns.set_axis(_plain_index(returns.index))
    transactions = result.transactions
    sheet = _Sheet(plots_dir, sections)
    plotting = pyfolio.plotting
    if "returns" in sections:
        with sheet.capturing(pyfolio.utils):
            sheet.table(
                "performance statistics",
                lambda: plotting.show_perf_stats(
                    returns,
                    factor,
                    positions=positions,
                    transactions=transactions if len(transactions) else None,
                ),
            )
            sheet.table("worst drawdowns", lambda: plotting.show_worst_drawdown_periods(returns))
    with report_style():
        sheet.panel(
            "returns",
            "annual_returns",
            "Annual returns",
            lambda ax: plotting.plot_annual_returns(returns, ax=ax),
        )
        sheet.panel(
            "returns",
            "monthly_distribution",
            "Distribution of monthly returns",
            lambda ax: plotting.plot_monthly_returns_dist(returns, ax=ax),
        )
        sheet.panel(
            "returns",
            "return_quantiles",
            "Daily, weekly and monthly return quantiles",
            lambda ax: plotting.plot_return_quantiles(returns, ax=ax),
        )
        if rolling_window is None:
            sheet.note(
                "returns",
                f"pyfolio rolling volatility and beta: not drawn, {len(returns)} sessions are too few "
                "for a rolling window.",
            )
        else:
            sheet.panel(
                "returns",
                "rolling_volatility",
                f"Rolling volatility, {rolling_window}-session window",
                lambda ax: _rolling_volatility(returns, factor, rolling_window, ax),
            )
            if factor is not None:
                sheet.panel(
                    "returns",
                    "rolling_beta",
                    f"Rolling beta to {benchmark_name}, {rolling_window}-session window",
                    lambda ax: _rolling_beta(returns, factor, rolling_window, ax),
                )
        sheet.panel(
            "positions",
            "exposures",
            "Long and short exposure (share of equity)",
            lambda ax: plotting.plot_exposures(returns, positions, ax=ax),
        )
        sheet.panel(
            "positions",
            "concentration",
            "Largest and median position (share of equity)",
            lambda ax: plotting.plot_max_median_position_concentration(positions, ax=ax),
        )
        sheet.panel(
            "positions",
            "holdings",
            "Number of holdings per session",
            lambda ax: plotting.plot_holdings(returns, positions, ax=ax),
        )
        sheet.panel(
            "positions",
            "gross_leverage",
            "Gross leverage",
            lambda ax: plotting.plot_gross_leverage(returns, positions, ax=ax),
        )
        if transactions.empty:
            sheet.note("transactions", f"pyfolio transactions and round trips: '{result.name}' never traded.")
        else:
            sheet.panel(
                "transactions",
                "turnover",
                "Daily turnover",
                lambda ax: plotting.plot_turnover(returns, transactions, positions, ax=ax),
            )
            sheet.panel(
                "transactions",
                "daily_volume",
                "Shares traded per session",
                lambda ax: plotting.plot_daily_volume(returns, transactions, ax=ax),
            )
            sheet.panel(
                "transactions",
                "turnover_histogram",
                "Distribution of daily turnover",
                lambda ax: plotting.plot_daily_turnover_hist(transactions, positions, ax=ax),
            )
            if "round trips" in sections:
                sheet.round_trips(pyfolio, transactions, result.equity_usd)
    return TearSheet(sheet.panels, sheet.tables, sheet.notes)


class _Sheet:
    """Collects panels, tables and notes; every pyfolio call is guarded."""

    def __init__(self, plots_dir: Path, sections: Collection[str]) -> None:
        self.plots_dir = plots_dir
        self.sections = sections
        self.panels: list[SheetPanel] = []
        self.tables: list[str] = []
        self.notes: list[str] = []

    @contextlib.contextmanager
    def capturing(self, utils: Any) -> Iterator[None]:
        def capture(*shown: Any, **_: Any) -> None:
            self.tables.extend(str(getattr(item, "data", item)) for item in shown)

        with quiet_analytics(), mock.patch.object(utils, "display", capture):
            yield

    def note(self, section: str, text: str) -> None:
        """Add ``text`` to the notes when ``section`` is drawn here."""
        if section in self.sections:
            self.notes.append(text)

    def table(self, what: str, draw: Callable[[], Any]) -> None:
        try:
            draw()
        except Exception as error:  # pyfolio raises many kinds on short or degenerate data
            self.notes.append(_failure(f"pyfolio {what}", error))

    def panel(self, section: str, name: str, title: str, draw: Callable[[Axes], Any]) -> None:
        if section not in self.sections:
            return
        figure: Figure = new_figure(height_in=3.4)
        axes = figure.add_subplot()
        try:
            with quiet_analytics():
                draw(axes)
        except Exception as error:
            self.notes.append(_failure(f"pyfolio {title.lower()}", error))
            return
        if not _has_data(figure):
            self.notes.append(f"pyfolio {title.lower()}: nothing to draw for this segment.")
            return
        axes.set_title(title)
        path = self.plots_dir / f"pyfolio_{name}.png"
        self.panels.append(SheetPanel(section, f"pyfolio_{name}", title, path, save_png(figure, path)))

    def round_trips(self, pyfolio: Any, transactions: pd.DataFrame, equity: pd.Series) -> None:
        try:
            with quiet_analytics():
                trips = pyfolio.round_trips.extract_round_trips(transactions.copy(), portfolio_value=equity)
        except Exception as error:
            self.notes.append(_failure("pyfolio round trips", error))
            return
        if trips.empty:
            self.notes.append("pyfolio round trips: no position was opened and closed in this segment.")
            return
        with self.capturing(pyfolio.utils):
            self.table("round-trip statistics", lambda: pyfolio.round_trips.print_round_trip_stats(trips))
        self.panel(
            "round trips",
            "round_trip_lifetimes",
            f"Round-trip lifetimes ({len(trips)} round trips)",
            lambda ax: pyfolio.plotting.plot_round_trip_lifetimes(trips, ax=ax),
        )


def _rolling_volatility(returns: pd.Series, factor: pd.Series | None, window: int, axes: Axes) -> None:
    """Annualised rolling volatility of the trader (and the benchmark), fraction."""
    for series, style in ((returns, "-"), (factor, "--")):
        if series is not None:
            rolling = ep.roll_annual_volatility(series, window=window)
            axes.plot(_dates(rolling.index), rolling.to_numpy(), linestyle=style, label=str(series.name))
    axes.set_ylabel("Annualised volatility")
    format_date_axis(axes)
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2)


def _rolling_beta(returns: pd.Series, factor: pd.Series, window: int, axes: Axes) -> None:
    """Rolling beta of the trader's daily returns to the benchmark's."""
    aligned = pd.concat([returns, factor], axis=1, join="inner")
    mine, theirs = aligned.iloc[:, 0], aligned.iloc[:, 1]
    beta = mine.rolling(window).cov(theirs) / theirs.rolling(window).var()
    axes.plot(_dates(beta.index), beta.to_numpy(), label=f"beta of {returns.name}")
    axes.axhline(1.0, linestyle="--", linewidth=0.8, color="#6b7280")
    axes.set_ylabel("Beta")
    format_date_axis(axes)


def _plain_index(index: pd.Index) -> pd.DatetimeIndex:
    """The same session stamps without a frequency or a name."""
    return pd.DatetimeIndex(list(index))


def _dates(index: pd.Index) -> pd.DatetimeIndex:
    dates = pd.DatetimeIndex(index)
    return dates.tz_convert(None) if dates.tz is not None else dates


def _has_data(figure: Figure) -> bool:
    """True when some axes of ``figure`` hold a line, patch, image or collection with points."""
    return any(axes.has_data() for axes in figure.axes)


def _failure(what: str, error: Exception) -> str:
    text = f"{what}: not drawn ({type(error).__name__}: {error})."
    return " ".join(text.split())
