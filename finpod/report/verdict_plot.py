"""The verdict's figure: each learned trader's excess return over equal weight, session by session."""

from __future__ import annotations

from pathlib import Path

import matplotlib.ticker as mticker
import pandas as pd
from matplotlib.figure import Figure

from finpod.backtest.result import BacktestResult
from finpod.report.plots import PlotImage
from finpod.report.style import MUTED_INK, colour_for, format_date_axis, new_figure, report_style, save_png
from finpod.report.verdict import BENCHMARK_NAME, excess_return_curve

PLOT_NAME = "excess_return"
"""File stem of the figure (``plots/excess_return.png``)."""


def excess_return_figure(backtest: BacktestResult) -> Figure:
    """Wealth of each learned trader over equal weight's, minus 1 (0 = level with equal weight)."""
    figure = new_figure()
    axes = figure.add_subplot()
    benchmark = backtest.traders.get(BENCHMARK_NAME)
    traders = [result for result in backtest.traders.values() if result.kind == "trader"]
    if benchmark is None or not traders:
        axes.set_axis_off()
        axes.text(0.5, 0.5, "no learned trader or no equal-weight baseline", ha="center", color=MUTED_INK)
        return figure
    for index, result in enumerate(traders):
        curve = excess_return_curve(result.returns, benchmark.returns)
        dates = pd.DatetimeIndex(curve.index).tz_localize(None)
        axes.plot(dates, curve.to_numpy(), label=result.name, color=colour_for(result.name, "trader", index))
    axes.axhline(0.0, color=MUTED_INK, linewidth=1.0, linestyle="--")
    axes.yaxis.set_major_formatter(mticker.PercentFormatter(xmax=1.0))
    axes.set_title(f"Excess return over equal weight, {backtest.segment} segment")
    axes.set_ylabel("Wealth / equal weight's - 1")
    axes.set_xlabel("Session")
    format_date_axis(axes)
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=min(len(traders), 6), frameon=False)
    return figure


def render_excess_return_plot(backtest: BacktestResult, plots_dir: Path) -> PlotImage:
    """Build and save ``plots_dir/excess_return.png``."""
    path = plots_dir / f"{PLOT_NAME}.png"
    with report_style():
        png = save_png(excess_return_figure(backtest), path)
    return PlotImage(PLOT_NAME, "Excess return over equal weight (the verdict's curve)", path, png)
