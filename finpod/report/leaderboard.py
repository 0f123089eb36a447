"""The tournament records the report shows: leaderboard snapshots over time and the final entries.

The main job passes plain dicts (read from the podracer leaderboard); these models validate them and
name the missing or malformed key. Unknown keys are kept (and ignored by the report).
"""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, ConfigDict, Field


class LeaderboardRecord(BaseModel):
    """One snapshot of the leaderboard during the tournament.

    Attributes:
        elapsed_s: wall time since the tournament started, seconds.
        env_steps: env transitions collected by all pods so far.
        best_score: best validation score on the leaderboard (``None`` while it is empty).
        scores: validation scores of every leaderboard entry at that moment.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    elapsed_s: float = Field(ge=0)
    env_steps: int = Field(ge=0)
    best_score: float | None
    scores: list[float]


class LeaderboardEntry(BaseModel):
    """One entry of the final leaderboard, best first.

    Attributes:
        rank: 1 for the best entry.
        pod_id: id of the pod whose snapshot this is (key ``pod_id`` or ``pod``).
        generation: how many parent links lead back to a pod trained from scratch.
        parent_id: id of the pod it was initialised from (``None`` when trained from scratch; key
            ``parent_id`` or ``parent``).
        score: validation score.
    """

    model_config = ConfigDict(extra="allow", frozen=True, coerce_numbers_to_str=True)

    rank: int = Field(ge=1)
    pod_id: str = Field(validation_alias=AliasChoices("pod_id", "pod"))
    generation: int = Field(ge=0)
    parent_id: str | None = Field(validation_alias=AliasChoices("parent_id", "parent"))
    score: float


def parse_history(records: list[dict[str, object]]) -> list[LeaderboardRecord]:
    """Validate leaderboard snapshots, sorted by elapsed time (raises pydantic ``ValidationError``)."""
    parsed = [LeaderboardRecord.model_validate(record) for record in records]
    return sorted(parsed, key=lambda record: record.elapsed_s)


def parse_entries(entries: list[dict[str, object]]) -> list[LeaderboardEntry]:
    """Validate final leaderboard entries, sorted by rank (raises pydantic ``ValidationError``)."""
    parsed = [LeaderboardEntry.model_validate(entry) for entry in entries]
    return sorted(parsed, key=lambda entry: entry.rank)
