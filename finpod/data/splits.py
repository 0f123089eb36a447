"""Stock splits: an adjustment label is checked against the bars, never assumed.

An unadjusted k:1 split shows in raw bars as the price dividing by ``k`` from one bar to the next
(overnight, or intraday in a bad vendor file) while the traded share volume multiplies by about ``k``
for good, or stays where it was where the vendor split-adjusted the volume but not the prices
(AlphaVantage does). :func:`detect_splits` finds such jumps for the common ratios
(:data:`SPLIT_RATIOS`) and keeps only those that look like a split on every count:

* price: ``previous close / open`` within :data:`PRICE_TOLERANCE` of a split ratio;
* volume, compared in blocks of :func:`block_bars` bars (a day of daily bars, a session of minute
  bars), :data:`VOLUME_BLOCKS` blocks on each side: the median block's share volume moved between
  "not at all" and "by the ratio, the other way", give or take :data:`VOLUME_DROP` below and
  :data:`NEWS_VOLUME_TOLERANCE` above (more is news, not a split);
* no news spike: the first block at the new price traded at most :data:`SPIKE_LIMIT` times the usual
  shares at the new price (a split is a quiet day; a crash or a take-over bid is not);
* the close confirms it: the first bar closes within :data:`CLOSE_TOLERANCE` of the ratio below the
  bar before (a gap the day takes back is no split);
* no reversal: no other jump within a block on either side undoes it (one bad bar or a one-day
  glitch jumps there and back).

A crash on news trades heavily; one that halves the price exactly on a quiet tape is flagged like a
split whose volume the vendor adjusted (a table row ``1:1`` clears it). Measured on the 104 pooksoft
daily files (1999..2021, ``python scripts/split_detection_bench.py``): zero flags on their
split-adjusted bars and on eqker's minute bars; on their RAW bars 130 of the 136 listed splits found
(95.6 %) and 4 other flags, each a share dividend or spin-off the adjusted close accounts for
(GOOGL 2014-04-03, MDLZ 2012-10-02). Smaller ratios (4:3, 5:4) are not checked: a 20-25 % gap on quiet
volume is as often a real move there.

:func:`apply_splits` adjusts bars with a corporate-actions table (``symbol,date,ratio``: ``ratio``
is new shares per old share, e.g. ``4`` or ``4:1`` for a four-for-one split and ``1:10`` for a
one-for-ten reverse split; ``date`` is the ex-date, the first New York session at the new price):
every bar before the ex-date has its prices divided by the ratio and its volume multiplied by it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Final

import numpy as np
import pandas as pd

from finpod.data.calendar import EXCHANGE_TIMEZONE
from finpod.data.input_paths import check_input_file
from finpod.data.textfile import source_line
from finpod.errors import DataError

SPLIT_RATIOS: Final[tuple[Fraction, ...]] = tuple(
    Fraction(new, old)
    for new, old in (
        (2, 1), (3, 2), (3, 1), (4, 1), (5, 1), (6, 1), (7, 1), (8, 1), (10, 1), (15, 1), (20, 1),
        (1, 2), (2, 3), (1, 3), (1, 4), (1, 5), (1, 6), (1, 8), (1, 10), (1, 15), (1, 20), (1, 30), (1, 50),
    )
)  # fmt: skip
"""Split ratios checked, new shares per old share (forward and reverse splits). Not 4:3 or 5:4: where
the vendor adjusted the volume, a -25 % gap on quiet volume is as often a real move (NVDA 2002-07-31)."""
PRICE_TOLERANCE: Final[float] = 0.06
"""A jump matches a ratio when ``|log(jump) - log(ratio)| < log(1 + PRICE_TOLERANCE)``. A split day
often opens a few percent off the ratio (ADI 2000-03-16: 1.887 for 2:1); at 8 % real moves match
(AMD 2002-10-17: x1.40 up on quiet volume, near a 2:3 reverse split)."""
VOLUME_DROP: Final[float] = 1.0
"""The share volume may fall to ``1 / (1 + this)`` of the usual the wrong way (a quiet week after)."""
NEWS_VOLUME_TOLERANCE: Final[float] = 1.0
"""The share volume may rise at most ``1 + this`` times more than the split explains (else news)."""
CLOSE_TOLERANCE: Final[float] = 0.25
"""The first bar at the new price closes within this of ``previous close / ratio`` (a gap that the
day takes back, CTSH 2000-04-17, is no split)."""
SPIKE_LIMIT: Final[float] = 3.0
"""The first block at the new price trades at most this many times the usual shares there. A crash
on news (BKNG 2000-11-03: price /1.50, shares x7 on the day) or a panic (AAPL 2000-09-29) is no split."""
VOLUME_BLOCKS: Final[int] = 5
"""Blocks of :func:`block_bars` bars compared on each side of a jump."""
PRICE_COLUMNS: Final[tuple[str, ...]] = ("open", "high", "low", "close")
ACTION_COLUMNS: Final[tuple[str, ...]] = ("symbol", "date", "ratio")
SPLITS_SHOWN: Final[int] = 3
"""Suspect splits a refusal shows (all are counted)."""


@dataclass(frozen=True)
class SplitJump:
    """A jump in one symbol's bars that looks like an unadjusted split.

    Attributes:
        symbol: the ticker.
        timestamp: UTC start of the first bar at the new price.
        ratio: the matching split ratio, new shares per old share.
        price_ratio: ``previous close / open`` at that bar.
        volume_ratio: median volume after / median volume before.
    """

    symbol: str
    timestamp: pd.Timestamp
    ratio: Fraction
    price_ratio: float
    volume_ratio: float

    def describe(self) -> str:
        """``AAPL 2020-08-31 13:30:00+00:00: price /4.00 with volume x3.9, like an unadjusted 4:1 split``."""
        where = f"{self.symbol} {self.timestamp}"
        volume = f"while volume moved x{self.volume_ratio:.2f}"
        if self.price_ratio > 1:
            move = f"price fell to 1/{self.price_ratio:.2f} of the bar before {volume}"
            return f"{where}: {move}, like an unadjusted {ratio_text(self.ratio)} split"
        move = f"price rose x{1 / self.price_ratio:.2f} over the bar before {volume}"
        return f"{where}: {move}, like an unadjusted {ratio_text(self.ratio)} reverse split"


def ratio_text(ratio: Fraction) -> str:
    """``Fraction(4)`` -> ``"4:1"``, ``Fraction(1, 10)`` -> ``"1:10"``, ``Fraction(3, 2)`` -> ``"3:2"``."""
    return f"{ratio.numerator}:{ratio.denominator}"


def block_bars(frequency: str) -> int:
    """Bars per volume block: one daily bar, or one session (390) of minute bars."""
    return 390 if frequency == "1min" else 1


def _block_means(volume: np.ndarray, starts: range, size: int) -> np.ndarray:
    """Mean volume of the blocks ``volume[s : s + size]`` (clipped to the series), zero ones left out."""
    means = [float(volume[max(0, s) : s + size].mean()) for s in starts if s + size > 0 and s < volume.size]
    out = np.array(means, dtype=np.float64)
    return out[out > 0]


def _is_reversal(jump: np.ndarray, position: int, reach: int, tolerance: float) -> bool:
    """Whether another jump within ``reach`` bars of ``jump[position]`` undoes it (a glitch, not a split)."""
    lo, hi = max(0, position - reach), min(jump.size, position + reach + 1)
    others = np.delete(jump[lo:hi], position - lo)
    return bool((np.abs(others + jump[position]) < tolerance).any())


@dataclass(frozen=True)
class _Series:
    """One symbol's bars as arrays: ``close``, ``opens``, ``volume`` (``n``) and ``jump`` (``n - 1``,
    ``jump[p] = log(close[p] / open[p + 1])``, the move into bar ``p + 1``)."""

    close: np.ndarray
    opens: np.ndarray
    volume: np.ndarray
    jump: np.ndarray


def _series(rows: pd.DataFrame) -> _Series:
    close = rows["close"].to_numpy(dtype=np.float64)
    opens = rows["open"].to_numpy(dtype=np.float64)
    volume = rows["volume"].to_numpy(dtype=np.float64)
    return _Series(close, opens, volume, np.log(close[:-1] / opens[1:]))


def _judge(series: _Series, position: int, size: int, ratio: int) -> tuple[float, str | None]:
    """Check the jump ``series.jump[position]`` against split ratio ``SPLIT_RATIOS[ratio]``.

    Returns:
        The volume move (log, median block after / before; NaN without volume) and ``None`` when the
        jump looks like a split on every count, else the rule it fails, in words.
    """
    bar = position + 1
    volume = series.volume
    before = _block_means(volume, range(bar - size, bar - (VOLUME_BLOCKS + 1) * size, -size), size)
    after = _block_means(volume, range(bar, bar + VOLUME_BLOCKS * size, size), size)
    first_block = float(volume[bar : bar + size].mean())
    if before.size == 0 or after.size == 0 or first_block <= 0:
        return math.nan, "volume: no traded volume on one side"
    usual = float(np.median(before))
    volume_move = math.log(float(np.median(after)) / usual)
    split_size = math.log(float(SPLIT_RATIOS[ratio]))
    direction = math.copysign(1.0, split_size)
    # Share volume in the split's direction: 0 when the vendor adjusted it, the split's size when raw.
    shares = volume_move * direction
    if shares < -math.log1p(VOLUME_DROP):
        return volume_move, f"volume: shares x{math.exp(volume_move):.2f}, the wrong way for a split"
    if shares - abs(split_size) >= math.log1p(NEWS_VOLUME_TOLERANCE):
        return volume_move, f"volume: shares x{math.exp(volume_move):.2f}, more than the split explains"
    # The usual shares at the new price: the level after, from 1 (vendor-adjusted) up to the split's size.
    expected = min(max(volume_move, 0.0), max(split_size, 0.0))
    spike = math.log(first_block / usual) - expected
    if spike >= math.log(SPIKE_LIMIT):
        return volume_move, f"spike: the first block traded x{math.exp(spike):.1f} the usual shares (news)"
    settled = math.log(series.close[bar - 1] / series.close[bar])
    if abs(settled - split_size) >= math.log1p(CLOSE_TOLERANCE):
        return volume_move, f"close: the first bar closed x{math.exp(-settled):.2f} the bar before"
    if _is_reversal(series.jump, position, size, math.log1p(PRICE_TOLERANCE)):
        return volume_move, "reversal: another jump undoes it (a bad bar)"
    return volume_move, None


def _nearest_ratio(jump: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each jump: the index of the nearest :data:`SPLIT_RATIOS` entry and its log distance."""
    log_ratios = np.log(np.array([float(r) for r in SPLIT_RATIOS]))
    distance = np.abs(jump[:, None] - log_ratios[None, :])
    nearest = distance.argmin(axis=1)
    return nearest, distance[np.arange(jump.size), nearest]


