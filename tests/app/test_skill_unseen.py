"""``scripts/skill_unseen.py``: the skill bench's cases of the kind it never plants."""

from __future__ import annotations

import dataclasses

import pytest

from finpod.bench import skill_bench
from repo import load_script


def test_the_unseen_cases_are_the_reversal_5_cases_with_the_other_signal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(skill_bench, "CASES", dict(skill_bench.CASES))
    names = load_script("skill_unseen").add_unseen_cases()
    assert "daily100-momentum_60-ic05-5bp" in names
    assert "daily20-momentum_60-ic02-20bp" in names
    assert len(names) == 8
    case = skill_bench.CASES["daily100-momentum_60-ic05-5bp"]
    twin = skill_bench.CASES["daily100-reversal_5-ic05-5bp"]
    assert (case.signal.kind, case.signal.strength) == ("momentum_60", 0.05)
    assert dataclasses.replace(case, name=twin.name, signal=twin.signal) == twin
    skill_bench.check_choices(["daily20-momentum_60-ic05-5bp"], ["tournament"], ["defaults"], 1)


def test_the_script_runs_the_cli_on_its_arguments(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(skill_bench, "CASES", dict(skill_bench.CASES))
    with pytest.raises(SystemExit) as stop:
        load_script("skill_unseen").main(["bench", "skill", "--help"])
    assert stop.value.code == 0
    assert "--case" in capsys.readouterr().out
