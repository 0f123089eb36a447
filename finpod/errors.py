"""User-facing errors: one line that names the problem and the fix.

The CLI turns any :class:`FinpodError` into ``error: <message>`` on stderr and exit code 2, with no
traceback. Library callers catch them like any exception.
"""

from __future__ import annotations


class FinpodError(Exception):
    """Base class of every error a user can cause (bad file, bad spec, bad flag, bad broker reply)."""

    def __init__(self, message: str) -> None:
        one_line = " ".join(message.split())
        super().__init__(one_line)


class DataError(FinpodError):
    """A data file, dataset or panel request is malformed; the message names file, symbol and time."""


class SpecError(FinpodError):
    """A strategy spec or CLI option is invalid; the message names the field and the fix."""


class BrokerError(FinpodError):
    """The broker (Alpaca) answered with something finpod cannot use, or keys are missing."""
