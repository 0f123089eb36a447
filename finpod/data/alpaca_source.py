"""Alpaca historical bars into a dataset, through alpaca-py's ``StockHistoricalDataClient``.

Bars are requested split- and dividend-adjusted (``Adjustment.ALL``), one request per symbol and
chunk (a calendar month of minute bars, a calendar year of daily bars); alpaca-py follows
``next_page_token`` until a chunk is complete. Every complete chunk is cached as parquet under
``cache_dir/<SYMBOL>/<freq>_<first>_<last>_asof<today>.parquet`` (written atomically), so an
interrupted fetch resumes where it stopped: chunks cached the same (UTC) day are not fetched again.
Adjusted prices are as of the request: every later split or dividend rescales all earlier bars, so a
chunk cached on an earlier day is fetched again rather than mixed with newer ones (mixing would turn
a split between the two days into a fake crash at the chunk boundary). Chunks that reach today or
later are never cached (the day is not over).

Keys come from ``APCA_API_KEY_ID`` and ``APCA_API_SECRET_KEY`` only and are never printed or logged.
Retries: alpaca-py's REST client retries the status codes in its ``retry_exception_codes`` (429 and
504 by default) ``retry_attempts`` times, ``retry_wait_seconds`` apart; ``StockHistoricalDataClient``
does not expose those knobs, so :func:`make_client` sets them from a :class:`RetryPolicy` (429 and
5xx by default). Every request also has a connect and a read timeout, with bounded retries after a
connection error or a read timeout (:class:`finpod.net.Timeouts`: 5 s and 30 s, 2 retries, so one
request fails after at most :meth:`~finpod.net.Timeouts.worst_case_s` = 106 s). When retries run out
the error is one line (:class:`BrokerError`); a secret the server echoes is redacted from it.

Splits are checked, not assumed. Alpaca's split adjustment can lag a fresh split, so after the bars
come back the fetch asks Alpaca's corporate actions (alpaca-py's ``CorporateActionsClient``) for the
forward and reverse splits of the symbols in the window and checks each against the bars
(:func:`finpod.data.splits.reconcile_splits`): a split still raw in the bars is adjusted
(``corporate_action_splits_applied``), one already in the prices is counted
(``corporate_action_splits_already_in_prices``). Then the bars go through the same split detector
as an import (:func:`finpod.data.splits.detect_splits`): a jump that still looks like a split, with
no listed split to explain it, is refused in one line naming symbol, time and ratio. A user table
(``--adjust splits=FILE``, ``symbol,date,ratio``) overrides Alpaca's list for its dates: a ratio row
is checked like a listed split, a ``1:1`` row marks a real price move. The manifest's adjustment
``split+dividend`` is then true of every split in the window.

Minute bars come back as bar STARTS in UTC, including pre/post-market: those are dropped and counted
(``outside_regular_hours_bars_dropped``). Daily bars are stamped at New York midnight by Alpaca and are
moved to their session's open, like every daily bar in finpod.
"""

from __future__ import annotations

import datetime as dt
import io
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Final, Literal, TypeVar

import numpy as np
import pandas as pd
import requests
from alpaca.common.exceptions import APIError
from alpaca.data.enums import Adjustment, CorporateActionsType
from alpaca.data.historical.corporate_actions import CorporateActionsClient
from alpaca.data.historical.stock import StockHistoricalDataClient
from alpaca.data.models import BarSet
from alpaca.data.models.corporate_actions import CorporateActionsSet, ForwardSplit, ReverseSplit
from alpaca.data.requests import CorporateActionsRequest, StockBarsRequest
from alpaca.data.timeframe import TimeFrame

from finpod.alpaca_endpoints import ALPACA_DATA_URL
from finpod.data import xnas_sessions
from finpod.data.calendar import EXCHANGE_TIMEZONE
from finpod.data.importers.common import OUTSIDE_REGULAR_HOURS, ZERO_VOLUME_BARS
from finpod.data.schema import BAR_COLUMNS
from finpod.data.splits import (
    SPLITS_SHOWN,
    confirmed_moves,
    detect_splits,
    read_actions,
    reconcile_splits,
    session_date,
)
from finpod.data.store import Manifest, write_dataset
from finpod.data.validate import validate_bars
from finpod.errors import BrokerError, DataError, SpecError
from finpod.net import DEFAULT_TIMEOUTS, Timeouts, install_timeouts, is_timeout, redact, register_secret
from podracer.api import atomic_write_bytes

