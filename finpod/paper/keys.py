"""Alpaca keys from the environment only, and their redaction from every message.

The keys are read from ``APCA_API_KEY_ID`` and ``APCA_API_SECRET_KEY`` (as ``finpod data fetch``
does) and never printed. A :class:`Redactor` registers them with :mod:`finpod.net` (so the CLI's error
path redacts them too) and replaces them, plain, URL-encoded or base64, in any text before it
reaches a log, the journal or the terminal, including error bodies a server echoes back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from finpod.data.alpaca_source import keys_from_env
from finpod.net import REDACTED, redact, register_secret


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
    """Replaces every secret of this process in a text with ``[redacted]`` (:func:`finpod.net.redact`)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        for secret in secrets:
            register_secret(secret)

    def __call__(self, text: str) -> str:
        """``text`` with every secret replaced."""
        return redact(text)

    def log_filter(self) -> logging.Filter:
        """A logging filter that redacts every record's formatted message in place."""
        redact = self

        class _Filter(logging.Filter):
            def filter(self, record: logging.LogRecord) -> bool:
                record.msg = redact(record.getMessage())
                record.args = None
                return True

        return _Filter()