def detect_splits(bars: pd.DataFrame, frequency: str) -> list[SplitJump]:
    """Jumps in ``bars`` that look like unadjusted splits (price, volume, no spike, close, no reversal).

    Args:
        bars: bar-schema frame (validated), ``n`` rows, oldest first within each symbol.
        frequency: ``"1min"`` or ``"1d"`` (sets :func:`block_bars`).

    Returns:
        One :class:`SplitJump` per suspect bar, ordered by symbol then time.
    """
    size = block_bars(frequency)
    tolerance = math.log1p(PRICE_TOLERANCE)
    found: list[SplitJump] = []
    for symbol, rows in bars.groupby("symbol", sort=True):
        if len(rows) < 2:
            continue
        series = _series(rows)
        nearest, distance = _nearest_ratio(series.jump)
        for position in np.flatnonzero(distance < tolerance):
            ratio = int(nearest[position])
            volume_move, failed = _judge(series, int(position), size, ratio)
            if failed is None:
                found.append(
                    SplitJump(
                        symbol=str(symbol),
                        timestamp=rows["timestamp"].iloc[int(position) + 1],
                        ratio=SPLIT_RATIOS[ratio],
                        price_ratio=float(math.exp(series.jump[position])),
                        volume_ratio=float(math.exp(volume_move)),
                    )
                )
    return found