KEY_ID_VARIABLE: Final[str] = "APCA_API_KEY_ID"
SECRET_KEY_VARIABLE: Final[str] = "APCA_API_SECRET_KEY"
_HTTP_UNAUTHORIZED: Final[int] = 401
_HTTP_FORBIDDEN: Final[int] = 403
_MAX_SERVER_MESSAGE_CHARS: Final[int] = 200


@dataclass(frozen=True)
class RetryPolicy:
    """How alpaca-py retries a failed request.

    Attributes:
        attempts: retries after the first try (so ``attempts + 1`` requests at most).
        wait_seconds: pause between tries, whole seconds.
        status_codes: HTTP statuses that are retried.
    """

    attempts: int
    wait_seconds: int
    status_codes: tuple[int, ...]


DEFAULT_RETRY: Final[RetryPolicy] = RetryPolicy(
    attempts=5, wait_seconds=3, status_codes=(429, 500, 502, 503, 504)
)


@dataclass(frozen=True)
class FetchReport:
    """What :func:`fetch_bars` did.

    Attributes:
        manifest: the written dataset's manifest.
        chunks_fetched: ``(symbol, chunk)`` requests sent to Alpaca.
        chunks_cached: chunks read from the cache instead.
    """

    manifest: Manifest
    chunks_fetched: int
    chunks_cached: int


@dataclass(frozen=True)
class DataClients:
    """alpaca-py's market-data clients one fetch uses (same keys, URL, retries and timeouts).

    Attributes:
        bars: historical stock bars.
        actions: corporate actions (the splits the bars are checked against).
    """

    bars: StockHistoricalDataClient
    actions: CorporateActionsClient


SPLITS_APPLIED: Final[str] = "corporate_action_splits_applied"
SPLITS_ALREADY_ADJUSTED: Final[str] = "corporate_action_splits_already_in_prices"
ALPACA_ADJUSTMENT: Final[Adjustment] = Adjustment.ALL
"""Bars are requested split- and dividend-adjusted: the manifest's ``split+dividend``."""
_SPLIT_TYPES: Final[list[CorporateActionsType]] = [
    CorporateActionsType.FORWARD_SPLIT,
    CorporateActionsType.REVERSE_SPLIT,
]
_T = TypeVar("_T")


def keys_from_env(env: Mapping[str, str]) -> tuple[str, str]:
    """The Alpaca key id and secret from the environment.

    Args:
        env: the environment (``os.environ``).

    Returns:
        ``(key_id, secret_key)``.

    Raises:
        BrokerError: either variable is missing or empty (the message names both, never a value).
    """
    key_id, secret = env.get(KEY_ID_VARIABLE, ""), env.get(SECRET_KEY_VARIABLE, "")
    if not key_id or not secret:
        raise BrokerError(
            f"Alpaca keys missing: set both {KEY_ID_VARIABLE} and {SECRET_KEY_VARIABLE} in the environment"
        )
    register_secret(key_id)
    register_secret(secret)
    return key_id, secret


def make_client(
    env: Mapping[str, str], *, url: str, retry: RetryPolicy, timeouts: Timeouts = DEFAULT_TIMEOUTS
) -> DataClients:
    """alpaca-py's bars and corporate-actions clients with keys from ``env`` and the given policies.

    Args:
        env: the environment holding the keys.
        url: the data API base URL (:data:`ALPACA_DATA_URL`, or a local fake in tests).
        retry: retry policy to install (HTTP status codes).
        timeouts: connect/read timeout of every request and the retries after a connection error or
            a read timeout (see :class:`finpod.net.Timeouts`).

    Returns:
        The clients.
    """
    key_id, secret = keys_from_env(env)
    clients = DataClients(
        bars=StockHistoricalDataClient(key_id, secret, url_override=url),
        actions=CorporateActionsClient(key_id, secret, url_override=url),
    )
    for client in (clients.bars, clients.actions):
        # The same fields RESTClient.__init__ fills from retry_attempts / retry_wait_seconds /
        # retry_exception_codes, which these subclasses do not forward.
        client._retry = retry.attempts
        client._retry_wait = retry.wait_seconds
        client._retry_codes = list(retry.status_codes)
        install_timeouts(client._session, timeouts)
    return clients


def default_cache_dir(out: Path) -> Path:
    """Where the chunk cache of dataset ``out`` lives unless told otherwise: ``<out>.cache`` beside it."""
    return out.with_name(f"{out.name}.cache")


