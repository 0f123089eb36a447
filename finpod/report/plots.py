"""The report's figures: equity, drawdowns, rolling Sharpe, monthly returns, holdings, tournament.

Each ``*_figure`` function builds one matplotlib figure from backtest data; :func:`render_plots`
builds them all with one style, saves each as ``<name>.png`` and returns the PNG bytes. Dates on the
x axes are session dates (UTC); money is USD; returns and weights are shown in percent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.ticker as mticker
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from finpod.backtest.result import BacktestResult, TraderResult
from finpod.report.leaderboard import LeaderboardRecord
from finpod.report.metrics import SESSIONS_PER_YEAR
from finpod.report.style import (
    INK,
    MUTED_INK,
    colour_for,
    format_date_axis,
    new_figure,
    report_style,
    save_png,
)

ROLLING_SHARPE_WINDOW_SESSIONS = 63
"""Rolling Sharpe window, sessions (about one quarter)."""
MIN_ROLLING_WINDOW_SESSIONS = 10
"""Shortest rolling window drawn; a shorter segment gets a 'too short' panel instead."""
TOP_HOLDINGS = 8
"""Symbols shown individually in the holdings plot; the rest are summed as 'other'."""
TRADER_ZORDER = 20.0
"""Drawing order of the first trader's line; each later trader is drawn ABOVE it, thinner and dashed,
so an ensemble that tracks the best agent stays visible on top of it (baselines are below all)."""
TRADER_LINESTYLES: tuple[Any, ...] = ("-", (0, (6, 2)), (0, (2, 1.5)), (0, (6, 2, 1.5, 2)))
"""Solid for the selected agent, then dashed, dotted, dash-dot for the other traders."""
TRADER_LINEWIDTHS = (2.6, 1.9, 1.6, 1.4)
BASELINE_ZORDER = 2.0
MONTH_LABELS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True)
class PlotImage:
    """One rendered figure of the report.

    Attributes:
        name: file stem, e.g. ``"equity"``.
        title: caption shown above the image in the HTML report.
        path: where the PNG was written.
        png: the PNG bytes.
    """

    name: str
    title: str
    path: Path
    png: bytes


def _naive_dates(index: pd.Index) -> pd.DatetimeIndex:
    """Session timestamps as tz-naive dates for matplotlib (UTC wall time)."""
    dates = pd.DatetimeIndex(index)
    return dates.tz_convert(None) if dates.tz is not None else dates


@dataclass(frozen=True)
class LineStyle:
    """How one trader or baseline is drawn in every line plot."""

    name: str
    result: TraderResult
    colour: str
    linestyle: Any
    linewidth: float
    zorder: float

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``Axes.plot``."""
        return {
            "label": self.name,
            "color": self.colour,
            "linestyle": self.linestyle,
            "linewidth": self.linewidth,
            "zorder": self.zorder,
        }


def _styled_lines(backtest: BacktestResult) -> list[LineStyle]:
    """One style per trader: the selected agent solid and bold, other traders dashed ABOVE it, baselines
    thin and dashed below all."""
    counters = {"trader": 0, "baseline": 0}
    lines = []
    for name, result in backtest.traders.items():
        index = counters[result.kind]
        counters[result.kind] += 1
        colour = colour_for(name, result.kind, index)
        if result.kind == "trader":
            style = TRADER_LINESTYLES[index % len(TRADER_LINESTYLES)]
            width = TRADER_LINEWIDTHS[min(index, len(TRADER_LINEWIDTHS) - 1)]
            lines.append(LineStyle(name, result, colour, style, width, TRADER_ZORDER + index))
        else:
            lines.append(LineStyle(name, result, colour, "--", 1.4, BASELINE_ZORDER))
    return lines


def _legend_below(axes: Axes, entries: int) -> None:
    """The legend in one row under the axes, so it never covers a curve."""
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=min(entries, 6), frameon=False)