def explain_bar(bars: pd.DataFrame, frequency: str, bar: int) -> str:
    """Why :func:`detect_splits` does or does not flag the jump into row ``bar`` of one symbol's bars.

    Args:
        bars: one symbol's bar-schema rows, oldest first, ``n`` rows.
        frequency: ``"1min"`` or ``"1d"``.
        bar: the row (``1 <= bar < n``) of the first bar at the new price.

    Returns:
        ``"flagged"``, or the first rule the jump fails (``"price: ..."``, ``"volume: ..."``, ...).
    """
    series = _series(bars)
    nearest, distance = _nearest_ratio(series.jump[bar - 1 : bar])
    move = math.exp(series.jump[bar - 1])
    if distance[0] >= math.log1p(PRICE_TOLERANCE):
        return f"price: previous close / open = {move:.3f}, no split ratio within {PRICE_TOLERANCE:.0%}"
    _, failed = _judge(series, bar - 1, block_bars(frequency), int(nearest[0]))
    return "flagged" if failed is None else failed


def confirmed_moves(actions: pd.DataFrame) -> set[tuple[str, pd.Timestamp]]:
    """``(symbol, New York date)`` of the table's ``1:1`` rows: jumps the user checked are real moves."""
    ones = actions.loc[[ratio == 1 for ratio in actions["ratio"]]]
    return {
        (str(symbol), pd.Timestamp(date)) for symbol, date in zip(ones["symbol"], ones["date"], strict=True)
    }


