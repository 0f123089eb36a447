"""Split detection on real data: how many of pooksoft's listed splits ``detect_splits`` finds.

pooksoft's 104 daily files (``../shared/data/daily/pooksoft/daily_adjusted``) carry RAW
open/high/low/close/volume beside ``adjusted_close`` and a ``split_coefficient`` column, so each file
gives both sides of the check:

* raw bars (the split column dropped, as a vendor without split information ships them): each listed
  split (coefficient not 1) should be flagged at its ex-date with its ratio (within the detector's
  price tolerance); a flag where none is listed is a false positive, unless the adjusted close moves
  there too (an unlisted share dividend or spin-off, e.g. GOOGL 2014-04-03), counted apart;
* split- and dividend-adjusted bars (the importer's, :func:`finpod.data.importers.pooksoft.read_pooksoft`):
  every flag is a false positive;
* eqker's minute and daily files (adjusted, 2019): every flag is a false positive.

Prints recall, each miss with the rule that rejected it, and the false positives.
Run from the repository root:  python scripts/split_detection_bench.py
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from finpod.data.calendar import EXCHANGE_TIMEZONE
from finpod.data.importers import pooksoft
from finpod.data.importers.common import read_table
from finpod.data.splits import PRICE_TOLERANCE, detect_splits, explain_bar

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
RAW_COLUMNS = ["open", "high", "low", "close", "volume"]
NOT_IN_PRICES = 0.25
"""A listed split whose ``previous close / open`` is more than 25 % off its ratio is not in the prices."""
UNLISTED_ACTION = 0.10
"""The adjusted close's factor moving more than 10 % in a day marks an unlisted corporate action."""


def _day(stamp: pd.Timestamp) -> str:
    return str(stamp.tz_convert(EXCHANGE_TIMEZONE).date())


def _pooksoft(folder: Path) -> dict[str, int | list[str]]:
    listed = found = not_in_prices = 0
    misses: list[str] = []
    raw_fp: list[str] = []
    unlisted: list[str] = []
    adjusted_fp: list[str] = []
    for path in sorted(folder.glob("DA-*.csv")):
        table = read_table(path)
        adjusted = pooksoft.read_pooksoft(table, path, pooksoft.symbol_from_name(path)).bars
        ordered = table.sort_values("timestamp", ignore_index=True)
        symbol = str(adjusted["symbol"].iloc[0])
        stamps = adjusted["timestamp"].reset_index(drop=True)
        raw = pd.DataFrame(
            {
                "timestamp": stamps,
                "symbol": symbol,
                **{c: ordered[c].to_numpy(dtype=np.float64) for c in RAW_COLUMNS},
            }
        )
        adjusted_fp += [jump.describe() for jump in detect_splits(adjusted, "1d")]
        flags = {_day(jump.timestamp): jump for jump in detect_splits(raw, "1d")}
        coefficient = ordered["split_coefficient"].to_numpy(dtype=np.float64)
        factor = (ordered["adjusted_close"] / ordered["close"]).to_numpy(dtype=np.float64)
        for bar in np.flatnonzero((coefficient != 1) & (coefficient > 0)):
            listed += 1
            ratio = float(coefficient[bar])
            day = _day(stamps.iloc[bar])
            jump = flags.pop(day, None)
            if jump is not None and abs(math.log(float(jump.ratio) / ratio)) < math.log1p(PRICE_TOLERANCE):
                found += 1
                continue
            move = raw["close"].iloc[bar - 1] / raw["open"].iloc[bar] if bar > 0 else math.nan
            where = f"{symbol} {day} ratio {ratio:.4g} (previous close / open {move:.3f})"
            if not abs(math.log(move / ratio)) < math.log1p(NOT_IN_PRICES):
                not_in_prices += 1
                misses.append(f"{where}: not in the prices")
                continue
            misses.append(f"{where}: {explain_bar(raw, '1d', int(bar)) if bar > 0 else 'first bar'}")
        for jump in flags.values():
            bar = int(np.flatnonzero(stamps == jump.timestamp)[0])
            if abs(math.log(factor[bar - 1] / factor[bar])) > math.log1p(UNLISTED_ACTION):
                unlisted.append(jump.describe())
            else:
                raw_fp.append(jump.describe())
    return {
        "listed": listed,
        "found": found,
        "not_in_prices": not_in_prices,
        "misses": misses,
        "raw_fp": raw_fp,
        "unlisted": unlisted,
        "adjusted_fp": adjusted_fp,
    }


def _eqker(folder: Path) -> tuple[int, list[str]]:
    """Flags in eqker's ``*_1min.csv`` and ``*_daily.csv`` (rows newest first, US/Eastern, bar END)."""
    files = 0
    flags: list[str] = []
    for pattern, frequency, length in (("*_1min.csv", "1min", "1min"), ("*_daily.csv", "1d", "0min")):
        for path in sorted(folder.glob(pattern)):
            table = pd.read_csv(path).iloc[::-1].reset_index(drop=True)
            ends = pd.to_datetime(table["datetime"]).dt.tz_localize(EXCHANGE_TIMEZONE)
            bars = table[RAW_COLUMNS].astype(np.float64)
            bars.insert(0, "symbol", path.name.split("_")[0])
            bars.insert(0, "timestamp", (ends - pd.Timedelta(length)).dt.tz_convert("UTC"))
            flags += [jump.describe() for jump in detect_splits(bars, frequency)]
            files += 1
    return files, flags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA, help="the shared data folder")
    args = parser.parse_args()
    start = time.perf_counter()
    result = _pooksoft(args.data / "daily" / "pooksoft" / "daily_adjusted")
    listed, found, gone = int(result["listed"]), int(result["found"]), int(result["not_in_prices"])  # type: ignore[arg-type]
    print(f"pooksoft raw: {found}/{listed} listed splits found ({found / listed:.1%}); ", end="")
    print(f"{gone} listed but not in the prices; {found}/{listed - gone} of those in the prices")
    for line in result["misses"]:  # type: ignore[union-attr]
        print(f"  miss {line}")
    for name, title in (
        ("unlisted", "flags at unlisted corporate actions (the adjusted close moves too)"),
        ("raw_fp", "false positives on raw bars"),
        ("adjusted_fp", "false positives on adjusted bars"),
    ):
        lines = result[name]
        print(f"pooksoft {title}: {len(lines)}")  # type: ignore[arg-type]
        for line in lines:  # type: ignore[union-attr]
            print(f"  {line}")
    files, flags = _eqker(args.data / "minute" / "eqker" / "data")
    print(f"eqker false positives ({files} minute and daily files): {len(flags)}")
    for line in flags:
        print(f"  {line}")
    print(f"({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
