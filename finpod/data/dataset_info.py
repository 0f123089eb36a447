"""Summary of a dataset folder against the XNAS calendar, for ``finpod data info``.

"Filled bars" are the calendar cells, from each symbol's first bar to the dataset's last session, that
have no bar (the panel fills them from the last close, not tradable). "Tradable share" is the share of
all ``symbols x calendar bars`` cells that hold a real bar.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from finpod.data.calendar import EXCHANGE_TIMEZONE, calendar_grid
from finpod.data.store import read_dataset


@dataclass(frozen=True)
class DatasetInfo:
    """What ``finpod data info`` shows.

    Attributes:
        path: the dataset folder.
        source, frequency, adjustment, calendar: from the manifest.
        symbols: tickers, sorted.
        first_bar, last_bar: UTC ISO bar starts.
        bars: rows in the dataset.
        calendar_bars: XNAS bars ``T`` from the first to the last session.
        filled_bars: calendar cells after each symbol's first bar without a bar.
        off_calendar_bars: bars not on the XNAS grid (0 for a dataset finpod wrote: regular hours only).
        tradable_share: real bars on the grid / (symbols x calendar bars).
        regular_hours_only: every bar is on the XNAS regular-hours grid.
        repairs: what the loader repaired, counted.
        notes: the manifest's notes.
    """

    path: str
    source: str
    frequency: str
    adjustment: str
    calendar: str
    symbols: list[str]
    first_bar: str
    last_bar: str
    bars: int
    calendar_bars: int
    filled_bars: int
    off_calendar_bars: int
    tradable_share: float
    regular_hours_only: bool
    repairs: dict[str, int]
    notes: list[str]

    def to_json_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict."""
        return asdict(self)


def dataset_info(path: Path) -> DatasetInfo:
    """Read a dataset (hash checked) and summarise it against the XNAS calendar.

    Args:
        path: a dataset folder.

    Returns:
        The summary.

    Raises:
        DataError: the folder is not a whole dataset.
    """
    bars, manifest = read_dataset(path)
    stamps = pd.DatetimeIndex(bars["timestamp"]).as_unit("ns")
    first_day = stamps.min().tz_convert(EXCHANGE_TIMEZONE).tz_localize(None).normalize()
    last_day = stamps.max().tz_convert(EXCHANGE_TIMEZONE).tz_localize(None).normalize()
    grid = calendar_grid(manifest.frequency, first_day, last_day)
    grid_ns = grid.timestamps_ns
    values = stamps.asi8
    row = np.clip(np.searchsorted(grid_ns, values), 0, grid_ns.shape[0] - 1)
    on_grid = grid_ns[row] == values
    codes, names = pd.factorize(bars["symbol"])
    first_row = np.full(len(names), grid.num_bars, dtype=np.int64)
    np.minimum.at(first_row, codes[on_grid], row[on_grid])
    cells_after_first = int((grid.num_bars - first_row).sum())
    real = int(on_grid.sum())
    return DatasetInfo(
        path=str(path),
        source=manifest.source,
        frequency=manifest.frequency,
        adjustment=manifest.adjustment,
        calendar=manifest.calendar,
        symbols=list(manifest.symbols),
        first_bar=manifest.first_bar,
        last_bar=manifest.last_bar,
        bars=manifest.rows,
        calendar_bars=grid.num_bars,
        filled_bars=cells_after_first - real,
        off_calendar_bars=len(values) - real,
        tradable_share=real / (len(names) * grid.num_bars),
        regular_hours_only=real == len(values),
        repairs=dict(manifest.repairs),
        notes=list(manifest.notes),
    )