def session_date(timestamp: pd.Timestamp) -> pd.Timestamp:
    """The New York session date (naive midnight) of a UTC bar start."""
    return timestamp.tz_convert(EXCHANGE_TIMEZONE).tz_localize(None).normalize()


def parse_ratio(value: object, where: str) -> Fraction:
    """A split ratio from ``4``, ``4.0``, ``"4:1"``, ``"1:10"``, ``"3/2"`` (new shares per old share).

    Raises:
        DataError: not a positive ratio.
    """
    text = str(value).strip()
    try:
        if ":" in text:
            new, old = text.split(":", 1)
            ratio = Fraction(int(new), int(old))
        else:
            ratio = Fraction(text).limit_denominator(1000)
    except (ValueError, ZeroDivisionError):
        raise DataError(f"{where}: split ratio {text!r} is not a ratio; write e.g. 4:1 or 1:10") from None
    if ratio <= 0:
        raise DataError(f"{where}: split ratio {text!r} must be positive; write e.g. 4:1 or 1:10")
    return ratio


def read_actions(path: Path) -> pd.DataFrame:
    """A corporate-actions table: ``symbol,date,ratio`` rows (CSV), one per split.

    Args:
        path: the CSV file (``--adjust splits=FILE``).

    Returns:
        Frame with ``symbol`` (str), ``date`` (ex-date, ``datetime64`` naive New York date) and
        ``ratio`` (:class:`fractions.Fraction`, new shares per old share).

    Raises:
        DataError: missing file or columns, a bad date or ratio (naming the line).
    """
    if not path.exists() and not path.is_symlink():
        raise DataError(f"{path}: corporate-actions table not found; fix: pass --adjust splits=FILE")
    check_input_file(path)
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as err:
        reason = " ".join(str(err).split())
        raise DataError(f"{path}: cannot be read as CSV ({reason}); write symbol,date,ratio rows") from None
    table.columns = [str(c).strip().lower() for c in table.columns]
    missing = [c for c in ACTION_COLUMNS if c not in table.columns]
    if missing:
        raise DataError(
            f"{path}: corporate-actions table lacks column(s) {', '.join(missing)}; "
            "write a header symbol,date,ratio (e.g. AAPL,2020-08-31,4:1)"
        )
    dates = pd.to_datetime(table["date"], format="ISO8601", errors="coerce")
    bad = np.flatnonzero(dates.isna().to_numpy())
    if bad.size:
        where = source_line(path, int(bad[0]))
        raise DataError(f"{path}: {where}: date {table['date'].iloc[int(bad[0])]!r} is not YYYY-MM-DD")
    ratios = []
    for row, value in enumerate(table["ratio"]):
        try:
            ratios.append(parse_ratio(value, str(path)))
        except DataError:
            ratios.append(parse_ratio(value, f"{path}: {source_line(path, row)}"))
    return pd.DataFrame(
        {"symbol": table["symbol"].str.strip().to_numpy(), "date": dates.dt.normalize(), "ratio": ratios}
    )


