"""The data layer's named choices and defaults that a user states on the command line: in a module that
imports nothing heavy, so ``finpod --help`` (which reads them from the commands' signatures) starts
without numpy, pandas or torch. The modules that act on them import them from here."""

from __future__ import annotations

from typing import Final, Literal

OutlierPolicy = Literal["error", "drop", "keep"]
"""What an import does with the bars :func:`finpod.data.outliers.find_outliers` flags."""
DuplicatePolicy = Literal["error", "first", "last"]
"""What an import does with two bars of one symbol at one timestamp."""
BarAnchor = Literal["start", "end"]
"""Whether a naive intraday timestamp marks its bar's start or its end."""
SignalKind = Literal["none", "reversal", "momentum", "reversal_5", "momentum_60", "volume", "nonlinear"]
"""The kinds of signal the synthetic market can plant (:mod:`finpod.data.signals`)."""
ALPHA_ANNUAL: Final[float] = 0.10
"""The synthetic market's planted annual alpha of its +/- alpha symbols (:mod:`finpod.data.synth`)."""
DEFAULT_START: Final[str] = "2016-01-04"
"""The synthetic market's first session when none is named."""
