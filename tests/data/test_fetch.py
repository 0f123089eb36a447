"""Alpaca fetch through the REAL alpaca-py client against the fake data server on 127.0.0.1."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from clirun import run_cli
from fakes.alpaca_server import EXPECTED_HEADERS, FakeAlpacaServer, bars_to_alpaca_json
from finpod.data import alpaca_source
from finpod.data.alpaca_source import FetchReport, RetryPolicy, fetch_bars, keys_from_env, make_client
from finpod.data.store import read_dataset
from finpod.data.synth import synth_market
from finpod.errors import BrokerError, DataError

KEY_ID = "test-key-id-123"
SECRET = "test-secret-456"
ENV = {"APCA_API_KEY_ID": KEY_ID, "APCA_API_SECRET_KEY": SECRET}
NO_WAIT = RetryPolicy(attempts=2, wait_seconds=0, status_codes=(429, 500, 502, 503, 504))
START, END = dt.date(2021, 1, 28), dt.date(2021, 2, 2)
PAGE_SIZE = 500
SUCCESSFUL_PAGES = 8
"""2 symbols x 2 monthly chunks x 2 pages (two 390-bar sessions per chunk, 500 bars a page)."""


@pytest.fixture(scope="module")
def minute_bars() -> pd.DataFrame:
    """Two symbols, four sessions across a month boundary (two chunks each), regular hours."""
    return synth_market(2, 4, "1min", seed=9, start=START.isoformat())


@pytest.fixture
def server(minute_bars: pd.DataFrame) -> Iterator[FakeAlpacaServer]:
    with FakeAlpacaServer(key_id=KEY_ID, secret_key=SECRET, page_size=PAGE_SIZE) as fake:
        for symbol, rows in bars_to_alpaca_json(minute_bars).items():
            fake.add_bars("1Min", symbol, rows)
        yield fake


def _fetch(server: FakeAlpacaServer, tmp_path: Path, out_name: str = "ds") -> FetchReport:
    client = make_client(ENV, url=server.url, retry=NO_WAIT)
    symbols = ["SYN000", "SYN001"]
    return fetch_bars(
        symbols, START, END, "1min", tmp_path / out_name, client=client, cache_dir=tmp_path / "cache"
    )


def test_paginated_fetch_writes_the_bars(
    server: FakeAlpacaServer, minute_bars: pd.DataFrame, tmp_path: Path
) -> None:
    report = _fetch(server, tmp_path)
    bars, manifest = read_dataset(tmp_path / "ds")
    pd.testing.assert_frame_equal(bars, minute_bars, check_dtype=False)
    assert manifest.source == "alpaca"
    assert manifest.adjustment == "split+dividend"
    assert report.chunks_fetched == 4
    assert report.chunks_cached == 0
    requests = server.bar_requests()
    assert len(requests) == SUCCESSFUL_PAGES
    assert any(r.query.get("page_token") for r in requests)
    assert {r.query["adjustment"] for r in requests} == {"all"}
    assert {r.query["timeframe"] for r in requests} == {"1Min"}
    for request in requests:
        assert {name.lower() for name in request.headers} <= EXPECTED_HEADERS
        assert request.headers["Apca-Api-Key-Id"] == KEY_ID


def test_rerun_uses_the_cache(server: FakeAlpacaServer, tmp_path: Path) -> None:
    _fetch(server, tmp_path, "first")
    before = len(server.bar_requests())
    report = _fetch(server, tmp_path, "second")
    assert len(server.bar_requests()) == before
    assert report.chunks_cached == 4
    assert report.chunks_fetched == 0
    first, _ = read_dataset(tmp_path / "first")
    second, _ = read_dataset(tmp_path / "second")
    pd.testing.assert_frame_equal(first, second)


def test_chunks_cached_on_an_earlier_day_are_fetched_again(
    server: FakeAlpacaServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adjusted prices are as of the fetch: a later split rescales them, so old chunks are not mixed in."""
    monkeypatch.setattr(alpaca_source, "_today_utc", lambda: dt.date(2024, 3, 1))
    _fetch(server, tmp_path, "first")
    monkeypatch.setattr(alpaca_source, "_today_utc", lambda: dt.date(2024, 3, 2))
    before = len(server.bar_requests())
    report = _fetch(server, tmp_path, "second")
    assert report.chunks_cached == 0
    assert report.chunks_fetched == 4
    assert len(server.bar_requests()) == 2 * before
    assert _fetch(server, tmp_path, "third").chunks_cached == 4  # same day: the cache is used


