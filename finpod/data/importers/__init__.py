"""Vendor files into a dataset: detect each file's format, read it into the bar schema, validate, write.

Accepted formats (detected from the header and the file name, no flags needed):

* AlphaVantage-style ``SYMBOL_<freq>.csv`` (``datetime,open,high,low,close,volume``; naive New York
  time, bar END, newest first; the name is what says so) -> :mod:`finpod.data.importers.alphavantage`;
* daily-adjusted ``DA-<TICKER>-*.csv`` (raw OHLCV + ``adjusted_close,dividend_amount,split_coefficient``)
  -> :mod:`finpod.data.importers.pooksoft`;
* bar-schema CSV/parquet (``timestamp,symbol,open,high,low,close,volume``, UTC bar starts) and vendor
  CSVs with common column names -> :mod:`finpod.data.importers.tabular`.

finpod supports the frequencies ``1min`` and ``1d``. When the inputs hold several, the finest supported
one is imported and the rest are skipped and recorded in the manifest's notes (``--freq`` picks).
Minute bars outside XNAS regular hours are dropped and counted; zero-volume bars are kept and counted.
Minute bars that look stamped at their END (bars at the 16:00 close, none at any 09:30 open, none
elsewhere outside regular hours) are refused rather than imported a minute late.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import numpy as np
import pandas as pd

from finpod.data import xnas_sessions
from finpod.data.calendar import EXCHANGE_TIMEZONE, NS_PER_MINUTE
from finpod.data.choices import DuplicatePolicy, OutlierPolicy
from finpod.data.importers import alphavantage, pooksoft, tabular
from finpod.data.importers.common import (
    OUTSIDE_REGULAR_HOURS,
    UNKNOWN_FREQUENCY,
    ZERO_VOLUME_BARS,
    LoadedFile,
    infer_frequency,
    parse_timestamps,
    read_table,
)
from finpod.data.importers.naive_times import UNSAID, NaiveReading
from finpod.data.input_paths import expand_paths
from finpod.data.outliers import find_outliers
from finpod.data.schema import FREQUENCIES, Frequency
from finpod.data.splits import (
    SPLITS_SHOWN,
    SplitJump,
    apply_splits,
    confirmed_moves,
    detect_splits,
    read_actions,
    session_date,
)
from finpod.data.store import Manifest, write_dataset
from finpod.data.textfile import UNREADABLE, records
from finpod.data.validate import invalid_rows, readable, validate_bars
from finpod.errors import DataError

ACCEPTED_FORMATS: Final[str] = (
    "AlphaVantage-style SYMBOL_1min.csv/SYMBOL_daily.csv (datetime,open,high,low,close,volume); "
    "daily-adjusted DA-TICKER-*.csv (timestamp,open,high,low,close,adjusted_close,volume,"
    "dividend_amount,split_coefficient); bar-schema CSV/parquet (timestamp,symbol,open,high,low,close,"
    "volume); vendor CSV with Date|Datetime|Time, Open, High, Low, Close, Volume[, Adj Close][, Symbol]"
)


@dataclass(frozen=True, eq=False)
class _Candidate:
    """One input file, its detected format and frequency, and its rows."""

    path: Path
    kind: str
    frequency: str
    frame: pd.DataFrame


def _apply_column_map(frame: pd.DataFrame, path: Path, column_map: Mapping[str, str]) -> pd.DataFrame:
    if not column_map:
        return frame
    missing = [old for old in column_map if old not in frame.columns]
    if missing:
        raise DataError(
            f"{path}: --column-map names column(s) {', '.join(missing)} that the file does not have "
            f"(it has {', '.join(map(str, frame.columns))}); fix the mapping"
        )
    return frame.rename(columns=dict(column_map))


HEADER_SEARCH_LINES: Final[int] = 30
"""How far down a file the importer looks for a header with junk above it."""


def _known_header(columns: list[str]) -> bool:
    """Whether ``columns`` are the column names of a format the importer reads."""
    lowered = [name.strip().lower() for name in columns]
    if tuple(lowered) == alphavantage.HEADER or tabular.is_bar_schema([c.strip() for c in columns]):
        return True
    if set(pooksoft.ADJUSTMENT_COLUMNS) <= set(lowered) and "timestamp" in lowered:
        return True
    return set(tabular.canonical_columns(columns).values()) >= tabular.VENDOR_REQUIRED


def _junk_above_header(path: Path, column_map: Mapping[str, str]) -> DataError | None:
    """An error naming the real header line when lines that are not bars sit above it, else ``None``."""
    if path.suffix == ".parquet":
        return None
    try:
        found = [
            (line, fields)
            for index, (line, fields) in zip(range(HEADER_SEARCH_LINES), records(path), strict=False)
            if index > 0 and _known_header([column_map.get(f.strip(), f) for f in fields])
        ]
        first = next(iter(records(path)), None)
    except UNREADABLE:
        return None
    if not found or first is None:
        return None
    line, fields = found[0]
    above = "line 1" if line == 2 else f"lines 1-{line - 1}"
    return DataError(
        f"{path}: the header ({','.join(fields)}) is on line {line}, below text that is not bars "
        f"(line {first[0]}: {readable(','.join(first[1]))}); fix: delete {above} so the header comes first"
    )


def _probe(path: Path, column_map: Mapping[str, str], lenient: bool = False) -> _Candidate:
    try:
        table = read_table(path, [old for old, new in column_map.items() if new == "symbol"])
    except DataError as err:
        raise _junk_above_header(path, column_map) or err from None
    frame = _apply_column_map(table, path, column_map)
    if len(frame) == 0:
        raise DataError(f"{path}: empty file (a header, no bars); export some bars into it or leave it out")
    lowered = [str(name).strip().lower() for name in frame.columns]
    named_frequency = alphavantage.frequency_from_name(path)
    if tuple(lowered) == alphavantage.HEADER and named_frequency is not None:
        return _Candidate(path, "alphavantage", named_frequency, frame)
    if set(pooksoft.ADJUSTMENT_COLUMNS) <= set(lowered) and "timestamp" in lowered:
        return _Candidate(path, "pooksoft", "1d", frame)
    if tabular.is_bar_schema([str(name) for name in frame.columns]):
        loaded = tabular.read_bar_schema(frame, path)
        if not lenient:
            validate_bars(loaded.bars, str(path))
        return _Candidate(path, "bars", loaded.frequency, frame)
    mapping = tabular.canonical_columns([str(name) for name in frame.columns])
    if set(mapping.values()) >= tabular.VENDOR_REQUIRED:
        renamed = frame.loc[:, list(mapping)].rename(columns=mapping)
        symbols = renamed["symbol"] if "symbol" in renamed.columns else path.stem
        stamps = parse_timestamps(renamed["timestamp"], path, symbols)
        frequency = infer_frequency(pd.DataFrame({"timestamp": stamps, "symbol": symbols}))
        dates_only = not isinstance(stamps.dtype, pd.DatetimeTZDtype) and bool(
            (stamps == stamps.dt.normalize()).all()
        )
        if frequency == UNKNOWN_FREQUENCY and dates_only:
            frequency = "1d"
        return _Candidate(path, "vendor", frequency, renamed)
    junk = _junk_above_header(path, column_map)
    if junk is not None:
        raise junk
    missing = sorted(tabular.VENDOR_REQUIRED - set(mapping.values()))
    if len(missing) == 1:  # a bar table short of one column: name it rather than every format
        raise DataError(
            f"{path}: no {missing[0]} column (columns {', '.join(map(str, frame.columns))}); finpod needs "
            f"each bar's {missing[0]}; fix: add it, or name yours with --column-map YOURS={missing[0]}"
        )
    raise DataError(
        f"{path}: unknown format (columns {', '.join(map(str, frame.columns))}); "
        f"accepted: {ACCEPTED_FORMATS}; or rename columns with --column-map old=new"
    )


def _select_frequency(candidates: list[_Candidate], freq: str | None) -> tuple[list[_Candidate], list[str]]:
    """Pick the files to import (one frequency) and describe the ones skipped."""
    unknown = [c for c in candidates if c.frequency == UNKNOWN_FREQUENCY]
    if unknown and freq is None:
        raise DataError(
            f"{unknown[0].path}: cannot tell the bar frequency (one bar per symbol); "
            "pass --freq 1min or --freq 1d"
        )
    if unknown:
        candidates = [
            replace(c, frequency=str(freq)) if c.frequency == UNKNOWN_FREQUENCY else c for c in candidates
        ]
    counts = Counter(candidate.frequency for candidate in candidates)
    if freq is not None:
        chosen_freq = freq
        if chosen_freq not in counts:
            found = ", ".join(f"{n} of {f}" for f, n in sorted(counts.items()))
            raise DataError(
                f"no input file has frequency {freq} (found {found}); pick one of those with --freq"
            )
    else:
        supported = [f for f in FREQUENCIES if f in counts]
        if not supported:
            found = ", ".join(f"{n} files of {f}" for f, n in sorted(counts.items()))
            raise DataError(
                f"no input file has a supported frequency (found {found}); finpod imports "
                f"{', '.join(FREQUENCIES)} bars; resample the files first"
            )
        chosen_freq = supported[0]
    chosen = [c for c in candidates if c.frequency == chosen_freq]
    skipped = {f: n for f, n in counts.items() if f != chosen_freq}
    notes: list[str] = []
    if skipped:
        parts = [
            f"{n} files of {f}" if i == 0 else f"{n} of {f}"
            for i, (f, n) in enumerate(sorted(skipped.items()))
        ]
        hint = [f for f in FREQUENCIES if f in skipped]
        suffix = f"; pass --freq {hint[0]} to import those" if hint else ""
        notes.append(f"imported {len(chosen)} files of {chosen_freq}; skipped {', '.join(parts)}{suffix}")
    if chosen_freq not in FREQUENCIES:
        raise DataError(
            f"frequency {chosen_freq} is not supported; finpod imports {', '.join(FREQUENCIES)} bars"
        )
    return chosen, notes


def _load(candidate: _Candidate, symbol: str | None, reading: NaiveReading) -> LoadedFile:
    path = candidate.path
    if candidate.kind == "alphavantage":
        ticker = symbol or alphavantage.symbol_from_name(path)
        return alphavantage.read_alphavantage(candidate.frame, path, candidate.frequency, ticker, reading)
    if candidate.kind == "pooksoft":
        return pooksoft.read_pooksoft(candidate.frame, path, symbol or pooksoft.symbol_from_name(path))
    if candidate.kind == "bars":
        loaded = tabular.read_bar_schema(candidate.frame, path)
        if symbol is not None:
            loaded.bars["symbol"] = symbol
        return loaded
    ticker = symbol or path.name.split(".")[0].split("_")[0].upper()
    frame = candidate.frame.drop(columns=["symbol"], errors="ignore") if symbol else candidate.frame
    return tabular.read_vendor(frame, path, ticker, candidate.frequency, reading)


def _refuse_bar_ends(bars: pd.DataFrame, stamps_ns: np.ndarray, inside: np.ndarray, source: str) -> None:
    """Refuse minute bars that look stamped at their END: a bar at a session's close (16:00 New York,
    which starts no regular-hours bar), none at any open (09:30) and none elsewhere outside regular
    hours (which extended-hours data would have). Read as starts, each bar would be one minute late
    and every session's last bar dropped.

    Raises:
        DataError: the stamps look like bar ends (naming the file, symbol, time and the fix).
    """
    at_open, at_close = xnas_sessions.session_edges(stamps_ns, source)
    if not at_close.any() or at_open.any() or (~inside & ~at_close).any():
        return
    row = int(np.flatnonzero(at_close)[0])
    stamp = pd.Timestamp(int(stamps_ns[row]), tz="UTC")
    raise DataError(
        f"{source}: {bars['symbol'].iloc[row]} {stamp}: minute bars at the session's close "
        f"({stamp.tz_convert(EXCHANGE_TIMEZONE):%H:%M} New York) and none at any open, so the timestamps "
        "look like bar ENDS; fix: write bar STARTS (subtract one minute from every timestamp), or write "
        "naive New York times and pass --timestamps end --tz America/New_York"
    )


def _check_timestamps(loaded: LoadedFile) -> pd.DataFrame:
    """Minute bars on whole minutes in regular hours (others dropped, counted); daily bars at opens."""
    bars = loaded.bars
    source = str(loaded.path)
    if not isinstance(bars["timestamp"].dtype, pd.DatetimeTZDtype):
        return bars
    stamps = pd.DatetimeIndex(bars["timestamp"]).as_unit("ns")
    stamps_ns = stamps.asi8
    if loaded.frequency == "1min":
        off_minute = np.flatnonzero(stamps_ns % NS_PER_MINUTE != 0)
        if off_minute.size:
            row = int(off_minute[0])
            raise DataError(
                f"{source}: {bars['symbol'].iloc[row]} {stamps[row]}: minute bar does not start on a whole "
                "minute; round bar starts down to the minute"
            )
        inside = xnas_sessions.regular_hours_mask(stamps_ns, source)
        _refuse_bar_ends(bars, stamps_ns, inside, source)
        dropped = int((~inside).sum())
        if dropped:
            loaded.repairs[OUTSIDE_REGULAR_HOURS] = loaded.repairs.get(OUTSIDE_REGULAR_HOURS, 0) + dropped
            return bars.loc[inside].reset_index(drop=True)
        return bars
    dates = stamps.tz_convert(EXCHANGE_TIMEZONE).tz_localize(None).normalize()
    opens_ns = xnas_sessions.session_opens(dates, bars["symbol"].tolist(), source).as_unit("ns").asi8
    off_open = np.flatnonzero(opens_ns != stamps_ns)
    if off_open.size:
        row = int(off_open[0])
        expected = pd.Timestamp(opens_ns[row], tz="UTC")
        raise DataError(
            f"{source}: {bars['symbol'].iloc[row]} {stamps[row]}: a daily bar must start at its session's "
            f"market open ({expected}); write daily bar starts at the XNAS open"
        )
    return bars


def _check_across_files(files: list[LoadedFile]) -> None:
    """No (symbol, timestamp) may come from two files."""
    origin = np.repeat(np.arange(len(files)), [len(f.bars) for f in files])
    combined = pd.concat([f.bars.loc[:, ["symbol", "timestamp"]] for f in files], ignore_index=True)
    combined["origin"] = origin
    ordered = combined.sort_values(["symbol", "timestamp"], kind="stable", ignore_index=True)
    symbols = ordered["symbol"].to_numpy()
    stamps_ns = ordered["timestamp"].to_numpy(dtype="datetime64[ns]").view(np.int64)
    same = (symbols[1:] == symbols[:-1]) & (stamps_ns[1:] == stamps_ns[:-1])
    clash = np.flatnonzero(same)
    if clash.size:
        row = int(clash[0])
        first, second = files[int(ordered["origin"].iloc[row])], files[int(ordered["origin"].iloc[row + 1])]
        raise DataError(
            f"{second.path}: {ordered['symbol'].iloc[row]} {ordered['timestamp'].iloc[row]}: bar also in "
            f"{first.path}; import each symbol's bars from one file (or pass --symbol to rename)"
        )


RAW_PRICES_NOTE: Final[str] = (
    "prices imported as given (--adjustment none): not checked for splits; a split will look like a "
    "crash to the agent"
)
SPLITS_APPLIED: Final[str] = "splits_applied_from_table"


def _check_splits(
    loaded_files: list[LoadedFile], actions: pd.DataFrame | None, splits_table: Path | None
) -> None:
    """Apply the corporate-actions table (if any), then refuse any jump that still looks like a split."""
    suspects: list[tuple[LoadedFile, SplitJump]] = []
    for loaded in loaded_files:
        if actions is not None:
            loaded.bars, applied = apply_splits(loaded.bars, actions)
            if applied:
                loaded.repairs[SPLITS_APPLIED] = loaded.repairs.get(SPLITS_APPLIED, 0) + applied
        if loaded.splits_recorded:
            continue  # the file's own split column was applied (or found already in the prices)
        checked = confirmed_moves(actions) if actions is not None else set()
        suspects.extend(
            (loaded, jump)
            for jump in detect_splits(loaded.bars, loaded.frequency)
            if (jump.symbol, session_date(jump.timestamp)) not in checked
        )
    if not suspects:
        return
    shown = "; ".join(f"{loaded.path}: {jump.describe()}" for loaded, jump in suspects[:SPLITS_SHOWN])
    more = f" ({len(suspects)} suspect splits in all)" if len(suspects) > SPLITS_SHOWN else ""
    listed = f" (not in {splits_table})" if splits_table is not None else ""
    raise DataError(
        f"{shown}{listed}{more}; fix: pass --adjust splits=FILE with a corporate-actions table "
        "(header symbol,date,ratio, e.g. AAPL,2020-08-31,4:1; a 1:1 row marks a real price move), "
        "or --adjustment none to import the raw prices (every run then warns)"
    )


OUTLIERS_DROPPED: Final[str] = "outlier_bars_dropped"
OUTLIERS_KEPT: Final[str] = "outlier_bars_kept"


def _check_outliers(loaded_files: list[LoadedFile], on_outlier: OutlierPolicy) -> list[DataError]:
    """Refuse, drop or keep (either counted) the bars :func:`finpod.data.outliers.find_outliers` flags.

    Returns:
        One error per file with outliers under ``"error"``, else none (dropped or kept bars are
        counted in the file's repairs).
    """
    problems: list[DataError] = []
    for loaded in loaded_files:
        found = find_outliers(loaded.bars)
        if found.count == 0:
            continue
        if on_outlier == "error":
            more = f" (and {found.count - 1} more bars)" if found.count > 1 else ""
            problems.append(
                DataError(
                    f"{loaded.path}: {found.first}{more}; fix: correct that row, or pass --on-outlier drop "
                    "to drop such bars (counted) or --on-outlier keep to import them as given"
                )
            )
        elif on_outlier == "drop":
            loaded.bars = loaded.bars.loc[~found.mask].reset_index(drop=True)
            loaded.repairs[OUTLIERS_DROPPED] = loaded.repairs.get(OUTLIERS_DROPPED, 0) + found.count
        else:
            loaded.repairs[OUTLIERS_KEPT] = loaded.repairs.get(OUTLIERS_KEPT, 0) + found.count
    return problems


DUPLICATES_DROPPED: Final[str] = "duplicate_bars_dropped"
INVALID_ROWS_DROPPED: Final[str] = "invalid_rows_dropped"
PROBLEMS_SHOWN: Final[int] = 3


def _repair(loaded: LoadedFile, on_duplicate: DuplicatePolicy, drop_invalid_rows: bool) -> pd.DataFrame:
    """The repairs the user asked for, counted in ``loaded.repairs``."""
    bars = loaded.bars
    if drop_invalid_rows:
        bad = invalid_rows(bars)
        if bad.any():
            loaded.repairs[INVALID_ROWS_DROPPED] = int(bad.sum())
            bars = bars.loc[~bad].reset_index(drop=True)
            for name in ("open", "high", "low", "close", "volume"):
                bars[name] = pd.to_numeric(bars[name]).astype(np.float64)
    if on_duplicate != "error":
        twice = bars.duplicated(subset=["symbol", "timestamp"], keep=on_duplicate).to_numpy()
        if twice.any():
            loaded.repairs[DUPLICATES_DROPPED] = int(twice.sum())
            bars = bars.loc[~twice].reset_index(drop=True)
    return bars


def _all_problems(problems: list[DataError], files: int) -> DataError:
    """One error for the problems of every file: the first few shown, all counted."""
    if len(problems) == 1:
        return problems[0]
    shown = " | ".join(str(problem) for problem in problems[:PROBLEMS_SHOWN])
    more = f" | and {len(problems) - PROBLEMS_SHOWN} more" if len(problems) > PROBLEMS_SHOWN else ""
    return DataError(
        f"{len(problems)} of {files} input files have problems (nothing was written): {shown}{more}"
    )


def import_paths(
    paths: Sequence[Path],
    out: Path,
    *,
    symbol: str | None = None,
    freq: Frequency | None = None,
    column_map: Mapping[str, str] | None = None,
    splits_table: Path | None = None,
    raw_prices: bool = False,
    on_duplicate: DuplicatePolicy = "error",
    drop_invalid_rows: bool = False,
    timestamps: NaiveReading = UNSAID,
    on_outlier: OutlierPolicy = "error",
) -> Manifest:
    """Import vendor files into a dataset folder (bars in the bar schema + manifest), atomically.

    Args:
        paths: files and/or folders (folders contribute their ``.csv``/``.csv.gz``/``.parquet`` files).
        out: the dataset folder to create (must not exist).
        symbol: ticker to use instead of the one in the file name (one input file only).
        freq: ``"1min"`` or ``"1d"`` to pick that frequency when the inputs hold several.
        column_map: ``{file column: bar-schema column}`` renames applied before detection.
        splits_table: a corporate-actions table (``symbol,date,ratio``) to adjust the bars with
            (``--adjust splits=FILE``); see :mod:`finpod.data.splits`.
        raw_prices: import prices as given, unchecked for splits, labelled adjustment ``none``
            (``--adjustment none``); every panel build and run then warns.
        on_duplicate: a second bar of a symbol at the same time: ``"error"`` (default), or keep the
            ``"first"`` / ``"last"`` one (the others dropped, counted as ``duplicate_bars_dropped``).
        drop_invalid_rows: drop rows with bad values (see :func:`finpod.data.validate.invalid_rows`),
            counted as ``invalid_rows_dropped``, instead of refusing the file.
        timestamps: how to read naive intraday timestamps (``--timestamps start|end``, ``--tz ZONE``);
            a file needing a reading it does not get is refused (AlphaVantage-style names read as bar
            ends in New York unless these say otherwise).
        on_outlier: a bar :func:`finpod.data.outliers.find_outliers` flags (a fat-finger price):
            ``"error"`` (default) refuses the file, ``"drop"`` drops such bars (counted as
            ``outlier_bars_dropped``), ``"keep"`` imports them as given (counted as ``outlier_bars_kept``).

    Every file is checked before anything is refused: the error counts the problems of all files
    and shows the first few.

    Returns:
        The written manifest; its ``notes`` say which files were skipped, ``repairs`` what was repaired.

    Raises:
        DataError: unknown format, bad bars (naming file, symbol and time), nothing to import, or a
            jump that looks like an unadjusted split (naming symbol, time and ratio) while neither
            ``splits_table`` nor ``raw_prices`` says how to treat it.
    """
    if raw_prices and splits_table is not None:
        raise DataError("--adjust splits=FILE and --adjustment none contradict each other; pass one of them")
    actions = read_actions(splits_table) if splits_table is not None else None
    files = expand_paths(paths)
    problems: list[DataError] = []
    candidates: list[_Candidate] = []
    for path in files:
        try:
            candidates.append(_probe(path, column_map or {}, drop_invalid_rows or on_duplicate != "error"))
        except DataError as err:
            problems.append(err)
    if not candidates:
        raise _all_problems(problems, len(files))
    chosen, notes = _select_frequency(candidates, freq)
    if symbol is not None and len(chosen) != 1:
        raise DataError(
            f"--symbol {symbol} applies to one input file, but {len(chosen)} were given; drop --symbol"
        )
    loaded_files: list[LoadedFile] = []
    for candidate in chosen:
        try:
            loaded = _load(candidate, symbol, timestamps)
            loaded.bars = _repair(loaded, on_duplicate, drop_invalid_rows)
            loaded.bars = _check_timestamps(loaded)
            report = validate_bars(loaded.bars, str(loaded.path))
        except DataError as err:
            problems.append(err)
            continue
        loaded.repairs[ZERO_VOLUME_BARS] = report.zero_volume_bars
        loaded_files.append(loaded)
    if problems:
        raise _all_problems(problems, len(files))
    if raw_prices:
        for loaded in loaded_files:
            loaded.adjustment = "none"
        notes.append(RAW_PRICES_NOTE)
    else:
        _check_splits(loaded_files, actions, splits_table)
        for loaded in loaded_files:  # raw prices, now checked for splits and adjusted where found
            if loaded.adjustment == "none":
                loaded.adjustment = "split"
    outliers = _check_outliers(loaded_files, on_outlier)
    if outliers:
        raise _all_problems(outliers, len(files))
    adjustments = sorted({f.adjustment for f in loaded_files})
    if len(adjustments) > 1:
        raise DataError(
            f"input files mix price adjustments ({', '.join(adjustments)}); "
            "import them into separate datasets"
        )
    _check_across_files(loaded_files)
    repairs: Counter[str] = Counter()
    for loaded in loaded_files:
        repairs.update(loaded.repairs)
    frequency: Frequency = "1min" if chosen[0].frequency == "1min" else "1d"
    return write_dataset(
        pd.concat([f.bars for f in loaded_files], ignore_index=True),
        out,
        source="+".join(sorted({f.source for f in loaded_files})),
        frequency=frequency,
        adjustment=loaded_files[0].adjustment,
        repairs=dict(sorted(repairs.items())),
        notes=notes,
    )