def _message_panel(axes: Axes, message: str) -> None:
    """Replace a plot with a centred message (empty or too-short input)."""
    axes.set_axis_off()
    axes.text(0.5, 0.5, message, ha="center", va="center", fontsize=12, color=MUTED_INK, wrap=True)


def equity_figure(backtest: BacktestResult, *, log_scale: bool) -> Figure:
    """Equity of every trader and baseline at each session close, USD (optionally log y axis)."""
    figure = new_figure()
    axes = figure.add_subplot()
    for line in _styled_lines(backtest):
        axes.plot(
            _naive_dates(line.result.equity_usd.index), line.result.equity_usd.to_numpy(), **line.kwargs()
        )
    dollars = mticker.FuncFormatter(lambda value, _: f"${value:,.0f}")
    if log_scale:
        axes.set_yscale("log")
        # Equity rarely spans a decade: evenly spaced dollar ticks read better than powers of ten.
        axes.yaxis.set_major_locator(mticker.MaxNLocator(nbins=6))
        axes.yaxis.set_minor_locator(mticker.NullLocator())
    axes.yaxis.set_major_formatter(dollars)
    axes.set_title(f"Equity, {backtest.segment} segment" + (" (log scale)" if log_scale else ""))
    axes.set_ylabel("Equity (USD)")
    axes.set_xlabel("Session")
    format_date_axis(axes)
    _legend_below(axes, len(backtest.traders))
    return figure


def drawdown_figure(backtest: BacktestResult) -> Figure:
    """Underwater curve: equity below its running peak, percent, per trader and baseline."""
    figure = new_figure(height_in=3.6)
    axes = figure.add_subplot()
    for line in _styled_lines(backtest):
        wealth = (1.0 + line.result.returns.astype(float)).cumprod()
        underwater = wealth / wealth.cummax().clip(lower=1.0) - 1.0
        dates = _naive_dates(underwater.index)
        axes.plot(dates, 100.0 * underwater.to_numpy(), **line.kwargs())
        if line.result.kind == "trader":
            axes.fill_between(dates, 100.0 * underwater.to_numpy(), 0.0, color=line.colour, alpha=0.08)
    axes.set_title(f"Drawdown from peak, {backtest.segment} segment")
    axes.set_ylabel("Drawdown (%)")
    axes.set_xlabel("Session")
    format_date_axis(axes)
    _legend_below(axes, len(backtest.traders))
    return figure