def chunk_ranges(start: dt.date, end: dt.date, freq: str) -> list[tuple[dt.date, dt.date]]:
    """Inclusive date ranges covering ``start..end``: calendar months for ``1min``, years for ``1d``.

    Args:
        start: first date.
        end: last date (inclusive).
        freq: ``"1min"`` or ``"1d"``.

    Returns:
        ``(first, last)`` pairs in order, clipped to ``start..end``.
    """
    period = "MS" if freq == "1min" else "YS"
    boundaries = pd.date_range(pd.Timestamp(start), pd.Timestamp(end), freq=period)
    firsts = sorted({pd.Timestamp(start), *boundaries})
    ranges = []
    for index, first in enumerate(firsts):
        last = firsts[index + 1] - pd.Timedelta(days=1) if index + 1 < len(firsts) else pd.Timestamp(end)
        ranges.append((first.date(), last.date()))
    return ranges


def _new_york_midnight(day: dt.date) -> dt.datetime:
    return pd.Timestamp(day).tz_localize(EXCHANGE_TIMEZONE).tz_convert("UTC").to_pydatetime()


def _server_message(err: APIError) -> str:
    """Alpaca's one-line reason from an error body (never a key: those travel in headers only)."""
    try:
        message = str(err.message)
    except (ValueError, KeyError, TypeError):
        message = str(err)
    return redact(" ".join(message.split()))[:_MAX_SERVER_MESSAGE_CHARS]


def _call(where: str, request: Callable[[], _T]) -> _T:
    """Send one alpaca-py request; every failure is a one-line :class:`BrokerError` naming ``where``."""
    try:
        return request()
    except APIError as err:
        status = err.status_code
        if status == _HTTP_UNAUTHORIZED:
            raise BrokerError(
                f"{where}: HTTP {status}, keys rejected; check {KEY_ID_VARIABLE} and {SECRET_KEY_VARIABLE}"
            ) from None
        if status == _HTTP_FORBIDDEN:
            raise BrokerError(
                f"{where}: HTTP {status}, access refused ({_server_message(err)}); check that your Alpaca "
                "data plan covers these bars (recent SIP minutes need a paid plan: end the range earlier)"
            ) from None
        raise BrokerError(
            f"{where}: HTTP {status} after the client's retries ran out; wait and re-run "
            "(fetched chunks are cached and will not be fetched again)"
        ) from None
    except requests.exceptions.RequestException as err:
        if is_timeout(err):
            raise BrokerError(
                f"{where}: the data API did not answer in time (every try timed out); check the network "
                "or the --data-url, or raise --timeout"
            ) from None
        raise BrokerError(
            f"{where}: cannot reach the data API ({type(err).__name__}); check the network"
        ) from None


def _request_chunk(
    client: StockHistoricalDataClient, symbol: str, freq: str, first: dt.date, last: dt.date
) -> pd.DataFrame:
    request = StockBarsRequest(
        symbol_or_symbols=[symbol],
        timeframe=TimeFrame.Minute if freq == "1min" else TimeFrame.Day,
        start=_new_york_midnight(first),
        end=_new_york_midnight(last + dt.timedelta(days=1)) - dt.timedelta(microseconds=1),
        adjustment=ALPACA_ADJUSTMENT,
    )
    result = _call(f"Alpaca bars for {symbol} {first}..{last}", lambda: client.get_stock_bars(request))
    bars = result.data.get(symbol, []) if isinstance(result, BarSet) else []
    return pd.DataFrame(
        {
            "timestamp": pd.DatetimeIndex([bar.timestamp for bar in bars], tz="UTC").as_unit("ns"),
            "symbol": pd.Series([symbol] * len(bars), dtype="str"),
            "open": np.array([bar.open for bar in bars], dtype=np.float64),
            "high": np.array([bar.high for bar in bars], dtype=np.float64),
            "low": np.array([bar.low for bar in bars], dtype=np.float64),
            "close": np.array([bar.close for bar in bars], dtype=np.float64),
            "volume": np.array([bar.volume for bar in bars], dtype=np.float64),
        }
    )


