"""The selected agent's card names the ensemble's real members: one per distinct lineage."""

from __future__ import annotations

from typing import Any

from finpod.report.summary import ensemble_members, winner_details


def _entry(rank: int, pod: int, lineage: int, parent: int | None) -> dict[str, Any]:
    return {"rank": rank, "pod_id": pod, "lineage_id": lineage, "parent_id": parent, "score": 3.0 - rank}


def test_one_lineage_makes_no_ensemble_and_lists_no_members() -> None:
    # the demo's board: pods 4, 5, 2 (and more) all descend from pod 2; the run backtests no ensemble
    entries = [_entry(1, 4, 2, 2), _entry(2, 5, 2, 2), _entry(3, 2, 2, None), _entry(4, 6, 2, 2)]
    assert ensemble_members(entries, 3) == []
    details = winner_details(entries, 3)
    assert details is not None
    assert details.ensemble_pods == []


def test_members_are_the_best_entry_of_each_of_the_top_lineages() -> None:
    entries = [
        _entry(3, 2, 2, None),  # records in any order: ranked by "rank"
        _entry(1, 4, 2, 2),
        _entry(2, 5, 2, 2),
        _entry(4, 7, 7, None),
        _entry(5, 8, 7, 7),
        _entry(6, 9, 9, None),
        _entry(7, 11, 11, None),
    ]
    assert [entry["pod_id"] for entry in ensemble_members(entries, 3)] == [4, 7, 9]
    assert [entry["pod_id"] for entry in ensemble_members(entries, 2)] == [4, 7]
    assert ensemble_members(entries, 1) == []  # one member is no ensemble
    assert ensemble_members(entries, None) == []
    details = winner_details(entries, 3)
    assert details is not None
    assert details.ensemble_pods == ["4", "7", "9"]


def test_records_without_lineage_list_no_members() -> None:
    entries = [{"rank": 1, "pod_id": 1, "score": 1.0}, {"rank": 2, "pod_id": 2, "score": 0.5}]
    assert ensemble_members(entries, 2) == []
