"""Naive intraday timestamps (no UTC offset): read only as the user or the file's name says, never guessed.

``2019-02-11 09:30`` without an offset can mean two things twice over: the bar STARTS or ENDS at
09:30, in New York or in some other zone. A one-minute bar read the wrong way moves a minute (the
09:30 bar, read as an end, starts at 09:29 and is dropped as outside regular hours). So the importer
refuses such stamps unless ``--timestamps start|end`` and ``--tz ZONE`` say how to read them; an
AlphaVantage-style file name (``SYMBOL_1min.csv``) says "bar end, New York" on its own (the flags,
when given, override it).
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from typing import Final

import pandas as pd

from finpod.data.choices import BarAnchor
from finpod.errors import DataError, SpecError

FLAGS_HINT: Final[str] = (
    "--timestamps start|end and --tz ZONE (e.g. --timestamps start --tz America/New_York)"
)


@dataclass(frozen=True)
class NaiveReading:
    """How to read naive intraday timestamps; ``None`` where the user did not say.

    Attributes:
        anchor: ``"start"`` or ``"end"`` of the bar (``--timestamps``).
        tz: IANA time zone of the wall-clock times (``--tz``), e.g. ``America/New_York``.
    """

    anchor: BarAnchor | None = None
    tz: str | None = None

    def given(self) -> bool:
        """Whether the user said anything about naive timestamps."""
        return self.anchor is not None or self.tz is not None

    def over(self, default: NaiveReading) -> NaiveReading:
        """This reading with what it leaves open taken from ``default`` (a file name's reading)."""
        return NaiveReading(self.anchor or default.anchor, self.tz or default.tz)


UNSAID: Final[NaiveReading] = NaiveReading()
"""No ``--timestamps``, no ``--tz``: naive intraday stamps are refused (unless a file name says)."""


def naive_reading(anchor: BarAnchor | None, tz: str | None) -> NaiveReading:
    """The reading the flags ``--timestamps`` and ``--tz`` ask for, its time zone checked.

    Raises:
        SpecError: ``tz`` is not an IANA time zone name.
    """
    if tz is not None:
        try:
            zoneinfo.ZoneInfo(tz)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise SpecError(
                f"--tz {tz!r} is not a known time zone; use an IANA name such as America/New_York or UTC"
            ) from None
    return NaiveReading(anchor, tz)


def naive_bar_starts(
    stamps: pd.DatetimeIndex, bar_minutes: int, reading: NaiveReading, source: str, symbol: str
) -> pd.DatetimeIndex:
    """UTC bar starts of naive wall-clock intraday stamps read as ``reading`` says.

    Args:
        stamps: naive timestamps, ``(n,)``.
        bar_minutes: the bar length in minutes (subtracted from bar ends).
        reading: how to read them; both fields must be set.
        source: the file, for messages.
        symbol: the ticker of the first row, for messages.

    Returns:
        ``(n,)`` tz-aware UTC bar starts.

    Raises:
        DataError: the reading leaves the anchor or the zone open (the message names both readings
            and the flags), or a stamp does not exist or is ambiguous in the zone (a DST change).
    """
    if reading.anchor is None or reading.tz is None:
        missing = " and ".join(
            flag
            for flag, value in (("--timestamps start|end", reading.anchor), ("--tz ZONE", reading.tz))
            if value is None
        )
        raise DataError(
            f"{source}: {symbol} {stamps[0]}: naive timestamps (no UTC offset) with times of day read two "
            f"ways: each is a bar START or a bar END, and in some time zone (e.g. New York); fix: pass "
            f"{missing if reading.given() else FLAGS_HINT}, or write them with a UTC offset"
        )
    try:
        local = stamps.tz_localize(reading.tz, ambiguous="raise", nonexistent="raise")
    except (ValueError, TypeError) as err:
        reason = " ".join(str(err).split())
        raise DataError(
            f"{source}: {symbol}: a timestamp is not a valid {reading.tz} time ({reason}); fix that row"
        ) from None
    if reading.anchor == "end":
        local = local - pd.Timedelta(minutes=bar_minutes)
    return local.tz_convert("UTC")