def listed_splits(
    client: CorporateActionsClient, symbols: Sequence[str], start: dt.date, end: dt.date
) -> pd.DataFrame:
    """The forward and reverse splits Alpaca lists for ``symbols`` with an ex-date in ``start..end``.

    Args:
        client: alpaca-py's corporate-actions client.
        symbols: tickers.
        start: first ex-date.
        end: last ex-date, inclusive.

    Returns:
        ``symbol, date, ratio`` rows like :func:`finpod.data.splits.read_actions` (``ratio`` = new
        shares per old share, a :class:`fractions.Fraction`; ``date`` = ex-date, naive).

    Raises:
        BrokerError: Alpaca refused or failed after retries.
    """
    request = CorporateActionsRequest(
        symbols=list(symbols), types=_SPLIT_TYPES, start=start, end=end, limit=None
    )
    where = f"Alpaca corporate actions (splits) for {','.join(symbols)} {start}..{end}"
    result = _call(where, lambda: client.get_corporate_actions(request))
    actions = result.data if isinstance(result, CorporateActionsSet) else {}
    splits = [
        action
        for action in (*actions.get("forward_splits", []), *actions.get("reverse_splits", []))
        if isinstance(action, ForwardSplit | ReverseSplit)
    ]
    return pd.DataFrame(
        {
            "symbol": pd.Series([split.symbol for split in splits], dtype="str"),
            "date": pd.DatetimeIndex([pd.Timestamp(split.ex_date) for split in splits]).as_unit("ns"),
            "ratio": pd.Series(
                [
                    Fraction(split.new_rate).limit_denominator(1000)
                    / Fraction(split.old_rate).limit_denominator(1000)
                    for split in splits
                ],
                dtype=object,
            ),
        }
    )


def _splits_to_check(listed: pd.DataFrame, table: pd.DataFrame | None) -> pd.DataFrame:
    """Alpaca's list with the user's rows in place of Alpaca's for the same symbol and date."""
    if table is None or len(table) == 0:
        return listed
    mine = set(zip(table["symbol"], table["date"], strict=True))
    keep = [(s, d) not in mine for s, d in zip(listed["symbol"], listed["date"], strict=True)]
    return pd.concat([listed.loc[keep], table], ignore_index=True)


def check_splits(
    bars: pd.DataFrame, freq: str, listed: pd.DataFrame, table: pd.DataFrame | None, repairs: dict[str, int]
) -> pd.DataFrame:
    """Adjust the bars for listed splits still raw in them, then refuse any other jump like a split.

    Args:
        bars: fetched bar-schema frame, oldest first within each symbol.
        freq: ``"1min"`` or ``"1d"``.
        listed: Alpaca's splits (:func:`listed_splits`).
        table: the user's ``--adjust splits=FILE`` rows, or ``None``.
        repairs: counter dict updated with :data:`SPLITS_APPLIED` and :data:`SPLITS_ALREADY_ADJUSTED`.

    Returns:
        The bars, adjusted for every split in the window.

    Raises:
        DataError: a jump that looks like an unadjusted split with no listed split to explain it
            (symbol, time, ratio), or a listed split the prices match neither raw nor adjusted.
    """
    lister = "Alpaca's corporate actions" if table is None else "Alpaca's corporate actions or your table"
    reconciled = reconcile_splits(bars, _splits_to_check(listed, table), lister)
    repairs[SPLITS_APPLIED] = reconciled.applied
    repairs[SPLITS_ALREADY_ADJUSTED] = reconciled.already_adjusted
    checked = confirmed_moves(table) if table is not None else set()
    suspects = [
        jump
        for jump in detect_splits(reconciled.bars, freq)
        if (jump.symbol, session_date(jump.timestamp)) not in checked
    ]
    if suspects:
        shown = "; ".join(jump.describe() for jump in suspects[:SPLITS_SHOWN])
        more = f" ({len(suspects)} suspect splits in all)" if len(suspects) > SPLITS_SHOWN else ""
        raise DataError(
            f"alpaca: {shown}{more}; {lister} list no split there, so the adjusted bars are not; fix: "
            "pass --adjust splits=FILE with a corporate-actions table (header symbol,date,ratio, e.g. "
            "AAPL,2020-08-31,4:1; a 1:1 row marks a real price move)"
        )
    return reconciled.bars


def _today_utc() -> dt.date:
    """Today's UTC date: the as-of date of adjusted bars fetched now."""
    return dt.datetime.now(dt.UTC).date()


def _write_chunk(frame: pd.DataFrame, path: Path) -> None:
    """Cache one chunk atomically and durably (a crash never leaves a partial chunk under its name)."""
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    atomic_write_bytes(path, buffer.getvalue())


def _read_chunk(path: Path) -> pd.DataFrame:
    """A cached chunk; an unreadable one is a one-line error naming the file."""
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as err:
        reason = " ".join(str(err).split())
        raise DataError(
            f"{path}: cached chunk cannot be read ({reason}); delete it and re-run to fetch it again"
        ) from None