def rolling_sharpe_window(num_sessions: int) -> int | None:
    """Window for the rolling Sharpe: the standard one, shrunk for short segments, or ``None``.

    A segment shorter than twice :data:`ROLLING_SHARPE_WINDOW_SESSIONS` uses half its length; below
    :data:`MIN_ROLLING_WINDOW_SESSIONS` there is nothing meaningful to draw.
    """
    window = min(ROLLING_SHARPE_WINDOW_SESSIONS, num_sessions // 2)
    return window if window >= MIN_ROLLING_WINDOW_SESSIONS else None


def rolling_sharpe_figure(backtest: BacktestResult) -> Figure:
    """Annualised Sharpe ratio over a trailing window of sessions, per trader and baseline."""
    figure = new_figure(height_in=3.6)
    axes = figure.add_subplot()
    num_sessions = max((len(result.returns) for result in backtest.traders.values()), default=0)
    window = rolling_sharpe_window(num_sessions)
    if window is None:
        _message_panel(
            axes,
            f"Rolling Sharpe needs at least {2 * MIN_ROLLING_WINDOW_SESSIONS} "
            f"sessions; this segment has {num_sessions}.",
        )
        return figure
    for line in _styled_lines(backtest):
        rolling = line.result.returns.astype(float).rolling(window)
        std = rolling.std().where(lambda value: value > 0.0)
        sharpe = rolling.mean() / std * math.sqrt(SESSIONS_PER_YEAR)
        if sharpe.notna().any():
            axes.plot(_naive_dates(sharpe.index), sharpe.to_numpy(), **line.kwargs())
    axes.axhline(0.0, color=INK, linewidth=0.8)
    axes.set_title(f"Rolling Sharpe ratio, {window}-session window, {backtest.segment} segment")
    axes.set_ylabel("Sharpe (annualised)")
    axes.set_xlabel("Session")
    format_date_axis(axes)
    _legend_below(axes, len(backtest.traders))
    return figure


def monthly_returns(returns: pd.Series) -> pd.DataFrame:
    """Compounded simple return of each calendar month: years as rows, months 1..12 as columns."""
    dates = pd.DatetimeIndex(returns.index)
    grouped = (1.0 + returns.astype(float)).groupby([dates.year, dates.month]).prod() - 1.0
    table = grouped.unstack()
    return table.reindex(columns=range(1, 13))


def monthly_heatmap_figure(result: TraderResult) -> Figure:
    """Heatmap of one trader's monthly returns, percent (red losses, green gains)."""
    table = monthly_returns(result.returns)
    figure = new_figure(height_in=max(2.0, 0.9 + 0.55 * len(table)))
    axes = figure.add_subplot()
    if table.empty:
        _message_panel(axes, "No sessions in this segment.")
        return figure
    values = 100.0 * table.to_numpy(dtype=float)
    finite = values[np.isfinite(values)]
    limit = max(float(np.abs(finite).max()) if finite.size else 1.0, 0.5)
    image = axes.imshow(values, cmap="RdYlGn", vmin=-limit, vmax=limit, aspect="auto")
    for row, column in np.argwhere(np.isfinite(values)):
        axes.text(
            column, row, f"{values[row, column]:+.1f}", ha="center", va="center", fontsize=8.5, color=INK
        )
    for row, column in np.argwhere(~np.isfinite(values)):
        axes.text(column, row, "–", ha="center", va="center", fontsize=8.5, color=MUTED_INK)
    axes.set_xticks(range(12), MONTH_LABELS)
    axes.set_yticks(range(len(table)), [str(year) for year in table.index])
    axes.grid(False)
    first, last = pd.DatetimeIndex(result.returns.index)[[0, -1]]
    axes.set_title(f"Monthly returns of '{result.name}' (%), {first:%Y-%m-%d} → {last:%Y-%m-%d}")
    axes.set_xlabel("Month (–: no session of this segment in that month)")
    axes.set_ylabel("Year")
    colour_bar = figure.colorbar(image, ax=axes, pad=0.01)
    colour_bar.set_label("Return (%)")
    return figure


def holdings_weights(positions_usd: pd.DataFrame, top: int) -> pd.DataFrame:
    """Weights of equity per session: the ``top`` symbols by mean weight, ``other``, then ``cash``.

    Args:
        positions_usd: pyfolio positions (sessions x symbols plus ``cash``), USD.
        top: number of symbols shown individually.

    Returns:
        Fractions of session equity, one column per shown symbol, ``other`` (if any) and ``cash``.
    """
    equity = positions_usd.sum(axis=1).where(lambda value: value != 0.0)
    weights = positions_usd.div(equity, axis=0).fillna(0.0)
    symbols = weights.drop(columns=["cash"], errors="ignore")
    shown = symbols.mean().sort_values(ascending=False).index[:top]
    columns = {str(symbol): symbols[symbol] for symbol in shown}
    rest = symbols.drop(columns=shown)
    if not rest.empty:
        columns["other"] = rest.sum(axis=1)
    columns["cash"] = weights["cash"] if "cash" in weights else pd.Series(0.0, index=weights.index)
    return pd.DataFrame(columns, index=weights.index)


def holdings_figure(result: TraderResult) -> Figure:
    """Stacked area of one trader's portfolio weights over time, percent of equity."""
    figure = new_figure(height_in=3.8)
    axes = figure.add_subplot()
    if result.positions_usd.empty:
        _message_panel(axes, f"'{result.name}' has no recorded positions.")
        return figure
    weights = holdings_weights(result.positions_usd, TOP_HOLDINGS)
    palette = [f"C{index}" for index in range(len(weights.columns))]
    special = {"other": "#cbd5e1", "cash": "#e5e7eb"}
    colours = [special.get(column, palette[index]) for index, column in enumerate(weights.columns)]
    axes.stackplot(
        _naive_dates(weights.index),
        100.0 * weights.to_numpy().T,
        labels=weights.columns,
        colors=colours,
        linewidth=0.0,
    )
    axes.set_ylim(0.0, 100.0)
    axes.grid(False)
    axes.set_title(f"Holdings of '{result.name}' (top {TOP_HOLDINGS} symbols, other, cash)")
    axes.set_ylabel("Weight of equity (%)")
    axes.set_xlabel("Session")
    format_date_axis(axes)
    handles, labels = axes.get_legend_handles_labels()
    axes.legend(
        handles[::-1], labels[::-1], loc="center left", bbox_to_anchor=(1.0, 0.5)
    )  # top of stack first
    return figure


def leaderboard_figure(history: list[LeaderboardRecord]) -> Figure:
    """The tournament over time: best validation score and every entry's score vs env steps."""
    figure = new_figure(height_in=3.6)
    axes = figure.add_subplot()
    if not history:
        _message_panel(axes, "No tournament history: this run recorded no leaderboard snapshots.")
        return figure
    for record in history:
        axes.scatter(
            [record.env_steps] * len(record.scores),
            record.scores,
            s=10,
            color="#93c5fd",
            alpha=0.6,
            linewidths=0.0,
        )
    best = [(record.env_steps, record.best_score) for record in history if record.best_score is not None]
    if best:
        steps, scores = zip(*best, strict=True)
        axes.step(steps, scores, where="post", color=INK, linewidth=2.0, label="best entry")
    axes.scatter([], [], s=10, color="#93c5fd", label="leaderboard entries")
    axes.xaxis.set_major_formatter(mticker.EngFormatter())
    wall_minutes = history[-1].elapsed_s / 60.0
    axes.set_title(f"Tournament leaderboard over time ({wall_minutes:.1f} min wall time)")
    axes.set_xlabel("Env steps (all pods)")
    axes.set_ylabel("Validation score")
    axes.legend(loc="lower right")
    return figure


def primary_trader(backtest: BacktestResult) -> TraderResult:
    """The trader the detailed plots describe: the first of kind ``"trader"`` (the selected agent).

    It is never chosen by backtest performance; with no learned trader, the first result is used.
    """
    for result in backtest.traders.values():
        if result.kind == "trader":
            return result
    return next(iter(backtest.traders.values()))


def render_plots(
    backtest: BacktestResult, history: list[LeaderboardRecord], plots_dir: Path
) -> list[PlotImage]:
    """Build, save (``plots_dir/<name>.png``) and return every report figure, in report order."""
    primary = primary_trader(backtest)
    with report_style():
        builders: list[tuple[str, str, Figure]] = [
            ("equity", "Equity curves", equity_figure(backtest, log_scale=False)),
            ("equity_log", "Equity curves, log scale", equity_figure(backtest, log_scale=True)),
            ("drawdown", "Drawdowns", drawdown_figure(backtest)),
            ("rolling_sharpe", "Rolling Sharpe ratio", rolling_sharpe_figure(backtest)),
            ("monthly_returns", f"Monthly returns of {primary.name}", monthly_heatmap_figure(primary)),
            ("holdings", f"Holdings of {primary.name}", holdings_figure(primary)),
            ("leaderboard", "Tournament leaderboard over time", leaderboard_figure(history)),
        ]
        return [
            PlotImage(name, title, plots_dir / f"{name}.png", save_png(figure, plots_dir / f"{name}.png"))
            for name, title, figure in builders
        ]