def test_interrupted_fetch_resumes_where_it_stopped(server: FakeAlpacaServer, tmp_path: Path) -> None:
    """Chunks fetched before a failure are cached; the re-run fetches only the rest."""
    client = make_client(
        ENV, url=server.url, retry=RetryPolicy(attempts=1, wait_seconds=0, status_codes=(429,))
    )
    # A first run caches SYN000's two chunks; the next run dies on SYN001 (500, not retried here).
    fetch_bars(["SYN000"], START, END, "1min", tmp_path / "part", client=client, cache_dir=tmp_path / "cache")
    server.fail_next(500, 1)
    with pytest.raises(BrokerError, match="HTTP 500"):
        fetch_bars(
            ["SYN000", "SYN001"],
            START,
            END,
            "1min",
            tmp_path / "ds",
            client=client,
            cache_dir=tmp_path / "cache",
        )
    assert not (tmp_path / "ds").exists()
    report = fetch_bars(
        ["SYN000", "SYN001"], START, END, "1min", tmp_path / "ds", client=client, cache_dir=tmp_path / "cache"
    )
    assert report.chunks_cached == 2
    assert report.chunks_fetched == 2


def test_unreadable_cached_chunk_is_one_line_naming_the_file(
    server: FakeAlpacaServer, tmp_path: Path
) -> None:
    _fetch(server, tmp_path)
    chunks = sorted((tmp_path / "cache").rglob("*.parquet"))
    assert chunks
    assert not list((tmp_path / "cache").rglob(".*")), "temporary files left in the cache"
    chunks[0].write_bytes(chunks[0].read_bytes()[:100])
    with pytest.raises(DataError) as caught:
        _fetch(server, tmp_path, out_name="again")
    message = str(caught.value)
    assert "\n" not in message
    assert str(chunks[0]) in message
    assert "delete it and re-run" in message


@pytest.mark.parametrize("status", [429, 500])
def test_transient_errors_recover_within_retries(
    server: FakeAlpacaServer, tmp_path: Path, status: int
) -> None:
    server.fail_next(status, NO_WAIT.attempts)
    report = _fetch(server, tmp_path)
    assert report.manifest.rows == 2 * 4 * 390
    assert len(server.bar_requests()) == NO_WAIT.attempts + SUCCESSFUL_PAGES


