"""Deterministic client order ids: the same decision always names the same order.

An id is a function of (run, trader, bar timestamp, symbol, side) only, so a restarted trader that
decides again on the same bar asks the broker about the order it may already have sent, instead of
sending a second one. Alpaca accepts up to 128 characters; ours are 35.
"""

from __future__ import annotations

import hashlib
from typing import Final

ID_PREFIX: Final[str] = "fp-"
DIGEST_HEX_CHARS: Final[int] = 32


def client_order_id(run_id: str, trader: str, bar_ns: int, symbol: str, side: str) -> str:
    """The client order id of one order.

    Args:
        run_id: the run folder's name.
        trader: ``"best"``, ``"ensemble"``, ``"trajectory"`` or ``"pick"`` (the name asked for, not
            what a pick resolved to).
        bar_ns: start of the decision bar, UTC nanoseconds.
        symbol: ticker.
        side: ``"buy"`` or ``"sell"``.

    Returns:
        ``"fp-"`` + 32 hex digits of a sha256 over the five fields.
    """
    text = "|".join((run_id, trader, str(int(bar_ns)), symbol, side))
    return ID_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:DIGEST_HEX_CHARS]
