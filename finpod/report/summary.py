"""Text for the report page: the spec summary, the headline cards and the notes."""

from __future__ import annotations

from typing import Any

from finpod.backtest.result import BacktestResult
from finpod.report.html import format_value
from finpod.report.metrics import METRICS, SESSIONS_PER_YEAR, MetricValue
from finpod.report.plots import ROLLING_SHARPE_WINDOW_SESSIONS, rolling_sharpe_window

SPEC_ROWS: tuple[tuple[str, str], ...] = (
    ("Strategy", "name"),
    ("Description", "description"),
    ("Data source", "data.source"),
    ("Dataset", "data.path"),
    ("Universe", "universe"),
    ("Frequency", "frequency"),
    ("Benchmark symbol", "benchmark_symbol"),
    ("Train segment", "segments.train"),
    ("Validation segment", "segments.validation"),
    ("Backtest segment", "segments.backtest"),
    ("Initial capital (USD)", "env.initial_cash_usd"),
    ("Fee rate (fraction of notional)", "env.fee_rate"),
    ("Half spread (bps)", "env.half_spread_bps"),
    ("Max participation (share of bar volume)", "env.max_participation"),
    ("Rebalance band (fraction of equity)", "env.rebalance_band"),
    ("Action mode", "env.action_mode"),
    ("Fill", "env.fill"),
    ("Reward", "env.reward"),
    ("Tournament pool size", "tournament.pool_size"),
    ("Leaderboard size", "tournament.leaderboard_size"),
    ("Budget (env steps)", "tournament.budget_env_steps"),
    ("Ensemble k", "tournament.ensemble_k"),
    ("Seed", "seed"),
)
"""(label, dotted key in the resolved spec) rows of the spec summary; absent keys are left out."""

_UNITS = {info.key: info.unit for info in METRICS}


def _lookup(spec: dict[str, Any], dotted: str) -> Any:
    node: Any = spec
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _show(value: Any) -> str:
    if isinstance(value, list | tuple) and len(value) == 2:
        return f"{value[0]} → {value[1]}"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() else f"{value:.6g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def spec_summary(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """``(label, text)`` rows for the keys of :data:`SPEC_ROWS` present (and not null) in ``spec``."""
    rows = []
    for label, dotted in SPEC_ROWS:
        value = _lookup(spec, dotted)
        if value is not None:
            rows.append((label, _show(value)))
    return rows


def _fmt(metrics: dict[str, MetricValue], key: str) -> str:
    return format_value(metrics[key], _UNITS[key])


def headline(
    primary: str,
    backtest_metrics: dict[str, dict[str, MetricValue]],
    benchmark_name: str,
    validation_metrics: dict[str, dict[str, MetricValue]] | None,
) -> list[tuple[str, str, str]]:
    """Summary-strip cards ``(label, value, detail)`` for the primary trader on the backtest segment."""
    mine = backtest_metrics[primary]
    bench = backtest_metrics.get(benchmark_name)

    def versus(key: str) -> str:
        return f"{benchmark_name}: {_fmt(bench, key)}" if bench is not None else "no benchmark"

    cards = [
        ("Sharpe", _fmt(mine, "sharpe_ratio"), versus("sharpe_ratio")),
        ("Annual return", _fmt(mine, "annual_return"), versus("annual_return")),
        ("Max drawdown", _fmt(mine, "max_drawdown"), versus("max_drawdown")),
        ("Calmar", _fmt(mine, "calmar_ratio"), versus("calmar_ratio")),
        ("Final equity", _fmt(mine, "final_equity_usd"), f"costs paid {_fmt(mine, 'costs_usd')}"),
    ]
    if validation_metrics is not None and primary in validation_metrics:
        cards.append(
            ("Validation Sharpe", _fmt(validation_metrics[primary], "sharpe_ratio"), "selection segment")
        )
    return [
        (f"{label} · {primary}" if index == 0 else label, value, detail)
        for index, (label, value, detail) in enumerate(cards)
    ]


def report_notes(
    backtest: BacktestResult, validation: BacktestResult | None, tearsheet_note: str | None
) -> list[str]:
    """Caveats shown at the end of the report, one sentence each."""
    notes = [
        "Figures come from daily simple returns at each session close, computed with empyrical; ratios are "
        f"annualised with {SESSIONS_PER_YEAR} sessions per year and a zero risk-free rate.",
        "A dash marks an undefined figure (zero volatility, as for cash, or too few sessions).",
        "Costs are the env's model (proportional fee plus half-spread slippage, volume cap); "
        "real fills differ.",
    ]
    if validation is not None:
        notes.append(
            "Traders were selected on the validation segment "
            f"({validation.start.date()} → {validation.end.date()}); "
            f"the backtest segment ({backtest.start.date()} → {backtest.end.date()}) is held out."
        )
    num_sessions = max((len(result.returns) for result in backtest.traders.values()), default=0)
    window = rolling_sharpe_window(num_sessions)
    if window != ROLLING_SHARPE_WINDOW_SESSIONS:
        shown = "not drawn" if window is None else f"drawn with a {window}-session window"
        notes.append(
            f"The backtest has {num_sessions} sessions: the rolling Sharpe is {shown} "
            f"(standard window {ROLLING_SHARPE_WINDOW_SESSIONS})."
        )
    for segment in (backtest, validation):
        if segment is not None:
            notes.extend(f"{segment.segment}: {note}" for note in segment.notes)
    if tearsheet_note is not None:
        notes.append(tearsheet_note)
    return notes