@pytest.mark.parametrize("status", [429, 500])
def test_retries_running_out_is_one_line(server: FakeAlpacaServer, tmp_path: Path, status: int) -> None:
    server.fail_next(status, NO_WAIT.attempts + 1)
    with pytest.raises(BrokerError) as caught:
        _fetch(server, tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    assert f"HTTP {status} after the client's retries ran out" in message
    assert "SYN000 2021-01-28..2021-01-31" in message
    assert KEY_ID not in message
    assert SECRET not in message
    assert len(server.bar_requests()) == NO_WAIT.attempts + 1


def test_rejected_keys_name_the_variables(server: FakeAlpacaServer, tmp_path: Path) -> None:
    client = make_client(
        {"APCA_API_KEY_ID": "wrong", "APCA_API_SECRET_KEY": "nope"}, url=server.url, retry=NO_WAIT
    )
    with pytest.raises(
        BrokerError, match="HTTP 401, keys rejected; check APCA_API_KEY_ID and APCA_API_SECRET_KEY"
    ):
        fetch_bars(
            ["SYN000"], START, END, "1min", tmp_path / "ds", client=client, cache_dir=tmp_path / "cache"
        )


def test_forbidden_is_not_reported_as_rejected_keys(server: FakeAlpacaServer, tmp_path: Path) -> None:
    """403 is what Alpaca answers when the plan does not cover the data (recent SIP minutes)."""
    server.fail_next(403, 1)
    with pytest.raises(BrokerError) as caught:
        _fetch(server, tmp_path)
    message = str(caught.value)
    assert "HTTP 403, access refused (injected failure 403)" in message
    assert "data plan" in message
    assert "keys rejected" not in message
    assert "\n" not in message


@pytest.mark.parametrize("env", [{}, {"APCA_API_KEY_ID": KEY_ID}, {"APCA_API_SECRET_KEY": SECRET}])
def test_missing_keys_name_both_variables(env: dict[str, str]) -> None:
    with pytest.raises(BrokerError, match="set both APCA_API_KEY_ID and APCA_API_SECRET_KEY"):
        keys_from_env(env)


def test_extended_hours_dropped_and_counted(minute_bars: pd.DataFrame, tmp_path: Path) -> None:
    pre_market = minute_bars.iloc[:3].assign(
        timestamp=minute_bars["timestamp"].iloc[:3] - pd.Timedelta(hours=1)
    )
    with FakeAlpacaServer(key_id=KEY_ID, secret_key=SECRET) as fake:
        for symbol, rows in bars_to_alpaca_json(pd.concat([pre_market, minute_bars])).items():
            fake.add_bars("1Min", symbol, sorted(rows, key=lambda bar: bar["t"]))
        report = _fetch(fake, tmp_path)
    assert report.manifest.repairs["outside_regular_hours_bars_dropped"] == 3
    assert report.manifest.rows == len(minute_bars)


def test_daily_bars_move_to_the_session_open(tmp_path: Path) -> None:
    """Alpaca stamps daily bars at New York midnight; finpod stamps them at the open."""
    daily = synth_market(1, 3, "1d", seed=1, start="2021-03-12")
    midnight = daily.assign(
        timestamp=daily["timestamp"].dt.tz_convert("America/New_York").dt.normalize().dt.tz_convert("UTC")
    )
    with FakeAlpacaServer(key_id=KEY_ID, secret_key=SECRET) as fake:
        fake.add_bars("1Day", "SYN000", bars_to_alpaca_json(midnight)["SYN000"])
        client = make_client(ENV, url=fake.url, retry=NO_WAIT)
        fetch_bars(
            ["SYN000"],
            dt.date(2021, 3, 12),
            dt.date(2021, 3, 16),
            "1d",
            tmp_path / "ds",
            client=client,
            cache_dir=tmp_path / "cache",
        )
        assert {r.query["timeframe"] for r in fake.bar_requests()} == {"1Day"}
    bars, _ = read_dataset(tmp_path / "ds")
    pd.testing.assert_series_equal(bars["timestamp"], daily["timestamp"], check_dtype=False)


def test_existing_output_is_refused_before_any_request(server: FakeAlpacaServer, tmp_path: Path) -> None:
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "keep.txt").write_text("mine")
    with pytest.raises(DataError, match="already exists"):
        _fetch(server, tmp_path)
    assert server.bar_requests() == []


def test_a_ticker_named_twice_is_fetched_once(server: FakeAlpacaServer, tmp_path: Path) -> None:
    client = make_client(ENV, url=server.url, retry=NO_WAIT)
    report = fetch_bars(
        ["SYN000", "syn000 "], START, END, "1min", tmp_path / "ds", client=client, cache_dir=tmp_path / "c"
    )
    assert report.manifest.symbols == ("SYN000",)
    assert report.chunks_fetched == 2


def test_symbol_without_bars_is_an_error(server: FakeAlpacaServer, tmp_path: Path) -> None:
    client = make_client(ENV, url=server.url, retry=NO_WAIT)
    with pytest.raises(
        DataError, match="no 1min regular-hours bars for NOPE between 2021-01-28 and 2021-02-02"
    ):
        fetch_bars(["NOPE"], START, END, "1min", tmp_path / "ds", client=client, cache_dir=tmp_path / "cache")


def test_symbol_with_only_extended_hours_bars_is_an_error(minute_bars: pd.DataFrame, tmp_path: Path) -> None:
    """Not a dataset that silently lacks it."""
    syn001 = minute_bars[minute_bars["symbol"] == "SYN001"].head(3)
    pre_market = syn001.assign(timestamp=syn001["timestamp"] - pd.Timedelta(hours=1))
    with FakeAlpacaServer(key_id=KEY_ID, secret_key=SECRET) as fake:
        rows = bars_to_alpaca_json(pd.concat([minute_bars[minute_bars["symbol"] == "SYN000"], pre_market]))
        for symbol, bars in rows.items():
            fake.add_bars("1Min", symbol, bars)
        with pytest.raises(DataError, match="no 1min regular-hours bars for SYN001"):
            _fetch(fake, tmp_path)
    assert not (tmp_path / "ds").exists()