def apply_splits(bars: pd.DataFrame, actions: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Adjust ``bars`` for the splits in ``actions`` (see :func:`read_actions`).

    Bars before a split's ex-date (New York session date) get prices divided by the ratio and
    volume multiplied by it, so the series is continuous in today's shares.

    Args:
        bars: bar-schema frame, ``n`` rows.
        actions: ``symbol, date, ratio`` rows.

    Returns:
        The adjusted bars (a copy) and the number of splits that touched a symbol of ``bars``.
    """
    out = bars.copy()
    for name in (*PRICE_COLUMNS, "volume"):
        out[name] = out[name].to_numpy(dtype=np.float64)
    session = pd.DatetimeIndex(out["timestamp"]).tz_convert(EXCHANGE_TIMEZONE).tz_localize(None).normalize()
    symbols = out["symbol"].to_numpy()
    applied = 0
    for symbol, ex_date, ratio in zip(actions["symbol"], actions["date"], actions["ratio"], strict=True):
        if ratio == 1:
            continue  # a 1:1 row marks a real price move, not a split
        earlier = (symbols == symbol) & (session < pd.Timestamp(ex_date))
        if not earlier.any():
            continue
        factor = float(ratio)
        for name in PRICE_COLUMNS:
            out.loc[earlier, name] = out.loc[earlier, name] / factor
        out.loc[earlier, "volume"] = out.loc[earlier, "volume"] * factor
        applied += 1
    return out, applied


ALREADY_ADJUSTED_JUMP: Final[float] = 0.25
"""A listed split whose bar moves less than 25 % is already in the prices (the source adjusted them)."""


@dataclass(frozen=True)
class Reconciled:
    """Listed splits checked against the bars (see :func:`reconcile_splits`).

    Attributes:
        bars: the bars, adjusted for the listed splits that were still raw in them.
        applied: listed splits whose jump was in the bars and was adjusted.
        already_adjusted: listed splits the bars were already adjusted for.
    """

    bars: pd.DataFrame
    applied: int
    already_adjusted: int


def reconcile_splits(bars: pd.DataFrame, actions: pd.DataFrame, lister: str) -> Reconciled:
    """Check each listed split against the bars: adjust it where the prices still jump, count it where not.

    At a split's ex-date (the first bar of that New York session) the prices either jump by the
    ratio (raw: earlier bars of that symbol get prices divided by the ratio and volume multiplied by
    it) or barely move (already adjusted: less than :data:`ALREADY_ADJUSTED_JUMP`). A split whose
    ex-date has no bar on both sides in ``bars`` is left alone; ``1:1`` rows are skipped.

    Args:
        bars: bar-schema frame, ``n`` rows, oldest first within each symbol.
        actions: ``symbol, date, ratio`` rows (see :func:`read_actions`).
        lister: who lists the splits, for messages (``"Alpaca's corporate actions"``).

    Returns:
        The :class:`Reconciled` bars and counts.

    Raises:
        DataError: a listed split whose bar moved neither by the ratio nor by little (one line).
    """
    out = bars.copy()
    for name in (*PRICE_COLUMNS, "volume"):
        out[name] = out[name].to_numpy(dtype=np.float64)
    session = pd.DatetimeIndex(out["timestamp"]).tz_convert(EXCHANGE_TIMEZONE).tz_localize(None).normalize()
    symbols = out["symbol"].to_numpy()
    applied = already = 0
    for symbol, ex_date, ratio in zip(actions["symbol"], actions["date"], actions["ratio"], strict=True):
        if ratio == 1:
            continue
        mine = np.flatnonzero(symbols == symbol)
        later = mine[session[mine] >= pd.Timestamp(ex_date)]
        if later.size == 0 or later[0] == mine[0]:
            continue  # no bar on both sides of the ex-date
        first, last = int(later[0]), int(mine[mine < later[0]][-1])
        jump = float(out["close"].iloc[last] / out["open"].iloc[first])
        if abs(math.log(jump / float(ratio))) < math.log1p(PRICE_TOLERANCE):
            earlier = (symbols == symbol) & (np.arange(len(out)) < first)
            for name in PRICE_COLUMNS:
                out.loc[earlier, name] = out.loc[earlier, name] / float(ratio)
            out.loc[earlier, "volume"] = out.loc[earlier, "volume"] * float(ratio)
            applied += 1
        elif abs(math.log(jump)) < math.log1p(ALREADY_ADJUSTED_JUMP):
            already += 1
        else:
            raise DataError(
                f"{symbol} {out['timestamp'].iloc[first]}: {lister} list a {ratio_text(ratio)} split "
                f"but the price moved x{1 / jump:.3f} there, neither raw nor adjusted; fix: pass --adjust "
                "splits=FILE with a row for that date (the right ratio, or 1:1 to keep the prices as given)"
            )
    return Reconciled(out, applied, already)
