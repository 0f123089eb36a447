"""``finpod data ...``: synth, import, fetch, info."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.table import Table

from finpod.alpaca_endpoints import ALPACA_DATA_URL
from finpod.cli.output import err_console, out_console
from finpod.data.choices import (
    ALPHA_ANNUAL,
    DEFAULT_START,
    BarAnchor,
    DuplicatePolicy,
    OutlierPolicy,
    SignalKind,
)
from finpod.errors import SpecError
from finpod.net import DEFAULT_TIMEOUTS

if TYPE_CHECKING:  # the data layer (pandas, pyarrow, torch) loads in the commands, not for --help
    from finpod.data.dataset_info import DatasetInfo
    from finpod.data.store import Manifest

app = typer.Typer(no_args_is_help=True)
Frequency = Literal["1min", "1d"]
"""Bar sizes finpod supports (a choice on every ``--freq``)."""


def _date(value: str, flag: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise SpecError(f"{flag} {value!r} is not a date; write YYYY-MM-DD") from None


def _splits_table(value: str) -> Path:
    kind, sep, file = value.partition("=")
    if kind.strip() != "splits" or not sep or not file.strip():
        raise SpecError(f"--adjust {value!r}: write --adjust splits=FILE (a symbol,date,ratio CSV)")
    return Path(file.strip()).expanduser()


def _raw_prices(value: str | None) -> bool:
    if value is None:
        return False
    if value != "none":
        raise SpecError(
            f"--adjustment {value!r}: the only setting is none (import raw prices); to adjust, pass "
            "--adjust splits=FILE"
        )
    return True


def parse_column_map(text: str) -> dict[str, str]:
    """``"Date=timestamp,Last=close"`` -> ``{"Date": "timestamp", "Last": "close"}``.

    Raises:
        SpecError: a pair is not ``old=new``.
    """
    mapping: dict[str, str] = {}
    for pair in text.split(","):
        old, sep, new = pair.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise SpecError(
                f"--column-map {pair!r}: write old=new pairs separated by commas, e.g. Date=timestamp"
            )
        mapping[old.strip()] = new.strip()
    return mapping


def _print_manifest(manifest: Manifest, out: Path) -> None:
    out_console().print(
        f"wrote [bold]{out}[/]: {manifest.rows:,} {manifest.frequency} bars, "
        f"{len(manifest.symbols)} symbols, {manifest.first_bar} .. {manifest.last_bar}, "
        f"adjustment {manifest.adjustment}"
    )
    if manifest.repairs:
        repairs = ", ".join(f"{name} {count:,}" for name, count in manifest.repairs.items())
        out_console().print(f"repairs: {repairs}")
    for note in manifest.notes:
        out_console().print(f"note: {note}")


@app.command("synth")
def synth(
    legacy_out: Annotated[
        Path | None, typer.Argument(metavar="[OUT]", help="Deprecated: pass --out OUT.", show_default=False)
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Dataset folder to create.")] = None,
    symbols: Annotated[int, typer.Option("--symbols", help="Number of synthetic symbols (SYN000...).")] = 8,
    days: Annotated[int, typer.Option("--days", help="Number of XNAS sessions.")] = 250,
    freq: Annotated[Frequency, typer.Option("--freq", help="Bar size.")] = "1d",
    seed: Annotated[int, typer.Option("--seed", min=0, help="Random seed; same seed, same bars.")] = 0,
    start: Annotated[str, typer.Option("--start", help="First calendar date (YYYY-MM-DD).")] = DEFAULT_START,
    signal: Annotated[SignalKind, typer.Option("--signal", help="Planted observable signal.")] = "none",
    signal_strength: Annotated[
        float,
        typer.Option("--signal-strength", help="Target information coefficient, e.g. 0.04."),
    ] = 0.0,
    alpha_annual: Annotated[
        float, typer.Option("--alpha-annual", help="Drift alpha of names 0 mod 4, log a year (0 = off).")
    ] = ALPHA_ANNUAL,
) -> None:
    """Write the seeded synthetic market (drift alpha: finpod.data.synth; signals: finpod.data.signals)."""
    if legacy_out is not None and out is not None:
        raise SpecError(
            f"the dataset folder is given twice ({legacy_out} and --out {out}); fix: pass --out only"
        )
    if legacy_out is not None:
        err_console().print(
            f"note: `finpod data synth OUT` is deprecated; use `finpod data synth --out {legacy_out}`"
        )
    target = out if out is not None else legacy_out
    if target is None:
        raise SpecError("data synth: no dataset folder; fix: pass --out FOLDER, e.g. --out data/synthetic")
    from finpod.data.signals import SignalSpec
    from finpod.data.synth import write_synth_dataset

    first = _date(start, "--start")
    planted = SignalSpec(signal, signal_strength)
    manifest = write_synth_dataset(
        target,
        symbols,
        days,
        freq,
        seed,
        first.isoformat(),
        signal=planted,
        alpha_annual=alpha_annual,
    )
    _print_manifest(manifest, target)


@app.command("import")
def import_(
    paths: Annotated[list[Path], typer.Argument(help="Vendor files and/or folders of them.")],
    out: Annotated[Path, typer.Option("--out", help="Dataset folder to create.")],
    symbol: Annotated[
        str | None, typer.Option("--symbol", help="Ticker instead of the file name's (one file).")
    ] = None,
    freq: Annotated[
        Frequency | None, typer.Option("--freq", help="Bar size, when the inputs hold several.")
    ] = None,
    column_map: str | None = typer.Option(
        None, "--column-map", help="Renames, e.g. Date=timestamp,Last=close."
    ),
    adjust: Annotated[
        str | None,
        typer.Option(
            "--adjust",
            help="splits=FILE: adjust for the splits in a corporate-actions table (symbol,date,ratio).",
        ),
    ] = None,
    adjustment: Annotated[
        str | None,
        typer.Option(
            "--adjustment", help="none: import raw prices unchecked for splits (every run then warns)."
        ),
    ] = None,
    on_duplicate: Annotated[
        DuplicatePolicy,
        typer.Option(
            "--on-duplicate",
            help="A symbol's second bar at the same time: error, or keep the first or last (counted).",
        ),
    ] = "error",
    drop_invalid_rows: Annotated[
        bool,
        typer.Option(
            "--drop-invalid-rows",
            help="Drop rows with bad values (missing, non-positive, high < low...), counted in the manifest.",
        ),
    ] = False,
    timestamps: Annotated[
        BarAnchor | None,
        typer.Option(
            "--timestamps",
            help="Naive intraday timestamps (no UTC offset) mark each bar's start or end (with --tz).",
        ),
    ] = None,
    on_outlier: Annotated[
        OutlierPolicy,
        typer.Option(
            "--on-outlier",
            help="A bar far from its symbol's local price level (fat finger): error, drop or keep (counted).",
        ),
    ] = "error",
    tz: Annotated[
        str | None,
        typer.Option(
            "--tz", help="Time zone of naive intraday timestamps, an IANA name, e.g. America/New_York."
        ),
    ] = None,
) -> None:
    """Import vendor CSV/parquet files (formats detected from headers and names) into a dataset."""
    from finpod.data.importers import import_paths
    from finpod.data.importers.naive_times import naive_reading

    manifest = import_paths(
        paths,
        out,
        symbol=symbol,
        freq=freq,
        column_map=None if column_map is None else parse_column_map(column_map),
        splits_table=None if adjust is None else _splits_table(adjust),
        raw_prices=_raw_prices(adjustment),
        on_duplicate=on_duplicate,
        drop_invalid_rows=drop_invalid_rows,
        timestamps=naive_reading(timestamps, tz),
        on_outlier=on_outlier,
    )
    _print_manifest(manifest, out)


@app.command("fetch")
def fetch(
    symbols: Annotated[str, typer.Option("--symbols", help="Tickers, comma separated (AAPL,MSFT).")],
    start: Annotated[str, typer.Option("--start", help="First date, YYYY-MM-DD (New York).")],
    end: Annotated[str, typer.Option("--end", help="Last date, YYYY-MM-DD, inclusive.")],
    freq: Annotated[Frequency, typer.Option("--freq", help="Bar size.")],
    out: Annotated[Path, typer.Option("--out", help="Dataset folder to create.")],
    cache: Annotated[
        Path | None, typer.Option("--cache", help="Chunk cache folder [default: <OUT>.cache].")
    ] = None,
    data_url: Annotated[str, typer.Option("--data-url", help="Alpaca data API base URL.")] = ALPACA_DATA_URL,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=0.1,
            help="Seconds to wait for each answer; a request that gets none is tried "
            f"{DEFAULT_TIMEOUTS.retries + 1} times, then the fetch stops with an error.",
        ),
    ] = DEFAULT_TIMEOUTS.read_s,
    adjust: Annotated[
        str | None,
        typer.Option(
            "--adjust",
            help="splits=FILE: a corporate-actions table (symbol,date,ratio) whose rows replace Alpaca's "
            "for their dates; a 1:1 row marks a real price move.",
        ),
    ] = None,
) -> None:
    """Fetch split/dividend-adjusted Alpaca bars, splits checked against Alpaca's corporate actions.

    Keys come from APCA_API_KEY_ID / APCA_API_SECRET_KEY.
    """
    from finpod.data.alpaca_source import (  # alpaca-py loads here, not on every finpod command
        DEFAULT_RETRY,
        default_cache_dir,
        fetch_bars,
        make_client,
    )

    frequency = freq
    first, last = _date(start, "--start"), _date(end, "--end")
    timeouts = dataclasses.replace(DEFAULT_TIMEOUTS, read_s=timeout)
    client = make_client(os.environ, url=data_url, retry=DEFAULT_RETRY, timeouts=timeouts)
    cache_dir = cache if cache is not None else default_cache_dir(out)
    report = fetch_bars(
        symbols.split(","),
        first,
        last,
        frequency,
        out,
        client=client,
        cache_dir=cache_dir,
        splits_table=None if adjust is None else _splits_table(adjust),
    )
    out_console().print(
        f"chunks: {report.chunks_fetched} fetched, {report.chunks_cached} from cache ({cache_dir})"
    )
    _print_manifest(report.manifest, out)


def _info_table(info: DatasetInfo) -> Table:
    table = Table(title=f"dataset {info.path}", show_header=False)
    shown = ", ".join(info.symbols[:12]) + (
        f" ... ({len(info.symbols)} in all)" if len(info.symbols) > 12 else ""
    )
    rows = [
        ("symbols", f"{len(info.symbols)}: {shown}"),
        ("frequency", info.frequency),
        ("first bar", info.first_bar),
        ("last bar", info.last_bar),
        ("bars", f"{info.bars:,}"),
        ("calendar bars", f"{info.calendar_bars:,} ({info.calendar})"),
        ("filled bars", f"{info.filled_bars:,}"),
        ("off-calendar bars", f"{info.off_calendar_bars:,}"),
        ("tradable share", f"{info.tradable_share:.1%}"),
        ("adjustment", info.adjustment),
        ("source", info.source),
        ("repairs", ", ".join(f"{k} {v:,}" for k, v in info.repairs.items()) or "none"),
        *(("note", note) for note in info.notes),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


@app.command("info")
def info(
    dataset: Annotated[Path, typer.Argument(help="Dataset folder.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a table.")
    ] = False,
) -> None:
    """Symbols, frequency, first/last bar, bars, filled bars, tradable share, adjustment, repairs."""
    from finpod.data.dataset_info import dataset_info

    summary = dataset_info(dataset)
    if as_json:
        typer.echo(json.dumps(summary.to_json_dict()))
        return
    out_console().print(_info_table(summary))
