"""The numbers behind the figures, and figures that degrade gracefully on short or empty input."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from finpod.report.leaderboard import parse_entries, parse_history
from finpod.report.plots import (
    MIN_ROLLING_WINDOW_SESSIONS,
    ROLLING_SHARPE_WINDOW_SESSIONS,
    drawdown_figure,
    equity_figure,
    holdings_weights,
    monthly_heatmap_figure,
    monthly_returns,
    primary_trader,
    render_plots,
    rolling_sharpe_figure,
    rolling_sharpe_window,
)
from report.synthetic import make_backtest, sessions

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_monthly_returns_compound_daily_returns() -> None:
    index = pd.DatetimeIndex(["2021-01-04", "2021-01-05", "2021-02-01"], tz="UTC")
    table = monthly_returns(pd.Series([0.10, -0.05, 0.02], index=index))
    assert table.loc[2021, 1] == pytest.approx(1.10 * 0.95 - 1.0)
    assert table.loc[2021, 2] == pytest.approx(0.02)
    assert list(table.columns) == list(range(1, 13))
    assert np.isnan(table.loc[2021, 3])


def test_holdings_weights_sum_to_one_with_other_and_cash() -> None:
    index = sessions("2021-01-04", 2)
    positions = pd.DataFrame(
        {"A": [50.0, 10.0], "B": [30.0, 60.0], "C": [10.0, 10.0], "cash": [10.0, 20.0]}, index=index
    )
    weights = holdings_weights(positions, top=1)
    assert list(weights.columns) == ["B", "other", "cash"]
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    assert weights.loc[index[0], "other"] == pytest.approx(0.6)
    assert weights.loc[index[1], "cash"] == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("num_sessions", "expected"),
    [
        (250, ROLLING_SHARPE_WINDOW_SESSIONS),
        (60, 30),
        (2 * MIN_ROLLING_WINDOW_SESSIONS, MIN_ROLLING_WINDOW_SESSIONS),
        (2 * MIN_ROLLING_WINDOW_SESSIONS - 1, None),
        (0, None),
    ],
)
def test_rolling_sharpe_window_shrinks_then_gives_up(num_sessions: int, expected: int | None) -> None:
    assert rolling_sharpe_window(num_sessions) == expected


def test_primary_trader_is_the_first_learned_trader() -> None:
    backtest = make_backtest(num_sessions=20)
    order = ["cash", "ensemble_top3", "best"]
    reordered = dataclasses.replace(backtest, traders={name: backtest.traders[name] for name in order})
    assert primary_trader(reordered).name == "ensemble_top3"
    only_baselines = dataclasses.replace(backtest, traders={"market": backtest.traders["market"]})
    assert primary_trader(only_baselines).name == "market"


def test_short_segment_and_empty_history_still_give_every_png(tmp_path: Path) -> None:
    plots = render_plots(make_backtest(num_sessions=3), [], tmp_path)
    assert [plot.name for plot in plots] == [
        "equity",
        "equity_log",
        "drawdown",
        "rolling_sharpe",
        "monthly_returns",
        "holdings",
        "leaderboard",
    ]
    for plot in plots:
        assert plot.png.startswith(PNG_MAGIC)
        assert plot.path.read_bytes() == plot.png


def test_leaderboard_records_accept_the_engine_shapes() -> None:
    history = parse_history(
        [
            {"elapsed_s": 9.0, "env_steps": 200, "best_score": 0.5, "scores": (0.5, 0.1)},
            {"elapsed_s": 3.0, "env_steps": 100, "best_score": None, "scores": ()},
        ]
    )
    assert [record.env_steps for record in history] == [100, 200]
    entries = parse_entries(
        [
            {"rank": 2, "pod_id": 4, "parent_id": None, "generation": 0, "score": 0.1, "snapshot": "x.pt"},
            {"rank": 1, "pod_id": 7, "parent_id": 4, "generation": 1, "score": 0.5},
        ]
    )
    assert [(entry.pod_id, entry.parent_id) for entry in entries] == [("7", "4"), ("4", None)]


@pytest.mark.parametrize(
    "draw",
    [
        lambda backtest: equity_figure(backtest, log_scale=False),
        lambda backtest: equity_figure(backtest, log_scale=True),
        drawdown_figure,
        rolling_sharpe_figure,
    ],
    ids=["equity", "equity_log", "drawdown", "rolling_sharpe"],
)
def test_legend_is_below_the_curves_and_the_ensemble_is_drawn_above_best(draw: Any) -> None:
    figure = draw(make_backtest(num_sessions=150))
    figure.canvas.draw()
    (axes,) = figure.axes
    legend = axes.get_legend()
    assert legend is not None
    # the whole legend lies under the plotting area: it covers no curve
    assert legend.get_window_extent().y1 <= axes.get_window_extent().y0
    lines = {line.get_label(): line for line in axes.get_lines()}
    assert {"best", "ensemble_top3", "equal_weight", "market"} <= set(lines)  # cash: no rolling Sharpe
    assert lines["ensemble_top3"].get_zorder() > lines["best"].get_zorder()
    baselines = [lines[name].get_zorder() for name in ("equal_weight", "market", "cash") if name in lines]
    assert max(baselines) < lines["best"].get_zorder()
    assert lines["ensemble_top3"].get_linestyle() != lines["best"].get_linestyle()


def test_monthly_heatmap_marks_and_explains_months_outside_the_segment() -> None:
    best = make_backtest(num_sessions=40).traders["best"]  # 2020-05-26 .. mid July: 3 of 12 months
    figure = monthly_heatmap_figure(best)
    (axes, _colour_bar) = figure.axes
    months = pd.DatetimeIndex(best.returns.index).month.unique()
    cells = [text.get_text() for text in axes.texts]
    assert cells.count("–") == 12 - len(months)
    assert len(cells) == 12
    assert "no session of this segment in that month" in axes.get_xlabel()
    assert "2020-05-26" in axes.get_title()
