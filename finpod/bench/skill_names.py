"""The choices ``finpod bench skill`` offers, importable without torch (the CLI's help and defaults).

:mod:`finpod.bench.skill_bench` builds its cases, contenders and hyper-parameter sets under these
names (a test checks that they agree). Daily case names read ``daily<M>-<kind>-ic<IC x 100>-<fee>bp``
(``daily20-reversal_5-ic05-20bp``: 20 stocks, multi-bar reversal of information coefficient 0.05,
20 bp fee); ``-none-`` cases have no signal; ``-smoke`` cases carry the strong one-bar reversal of
the demo (IC 0.2, a smoke test, not a figure); ``minute20`` is one-bar reversal at IC 0.02 on minute
bars with the reference 0.2 % fee and a rebalance band.
"""

from __future__ import annotations

from typing import Final

DAILY_SIZES: Final[tuple[int, ...]] = (20, 100)
"""Stocks per daily market."""
DAILY_KINDS: Final[tuple[str, ...]] = ("reversal", "reversal_5", "volume", "nonlinear")
"""Signal kinds of the daily cases (models in :mod:`finpod.data.signals`)."""
DAILY_STRENGTHS: Final[tuple[float, ...]] = (0.02, 0.05)
"""Target information coefficients: a weak and a typical real daily effect."""
FEES_BPS: Final[tuple[int, ...]] = (5, 20)
"""Fees per trade, basis points of traded notional."""
SMOKE_STRENGTH: Final[float] = 0.2
MINUTE_CASE: Final[str] = "minute20"


def daily_case_name(n_symbols: int, kind: str, strength: float, fee_bps: int) -> str:
    """``daily20-reversal-ic05-5bp`` (``kind = "none"``: ``daily20-none-5bp``)."""
    if kind == "none":
        return f"daily{n_symbols}-none-{fee_bps}bp"
    return f"daily{n_symbols}-{kind}-ic{round(strength * 100):02d}-{fee_bps}bp"


def smoke_case_name(n_symbols: int) -> str:
    """``daily20-smoke``: the demo's strong one-bar reversal at 5 bp."""
    return f"daily{n_symbols}-smoke"


DAILY_CASES: Final[tuple[str, ...]] = tuple(
    daily_case_name(size, kind, strength, fee)
    for size in DAILY_SIZES
    for fee in FEES_BPS
    for kind in (*DAILY_KINDS, "none")
    for strength in (DAILY_STRENGTHS if kind != "none" else (0.0,))
)
CASE_NAMES: Final[tuple[str, ...]] = (
    *DAILY_CASES,
    *(smoke_case_name(size) for size in DAILY_SIZES),
    MINUTE_CASE,
)
"""Every case of the bench, in the order of :data:`finpod.bench.skill_bench.CASES`."""
DEFAULT_CASES: Final[tuple[str, ...]] = (
    daily_case_name(20, "reversal", 0.05, 5),
    daily_case_name(20, "nonlinear", 0.05, 5),
    daily_case_name(20, "none", 0.0, 5),
)
"""The cases run without ``--case``: a linear kind, the nonlinear kind and a null case."""
CONTENDERS: Final[tuple[str, ...]] = ("tournament", "single", "best_of_4")
HYPER_SETS: Final[tuple[str, ...]] = ("good", "poor", "defaults")
"""``good``: the bench's hand-set PPO; ``poor``: lr x10 and gamma 0.9; ``defaults``: what ``finpod run``
uses when a spec says nothing about ``[agent]`` and the tournament (only the budget is set)."""
