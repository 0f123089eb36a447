"""Alpaca's public endpoints, in one light module (no alpaca-py import), so a CLI option can name
its default without loading the client library every ``finpod`` command would otherwise pay for."""

from __future__ import annotations

from typing import Final

ALPACA_DATA_URL: Final[str] = "https://data.alpaca.markets"
"""Market data REST API (historical bars, corporate actions, latest bars)."""
ALPACA_STREAM_URL: Final[str] = "wss://stream.data.alpaca.markets/v2/iex"
"""Live minute bars over a websocket (the free IEX feed)."""
PAPER_TRADING_URL: Final[str] = "https://paper-api.alpaca.markets"
"""The paper-trading API (orders, positions, account, clock)."""
