"""The engine's errors: one line each, naming the problem and the fix.

An application catches :class:`PodracerError` (or wraps it in its own error type) to print it.
"""

from __future__ import annotations


class PodracerError(Exception):
    """Base class of every error the engine raises on purpose."""


class SnapshotError(PodracerError):
    """A snapshot, leaderboard index or run-state file is missing, corrupt, truncated or foreign.

    The engine never unpickles such a file: it refuses it with this error.
    """


class TournamentError(PodracerError):
    """A tournament was configured or driven wrongly (bad settings, wrong run directory, ...)."""
