"""The report's data files: pyfolio-format CSVs per segment, written atomically and read back.

One folder per segment (the backtest segment in the report folder itself, validation in
``validation/``) holds:

- ``returns.csv``: index ``date`` (UTC session), one column per trader/baseline: daily simple returns.
- ``equity.csv``, ``costs.csv``, ``turnover.csv``: same layout: equity (USD) at the session close,
  fees plus slippage paid (USD), traded notional / opening equity (fraction).
- ``positions.csv``: columns ``date``, ``trader``, then one column per symbol and ``cash`` (USD at the
  session close); ``df[df.trader == name].set_index("date")`` minus empty columns is pyfolio's
  positions frame.
- ``transactions.csv``: columns ``timestamp`` (fill time, UTC), ``trader``, ``symbol``, ``amount``
  (shares, + buy / - sell), ``price`` (USD per share): pyfolio's transactions per trader.

:func:`read_segment` rebuilds the :class:`BacktestResult` from these files plus the segment's
metadata stored in ``metrics.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from finpod.backtest.result import BacktestResult, TraderKind, TraderResult
from finpod.errors import DataError
from finpod.report.atomic import write_text_atomic

SERIES_FILES = {
    "returns": "returns.csv",
    "equity_usd": "equity.csv",
    "costs_usd": "costs.csv",
    "turnover": "turnover.csv",
}
"""TraderResult series attribute -> wide CSV file name."""
METRICS_FILE = "metrics.json"
"""A run's figures, verdicts and pick (:func:`finpod.report.writer.write_report`)."""
POSITIONS_FILE = "positions.csv"
TRANSACTIONS_FILE = "transactions.csv"
TRANSACTION_COLUMNS = ["symbol", "amount", "price"]


def _wide(backtest: BacktestResult, attribute: str) -> pd.DataFrame:
    frame = pd.DataFrame({name: getattr(result, attribute) for name, result in backtest.traders.items()})
    frame.index.name = "date"
    return frame


def write_segment(backtest: BacktestResult, folder: Path) -> list[Path]:
    """Write one segment's CSVs (see module doc) into ``folder``; returns the paths written."""
    written = []
    for attribute, file_name in SERIES_FILES.items():
        path = folder / file_name
        write_text_atomic(path, _wide(backtest, attribute).to_csv())
        written.append(path)
    positions = pd.concat(
        [result.positions_usd.assign(trader=name) for name, result in backtest.traders.items()]
    )
    positions.index.name = "date"
    columns = ["trader", *[column for column in positions.columns if column != "trader"]]
    write_text_atomic(folder / POSITIONS_FILE, positions[columns].to_csv())
    transactions = pd.concat(
        [
            result.transactions[TRANSACTION_COLUMNS].assign(trader=name)
            for name, result in backtest.traders.items()
        ]
    )
    transactions.index.name = "timestamp"
    write_text_atomic(folder / TRANSACTIONS_FILE, transactions[["trader", *TRANSACTION_COLUMNS]].to_csv())
    return [*written, folder / POSITIONS_FILE, folder / TRANSACTIONS_FILE]


def _read_csv(path: Path, index_col: str) -> pd.DataFrame:
    if not path.is_file():
        raise DataError(f"{path}: missing report data file; fix: rerun `finpod run` or restore the file")
    frame = pd.read_csv(path, index_col=index_col)
    frame.index = pd.to_datetime(frame.index, utc=True)
    return frame


def read_segment(folder: Path, meta: dict[str, Any]) -> BacktestResult:
    """Rebuild a segment's :class:`BacktestResult` from its CSVs and its ``metrics.json`` metadata.

    Args:
        folder: the segment's folder (see module doc).
        meta: ``metrics.json``'s ``segments.<segment>`` object (start, end, benchmark, capital, kinds).

    Raises:
        DataError: a file is missing or does not list a trader named in ``meta``.
    """
    series = {attribute: _read_csv(folder / name, "date") for attribute, name in SERIES_FILES.items()}
    positions = _read_csv(folder / POSITIONS_FILE, "date")
    transactions = _read_csv(folder / TRANSACTIONS_FILE, "timestamp")
    traders: dict[str, TraderResult] = {}
    for name, trader_meta in meta["traders"].items():
        if name not in series["returns"].columns:
            raise DataError(
                f"{folder / SERIES_FILES['returns']}: no column '{name}'; fix: rerun `finpod run`"
            )
        kind: TraderKind = trader_meta["kind"]
        traders[name] = TraderResult(
            name=name,
            kind=kind,
            returns=series["returns"][name].rename(None),
            equity_usd=series["equity_usd"][name].rename(None),
            positions_usd=positions[positions["trader"] == name]
            .drop(columns="trader")
            .dropna(axis=1, how="all"),
            transactions=transactions[transactions["trader"] == name][TRANSACTION_COLUMNS],
            costs_usd=series["costs_usd"][name].rename(None),
            turnover=series["turnover"][name].rename(None),
        )
    return BacktestResult(
        segment=meta["segment"],
        start=pd.Timestamp(meta["start"], tz="UTC"),
        end=pd.Timestamp(meta["end"], tz="UTC"),
        traders=traders,
        benchmark_name=meta["benchmark_name"],
        initial_cash_usd=float(meta["initial_cash_usd"]),
        notes=list(meta["notes"]),
    )
