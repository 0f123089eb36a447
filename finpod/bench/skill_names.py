"""The choices ``finpod bench skill`` offers, importable without torch (the CLI's help and defaults).

:mod:`finpod.bench.skill_bench` builds its cases, contenders and hyper-parameter sets under these
names (a test checks that they agree).
"""

from __future__ import annotations

from typing import Final

CASE_NAMES: Final[tuple[str, ...]] = ("daily20", "daily100", "daily20-none", "minute20")
"""Every case of the bench, in the order of :data:`finpod.bench.skill_bench.CASES`."""
DEFAULT_CASES: Final[tuple[str, ...]] = ("daily20", "daily100", "daily20-none")
"""The cases run without ``--case`` (the minute case takes much longer)."""
CONTENDERS: Final[tuple[str, ...]] = ("tournament", "single", "best_of_4")
HYPER_SETS: Final[tuple[str, ...]] = ("good", "poor")
