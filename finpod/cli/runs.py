"""``finpod runs ls|compare``: the runs under a reports folder, and several runs side by side."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from finpod.cli.output import out_console, print_json

if TYPE_CHECKING:  # pandas loads with the catalog, not for --help
    import pandas as pd

app = typer.Typer(no_args_is_help=True)
PERCENT = ("annual_return", "max_drawdown", "cumulative_return", "annual_volatility")


@app.command("ls")
def list_command(
    folder: Annotated[
        Path | None, typer.Argument(help="reports folder (default: ./reports, or $FINPOD_HOME/reports)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list instead of a table.")] = False,
) -> None:
    """One line per run: status, primary trader's backtest Sharpe, return, drawdown, validation Sharpe."""
    from finpod.catalog import runs

    table = runs(folder)
    if as_json:
        print_json(_records(table.reset_index()))
        return
    out_console().print(_rich_table(table.drop(columns=["path"]), "runs", index="run_id"))


@app.command("compare")
def compare_command(
    run_dirs: Annotated[list[Path], typer.Argument(help="two or more run folders")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Backtest figures of every trader of several runs side by side, and the settings that differ."""
    from finpod.catalog import compare

    metrics, spec_diff = compare(run_dirs)
    if as_json:
        print_json(
            {
                "metrics": _records(metrics.reset_index()),
                "spec_diff": {key: dict(row) for key, row in spec_diff.iterrows()},
            }
        )
        return
    console = out_console()
    console.print(_rich_table(metrics.reset_index(), "backtest figures", index=None))
    if spec_diff.empty:
        console.print("the runs' resolved specs are identical")
    else:
        console.print(_rich_table(spec_diff.reset_index(), "settings that differ", index=None))


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    text = frame.to_json(orient="records", date_format="iso")
    records: list[dict[str, Any]] = json.loads(text)
    return records


def _rich_table(frame: pd.DataFrame, title: str, *, index: str | None) -> Table:
    table = Table(title=title)
    data = frame.reset_index() if index is not None else frame
    for column in data.columns:
        table.add_column(
            str(column), no_wrap=True, justify="left" if data[column].dtype == object else "right"
        )
    for row in data.itertuples(index=False):
        table.add_row(*(_cell(column, value) for column, value in zip(data.columns, row, strict=True)))
    return table


def _cell(column: str, value: Any) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        return f"{value:+.2%}" if column in PERCENT else f"{value:+.3f}"
    return "-" if value is None else str(value)