def test_default_client_reads_keys_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("APCA_API_KEY_ID", raising=False)
    monkeypatch.delenv("APCA_API_SECRET_KEY", raising=False)
    with pytest.raises(BrokerError, match="set both APCA_API_KEY_ID and APCA_API_SECRET_KEY"):
        fetch_bars(["AAPL"], START, END, "1d", tmp_path / "ds")


# ---------------------------------------------------------------- splits: checked, never assumed

SPLIT_START, SPLIT_END, EX_DATE = dt.date(2021, 2, 1), dt.date(2021, 2, 12), "2021-02-08"
PRICES = ["open", "high", "low", "close"]


@pytest.fixture(scope="module")
def adjusted_minutes() -> pd.DataFrame:
    """Ten sessions of two symbols' minute bars: the truth, in today's shares."""
    return synth_market(2, 10, "1min", seed=21, start=SPLIT_START.isoformat())


def _raw(bars: pd.DataFrame, symbol: str, ratio: float) -> pd.DataFrame:
    """What a lagging split adjustment serves: before the ex-date, prices x ratio and volume / ratio."""
    raw = bars.copy()
    session = raw["timestamp"].dt.tz_convert("America/New_York").dt.date.astype(str)
    earlier = (raw["symbol"] == symbol) & (session < EX_DATE)
    raw.loc[earlier, PRICES] = raw.loc[earlier, PRICES] * ratio
    raw.loc[earlier, "volume"] = raw.loc[earlier, "volume"] / ratio
    return raw


def _fetch_split_window(served: pd.DataFrame, tmp_path: Path, splits: list[tuple[str, float]]) -> FetchReport:
    with FakeAlpacaServer(key_id=KEY_ID, secret_key=SECRET) as fake:
        for symbol, rows in bars_to_alpaca_json(served).items():
            fake.add_bars("1Min", symbol, rows)
        for symbol, ratio in splits:
            fake.add_split(symbol, EX_DATE, new_rate=ratio)
        client = make_client(ENV, url=fake.url, retry=NO_WAIT)
        try:
            return fetch_bars(
                ["SYN000", "SYN001"],
                SPLIT_START,
                SPLIT_END,
                "1min",
                tmp_path / "ds",
                client=client,
                cache_dir=tmp_path / "cache",
            )
        finally:
            (actions,) = fake.action_requests()
            assert actions.query["symbols"] == "SYN000,SYN001"
            assert set(actions.query["types"].split(",")) == {"forward_split", "reverse_split"}
            assert (actions.query["start"], actions.query["end"]) == ("2021-02-01", "2021-02-12")


def test_a_raw_split_no_corporate_action_explains_is_refused(
    adjusted_minutes: pd.DataFrame, tmp_path: Path
) -> None:
    with pytest.raises(DataError) as caught:
        _fetch_split_window(_raw(adjusted_minutes, "SYN001", 4.0), tmp_path, [])
    message = str(caught.value)
    assert "\n" not in message
    assert "SYN001 2021-02-08 14:30:00+00:00" in message
    assert "unadjusted 4:1 split" in message
    assert "Alpaca's corporate actions list no split there" in message
    assert "--adjust splits=FILE" in message
    assert not (tmp_path / "ds").exists()


def test_a_raw_split_alpaca_lists_is_adjusted_and_the_split_day_return_is_normal(
    adjusted_minutes: pd.DataFrame, tmp_path: Path
) -> None:
    report = _fetch_split_window(_raw(adjusted_minutes, "SYN001", 4.0), tmp_path, [("SYN001", 4.0)])
    bars, manifest = read_dataset(tmp_path / "ds")
    pd.testing.assert_frame_equal(bars, adjusted_minutes, check_dtype=False, rtol=1e-9)
    assert manifest.adjustment == "split+dividend"
    assert manifest.repairs["corporate_action_splits_applied"] == 1
    assert manifest.repairs["corporate_action_splits_already_in_prices"] == 0
    assert any("adjustment=all" in note for note in report.manifest.notes)
    closes = bars.loc[bars["symbol"] == "SYN001", "close"].to_numpy()
    worst = np.abs(np.diff(np.log(closes))).max()
    assert worst < 0.05, f"largest one-minute move {worst:.3f} after adjustment"


