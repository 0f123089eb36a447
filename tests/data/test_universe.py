"""Point-in-time NASDAQ-100 membership against both reference sources in ../shared/data/universe."""

from __future__ import annotations

import datetime as dt
import json
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from finpod.data.calendar import bar_starts
from finpod.data.universe import (
    check_universe,
    ever_members,
    membership_mask,
    nasdaq100_members,
)
from finpod.errors import DataError

MAX_MONTHLY_DISAGREEMENT_TICKERS = 1
"""index_constitution differs by at most one ticker a month (SIAL in 2015-08, EA from 2026-08)."""
INDEX_CONSTITUTION_CAVEATS = frozenset({"FOXA"})
"""Its SOURCE.md: FOXA's pre-2019 membership is missing there, so FOXA is not comparable."""


def _yaml_years(shared_data: Path) -> dict[int, dict]:
    """The n100tickers files as parsed YAML (every scalar a string: the ticker ON is not a boolean)."""
    folder = shared_data / "universe" / "n100tickers"
    parsed = (yaml.load(p.read_text(), Loader=yaml.BaseLoader) for p in folder.glob("*.yaml"))
    return {int(doc["year"]): doc for doc in parsed}


@pytest.mark.shared_data
def test_members_match_n100tickers_on_every_change_date(shared_data: Path) -> None:
    checked = 0
    for year, doc in sorted(_yaml_years(shared_data).items()):
        members = set(doc["tickers_on_Jan_1"])
        assert nasdaq100_members(f"{year}-01-01") == members
        for date in sorted(doc.get("changes") or {}):
            day_before = (pd.Timestamp(date) - pd.Timedelta(days=1)).date()
            if day_before.year == year:
                assert nasdaq100_members(day_before) == members, f"day before {date}"
            change = doc["changes"][date]
            members = (members - set(change.get("difference", []))) | set(change.get("union", []))
            assert nasdaq100_members(date) == members, date
            checked += 1
    assert checked > 50


@pytest.mark.shared_data
def test_members_agree_with_index_constitution_where_tickers_agree(shared_data: Path) -> None:
    folder = shared_data / "universe" / "index_constitution"
    history = pd.read_csv(folder / "nasdaq100_history.csv", parse_dates=["opt-in", "opt-out"])
    events = pd.read_csv(folder / "nasdaq100_events.csv")
    renames = events[events["event_type"] == "ticker_change"]
    renamed = set(renames["old_symbol"]) | set(renames["new_symbol"])
    ours_ever = ever_members(dt.date(2015, 1, 1), dt.date(2026, 12, 31))
    comparable = (ours_ever & set(history["symbol"])) - renamed - INDEX_CONSTITUTION_CAVEATS
    agree_days = total_days = 0
    for date in pd.date_range("2015-01-01", "2026-10-01", freq="MS"):
        ours = nasdaq100_members(date)
        listed = (history["opt-in"] <= date) & (history["opt-out"].isna() | (history["opt-out"] > date))
        theirs = set(history.loc[listed, "symbol"])
        ours_c, theirs_c = ours & comparable, theirs & comparable
        assert len(ours_c ^ theirs_c) <= MAX_MONTHLY_DISAGREEMENT_TICKERS, (date, ours_c ^ theirs_c)
        agree_days += len(ours_c & theirs_c)
        total_days += len(ours_c | theirs_c)
    assert agree_days / total_days > 0.99


def test_packaged_file_keeps_attribution_and_license() -> None:
    folder = resources.files("finpod.data")
    document = json.loads(folder.joinpath("nasdaq100_membership.json").read_text())
    assert "n100tickers" in document["attribution"]
    assert document["license"].startswith("MIT License")
    assert "index-constitution" in document["renames_attribution"]
    assert {"date": "2022-06-09", "old": "FB", "new": "META"} in document["renames"]
    assert "Jeff McCarrell" in folder.joinpath("nasdaq100_membership.LICENSE").read_text()


def test_a_stock_is_a_member_from_its_effective_date_only() -> None:
    assert "ZM" not in nasdaq100_members("2020-04-29")
    assert "ZM" in nasdaq100_members("2020-04-30")
    assert "AAL" in nasdaq100_members(dt.date(2020, 4, 17))
    assert "AAL" not in nasdaq100_members(pd.Timestamp("2020-04-20"))
    assert "ON" in nasdaq100_members("2023-06-30")  # the ticker ON, not a YAML boolean


def test_membership_mask_follows_the_bar_dates() -> None:
    stamps = bar_starts("1d", "2020-04-27", "2020-05-01")
    mask = membership_mask(("ZM", "WLTW", "AAPL", "QQQ"), stamps)
    assert mask.shape == (5, 4)
    assert mask[:, 0].tolist() == [False, False, False, True, True]
    assert mask[:, 1].tolist() == [True, True, True, False, False]
    assert mask[:, 2].all()
    assert not mask[:, 3].any()
    assert np.array_equal(mask, membership_mask(("ZM", "WLTW", "AAPL", "QQQ"), stamps.asi8))


def test_membership_mask_uses_the_new_york_date_of_minute_bars() -> None:
    stamps = bar_starts("1min", "2020-04-29", "2020-04-30")
    mask = membership_mask(("ZM",), stamps)
    assert mask[:, 0].tolist() == [False] * 390 + [True] * 390


def test_todays_ticker_inherits_membership_under_its_former_name() -> None:
    stamps = pd.DatetimeIndex(["2020-01-02 14:30", "2022-06-08 13:30", "2022-06-09 13:30"], tz="UTC")
    mask = membership_mask(("META", "FB"), stamps)
    assert mask[:, 0].tolist() == [True, True, True]  # META is FB before 2022-06-09
    assert mask[:, 1].tolist() == [True, True, False]  # FB is no ticker after the rename
    assert "META" not in nasdaq100_members("2020-01-02")  # the raw list keeps the ticker of the day
    assert "META" in ever_members(dt.date(2020, 1, 1), dt.date(2020, 12, 31))


def test_ever_members_spans_the_window() -> None:
    members = ever_members(dt.date(2020, 4, 1), dt.date(2020, 5, 15))
    assert {"AAL", "DXCM", "WLTW", "ZM"} <= members


@pytest.mark.parametrize("date", ["2014-12-31", "2027-01-02"])
def test_dates_outside_the_known_years_are_an_error(date: str) -> None:
    with pytest.raises(DataError, match="membership is known from 2015-01-01 to 2026-12-31"):
        nasdaq100_members(date)


def test_unknown_universe_is_an_error() -> None:
    assert check_universe("nasdaq100") == "nasdaq100"
    with pytest.raises(DataError, match="unknown universe 'sp500'; use one of nasdaq100, all"):
        check_universe("sp500")


def test_naive_timestamps_are_an_error() -> None:
    with pytest.raises(DataError, match="naive"):
        membership_mask(("AAPL",), pd.DatetimeIndex(["2020-01-02 14:30"]))
