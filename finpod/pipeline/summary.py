"""The summary table printed at the end of a run (and by ``finpod backtest``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from finpod.backtest.result import BacktestResult
from finpod.report import metrics_table
from finpod.report.summary import page_caveats
from finpod.report.verdict import LINEAR_NAME, pick_verdict, segment_verdicts, validation_trial_scores

PERCENT_COLUMNS = ("cumulative_return", "annual_return", "annual_volatility", "max_drawdown")
RATIO_COLUMNS = ("sharpe_ratio", "sortino_ratio", "calmar_ratio")
HEADERS = {
    "cumulative_return": "return",
    "annual_return": "ann. ret",
    "annual_volatility": "ann. vol",
    "max_drawdown": "max DD",
    "sharpe_ratio": "Sharpe",
    "sortino_ratio": "Sortino",
    "calmar_ratio": "Calmar",
}


def segment_table(backtest: BacktestResult, validation: BacktestResult | None = None) -> Table:
    """A rich table: one row per trader and baseline; backtest figures (and validation Sharpe)."""
    table = Table(title=f"{backtest.segment} {backtest.start.date()} .. {backtest.end.date()}")
    table.add_column("trader", no_wrap=True)
    for key in (*PERCENT_COLUMNS, *RATIO_COLUMNS):
        table.add_column(HEADERS[key], justify="right")
    if validation is not None:
        table.add_column("val. Sharpe", justify="right")
    figures = metrics_table(backtest)
    val_sharpe = metrics_table(validation)["sharpe_ratio"].to_dict() if validation is not None else None
    for name, row in figures.to_dict(orient="index").items():
        cells = [_fmt(float(row[key]), percent=True) for key in PERCENT_COLUMNS]
        cells += [_fmt(float(row[key]), percent=False) for key in RATIO_COLUMNS]
        if val_sharpe is not None:
            cells.append(_fmt(float(val_sharpe.get(name, math.nan)), percent=False))
        table.add_row(str(name), *cells)
    return table


def summary_dict(
    backtest: BacktestResult, validation: BacktestResult | None, run_dir: Path | None = None
) -> dict[str, Any]:
    """The summary as plain JSON-ready data: segment dates and every trader's figures (NaN -> None).

    Keys: ``segment``, ``start``, ``end`` (ISO dates), ``traders`` (``{name: {metric: number}}``,
    fractions and ratios as in ``metrics.json``), ``validation_sharpe`` (``{name: number}``, when a
    validation result is given), ``notes`` and ``verdict`` (``{trader: verdict}`` against equal
    weight, as in ``metrics.json``; the DSR counts the trials of ``run_dir``'s tournament log),
    ``verdict_vs_linear`` and ``pick`` (:func:`~finpod.report.verdict.pick_verdict`; None without a
    validation result).
    """
    figures = metrics_table(backtest).to_dict(orient="index")
    out: dict[str, Any] = {
        "segment": backtest.segment,
        "start": backtest.start.date().isoformat(),
        "end": backtest.end.date().isoformat(),
        "traders": {str(name): {k: _plain(v) for k, v in row.items()} for name, row in figures.items()},
        "notes": list(backtest.notes),
        "caveats": page_caveats(backtest, validation),
    }
    if validation is not None:
        sharpe = metrics_table(validation)["sharpe_ratio"].to_dict()
        out["validation_sharpe"] = {str(name): _plain(value) for name, value in sharpe.items()}
    trials = [] if run_dir is None else validation_trial_scores(run_dir)
    out["verdict"] = {name: verdict.to_json() for name, verdict in segment_verdicts(backtest, trials).items()}
    versus_linear = segment_verdicts(backtest, trials, LINEAR_NAME)
    out["verdict_vs_linear"] = {name: verdict.to_json() for name, verdict in versus_linear.items()}
    pick = None if validation is None else pick_verdict(validation)
    out["pick"] = None if pick is None else pick.to_json()
    return out


def print_summary(
    console: Console,
    backtest: BacktestResult,
    validation: BacktestResult | None,
    report_html: Path | None,
    run_dir: Path | None = None,
) -> None:
    """Print the segment table, two verdict lines per learned trader (against equal weight, then
    against the linear baseline when the segment has it), the run's pick (:func:`pick_verdict`: the
    selected trader, or equal weight when it did not beat it on validation), the notes and the
    report's path.

    The verdict's DSR counts the validation scores in ``run_dir``'s tournament log (none: no DSR).
    """
    console.print(segment_table(backtest, validation))
    trials = [] if run_dir is None else validation_trial_scores(run_dir)
    for verdict in segment_verdicts(backtest, trials).values():
        console.print(f"verdict: {verdict.sentence}", soft_wrap=True, markup=False)
    for verdict in segment_verdicts(backtest, trials, LINEAR_NAME).values():
        console.print(f"verdict: {verdict.sentence}", soft_wrap=True, markup=False)
    pick = None if validation is None else pick_verdict(validation)
    if pick is not None:
        console.print(pick.sentence, soft_wrap=True, markup=False)
    for caveat in page_caveats(backtest, validation):
        console.print(f"caveat: {caveat}", soft_wrap=True, markup=False)
    for note in backtest.notes:
        console.print(f"note: {note}")
    if report_html is not None:
        console.print(f"report: {report_html}", soft_wrap=True)


def _plain(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def _fmt(value: float, *, percent: bool) -> str:
    if not math.isfinite(value):
        return "-"
    return f"{value:+.2%}" if percent else f"{value:+.2f}"