def _to_regular_bars(bars: pd.DataFrame, freq: str, repairs: dict[str, int]) -> pd.DataFrame:
    """Minute bars: keep regular hours (count the rest); daily bars: stamp at the session open."""
    stamps = pd.DatetimeIndex(bars["timestamp"]).as_unit("ns")
    if freq == "1min":
        inside = xnas_sessions.regular_hours_mask(stamps.asi8, "alpaca")
        repairs[OUTSIDE_REGULAR_HOURS] = int((~inside).sum())
        return bars.loc[inside].reset_index(drop=True)
    days = stamps.tz_convert(EXCHANGE_TIMEZONE).tz_localize(None).normalize()
    moved = bars.copy()
    moved["timestamp"] = xnas_sessions.session_opens(days, bars["symbol"].tolist(), "alpaca daily bars")
    return moved


def fetch_bars(
    symbols: Sequence[str],
    start: dt.date,
    end: dt.date,
    freq: Literal["1min", "1d"],
    out: Path,
    *,
    client: DataClients | None = None,
    cache_dir: Path | None = None,
    splits_table: Path | None = None,
) -> FetchReport:
    """Fetch adjusted bars from Alpaca (cached, resumable), check their splits, write them as a dataset.

    Args:
        symbols: tickers to fetch.
        start: first date (New York).
        end: last date, inclusive.
        freq: ``"1min"`` or ``"1d"``.
        out: the dataset folder to create (must not exist).
        client: alpaca-py's data clients; ``None`` builds them with :func:`make_client` from
            ``os.environ``, :data:`ALPACA_DATA_URL` and :data:`DEFAULT_RETRY`.
        cache_dir: folder for the per-symbol, per-chunk parquet cache; ``None`` means
            ``<out>.cache`` beside the dataset.
        splits_table: a corporate-actions table (``symbol,date,ratio``, ``--adjust splits=FILE``)
            whose rows replace Alpaca's for their symbol and date (see :func:`check_splits`).

    Returns:
        A :class:`FetchReport` with the manifest and how many chunks were fetched or cached.

    Raises:
        SpecError: no symbols, or ``end`` before ``start``.
        BrokerError: Alpaca refused or failed after retries.
        DataError: ``out`` already exists, a symbol has no regular-hours bars in the window, the
            bars are malformed, or they hold a jump like an unadjusted split that no listed split
            explains (see :func:`check_splits`).
    """
    tickers = list(dict.fromkeys(s.strip().upper() for s in symbols if s.strip()))
    if not tickers:
        raise SpecError("--symbols is empty; pass tickers like AAPL,MSFT")
    if end < start:
        raise SpecError(f"--end {end} is before --start {start}; swap them")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DataError(f"{out}: already exists; remove it or choose another output folder")
    table = read_actions(splits_table) if splits_table is not None else None
    clients = (
        client if client is not None else make_client(os.environ, url=ALPACA_DATA_URL, retry=DEFAULT_RETRY)
    )
    cache = cache_dir if cache_dir is not None else default_cache_dir(out)
    today = _today_utc()
    frames: list[pd.DataFrame] = []
    fetched = cached = 0
    for symbol in tickers:
        for first, last in chunk_ranges(start, end, freq):
            path = cache / symbol / f"{freq}_{first}_{last}_asof{today}.parquet"
            if path.is_file():
                frames.append(_read_chunk(path))
                cached += 1
                continue
            frame = _request_chunk(clients.bars, symbol, freq, first, last)
            fetched += 1
            if last < today:
                _write_chunk(frame, path)
            frames.append(frame)
    repairs: dict[str, int] = {}
    bars = _to_regular_bars(pd.concat(frames, ignore_index=True).loc[:, list(BAR_COLUMNS)], freq, repairs)
    missing = sorted(set(tickers) - set(bars["symbol"].unique()))
    if missing:
        raise DataError(
            f"alpaca: no {freq} regular-hours bars for {', '.join(missing)} between {start} and {end}; "
            "check the symbols and dates"
        )
    report = validate_bars(bars, "alpaca")
    repairs[ZERO_VOLUME_BARS] = report.zero_volume_bars
    bars = check_splits(bars, freq, listed_splits(clients.actions, tickers, start, end), table, repairs)
    manifest = write_dataset(
        bars,
        out,
        source="alpaca",
        frequency=freq,
        adjustment="split+dividend",
        repairs=dict(sorted(repairs.items())),
        notes=[
            f"fetched {start}..{end} for {len(tickers)} symbols; cache {cache}",
            f"bars requested with Alpaca adjustment={ALPACA_ADJUSTMENT.value} (splits and dividends); "
            "splits checked against Alpaca's corporate actions and the split detector",
        ],
    )
    return FetchReport(manifest, fetched, cached)
