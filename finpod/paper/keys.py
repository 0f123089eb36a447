"""Alpaca keys from the environment only, and their redaction from every message.

The keys are read from ``APCA_API_KEY_ID`` and ``APCA_API_SECRET_KEY`` (as ``finpod data fetch``
does) and never printed. A :class:`Redactor` replaces them in any text before it reaches a log, the
journal or the terminal, including error bodies a server echoes back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from finpod.data.alpaca_source import keys_from_env

REDACTED: Final[str] = "[redacted]"
MIN_SECRET_CHARS: Final[int] = 4
"""Shorter values are not redacted (they would blank out ordinary words)."""


@dataclass(frozen=True)
class AlpacaKeys:
    """The key id and secret; ``repr`` never shows them."""

    key_id: str
    secret_key: str

    def __repr__(self) -> str:
        return f"AlpacaKeys(key_id={REDACTED}, secret_key={REDACTED})"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AlpacaKeys:
        """Keys from ``env`` (``os.environ``).

        Raises:
            BrokerError: a variable is missing or empty (the message names both, never a value).
        """
        key_id, secret = keys_from_env(env)
        return cls(key_id, secret)


class Redactor:
    """Replaces every secret in a text with :data:`REDACTED`."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        """``text`` with every secret replaced."""
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def log_filter(self) -> logging.Filter:
        """A logging filter that redacts every record's formatted message in place."""
        redact = self

        class _Filter(logging.Filter):
            def filter(self, record: logging.LogRecord) -> bool:
                record.msg = redact(record.getMessage())
                record.args = None
                return True

        return _Filter()
