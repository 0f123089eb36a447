"""HTTP hygiene for every request finpod sends: timeouts, bounded retries, secrets never echoed.

* :func:`install_timeouts` mounts a requests adapter on a session (alpaca-py's clients keep theirs in
  ``client._session``) so every request gets a connect and a read timeout and a bounded number of
  retries on connection errors and read timeouts (GET only: a retried GET cannot trade twice).
* :func:`register_secret` records a secret this process knows (API keys); :func:`redact` replaces
  every registered secret (and its URL-encoded and base64 forms) in a text. The CLI's error path
  redacts every message it prints, whatever a server echoed back.
"""

from __future__ import annotations

import base64
import urllib.parse
from dataclasses import dataclass
from typing import Any, Final

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

REDACTED: Final[str] = "[redacted]"
MIN_SECRET_CHARS: Final[int] = 4
"""Shorter values are not treated as secrets (redacting ``"ab"`` would mangle every message)."""

_secrets: set[str] = set()


@dataclass(frozen=True)
class Timeouts:
    """Per-request limits.

    Attributes:
        connect_s: seconds to establish the connection.
        read_s: seconds to wait for each chunk of the answer.
        retries: extra tries after a connection error or a read timeout (GET only).
        backoff_s: base of urllib3's exponential back-off between those tries, seconds.
    """

    connect_s: float = 5.0
    read_s: float = 30.0
    retries: int = 2
    backoff_s: float = 0.5

    def worst_case_s(self) -> float:
        """The longest one request can take before it fails (every try hangs to its limits), seconds."""
        tries = self.retries + 1
        backoff = sum(min(self.backoff_s * 2**i, Retry.DEFAULT_BACKOFF_MAX) for i in range(1, self.retries))
        return tries * (self.connect_s + self.read_s) + backoff


DEFAULT_TIMEOUTS: Final[Timeouts] = Timeouts()


class _TimeoutAdapter(HTTPAdapter):
    """Gives every request the adapter's ``(connect, read)`` timeout unless the caller set one."""

    def __init__(self, timeouts: Timeouts) -> None:
        retry = Retry(
            total=timeouts.retries,
            connect=timeouts.retries,
            read=timeouts.retries,
            status=0,
            other=0,
            allowed_methods=frozenset({"GET"}),
            backoff_factor=timeouts.backoff_s,
            raise_on_status=False,
        )
        super().__init__(max_retries=retry)
        self._timeout = (timeouts.connect_s, timeouts.read_s)

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = self._timeout
        return super().send(request, **kwargs)


def install_timeouts(session: requests.Session, timeouts: Timeouts = DEFAULT_TIMEOUTS) -> None:
    """Give every request of ``session`` a connect/read timeout and bounded retries.

    Args:
        session: e.g. an alpaca-py client's ``_session``.
        timeouts: the limits.
    """
    adapter = _TimeoutAdapter(timeouts)
    session.mount("http://", adapter)
    session.mount("https://", adapter)


def is_timeout(err: BaseException) -> bool:
    """Whether a requests error is a timeout (possibly wrapped by the retry machinery)."""
    if isinstance(err, requests.Timeout):
        return True
    text = str(err).lower()
    return "timed out" in text or "timeout" in text


def register_secret(value: str) -> None:
    """Remember ``value`` as a secret of this process: :func:`redact` removes it from every text."""
    if len(value) >= MIN_SECRET_CHARS:
        _secrets.add(value)


def redact(text: str) -> str:
    """``text`` with every registered secret (plain, URL-encoded, base64) replaced by ``[redacted]``."""
    forms: set[str] = set()
    for secret in _secrets:
        forms.update({secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)})
        forms.add(base64.b64encode(secret.encode()).decode().rstrip("="))
    for form in sorted(forms, key=len, reverse=True):
        if len(form) >= MIN_SECRET_CHARS:
            text = text.replace(form, REDACTED)
    return text