def test_a_split_alpaca_already_adjusted_is_counted_not_applied_twice(
    adjusted_minutes: pd.DataFrame, tmp_path: Path
) -> None:
    _fetch_split_window(adjusted_minutes, tmp_path, [("SYN001", 4.0), ("SYN000", 0.1)])
    bars, manifest = read_dataset(tmp_path / "ds")
    pd.testing.assert_frame_equal(bars, adjusted_minutes, check_dtype=False)
    assert manifest.repairs["corporate_action_splits_applied"] == 0
    assert manifest.repairs["corporate_action_splits_already_in_prices"] == 2


def test_a_listed_split_the_prices_match_neither_way_is_refused(
    adjusted_minutes: pd.DataFrame, tmp_path: Path
) -> None:
    with pytest.raises(
        DataError, match=r"SYN001 .*list a 4:1 split but the price moved x0\.\d+ there, neither raw nor"
    ):
        _fetch_split_window(_raw(adjusted_minutes, "SYN001", 2.0), tmp_path, [("SYN001", 4.0)])


def test_the_user_table_overrides_alpaca_and_marks_real_moves(
    adjusted_minutes: pd.DataFrame, tmp_path: Path
) -> None:
    """Alpaca lists a wrong ratio for SYN001; the table gives the right one, and a 1:1 row for SYN000."""
    served = _raw(_raw(adjusted_minutes, "SYN001", 2.0), "SYN000", 4.0)
    table = tmp_path / "splits.csv"
    table.write_text(f"symbol,date,ratio\nSYN001,{EX_DATE},2:1\nSYN000,{EX_DATE},1:1\n")
    with FakeAlpacaServer(key_id=KEY_ID, secret_key=SECRET) as fake:
        for symbol, rows in bars_to_alpaca_json(served).items():
            fake.add_bars("1Min", symbol, rows)
        fake.add_split("SYN001", EX_DATE, new_rate=3.0)
        client = make_client(ENV, url=fake.url, retry=NO_WAIT)
        report = fetch_bars(
            ["SYN000", "SYN001"], SPLIT_START, SPLIT_END, "1min", tmp_path / "ds",
            client=client, cache_dir=tmp_path / "cache", splits_table=table,
        )  # fmt: skip
    bars, _ = read_dataset(tmp_path / "ds")
    assert report.manifest.repairs["corporate_action_splits_applied"] == 1
    syn001 = bars["symbol"] == "SYN001"
    np.testing.assert_allclose(bars.loc[syn001, "close"], adjusted_minutes.loc[syn001, "close"], rtol=1e-9)
    syn000 = bars["symbol"] == "SYN000"
    np.testing.assert_allclose(bars.loc[syn000, "close"], served.loc[syn000, "close"])


def test_cli_fetch_of_a_raw_split_is_one_line_exit_2(
    adjusted_minutes: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APCA_API_KEY_ID", KEY_ID)
    monkeypatch.setenv("APCA_API_SECRET_KEY", SECRET)
    with FakeAlpacaServer(key_id=KEY_ID, secret_key=SECRET) as fake:
        for symbol, rows in bars_to_alpaca_json(_raw(adjusted_minutes, "SYN001", 4.0)).items():
            fake.add_bars("1Min", symbol, rows)
        result = run_cli(
            "data", "fetch", "--symbols", "SYN000,SYN001", "--start", "2021-02-01", "--end", "2021-02-12",
            "--freq", "1min", "--out", str(tmp_path / "ds"), "--data-url", fake.url,
        )  # fmt: skip
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "SYN001 2021-02-08 14:30:00+00:00" in line
    assert "unadjusted 4:1 split" in line
    assert not (tmp_path / "ds").exists()
