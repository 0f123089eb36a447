"""What a population worker holds between rounds (no Ray: :class:`PopulationHost` imports no
transport), and a failure shared by a population's pods counting once towards giving up."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from engine._tournament_kit import (
    ROUND_ENV_STEPS,
    TINY_PPO,
    Validation,
    make_agent,
    make_env,
    new_tournament,
    tournament_config,
)
from podracer import PopulationBackend, read_events
from podracer.backends import population as population_backend
from podracer.backends.pod_host import pack_state
from podracer.backends.population_host import PodRound, PopulationHost, portable_error
from podracer.errors import TournamentError

CODE = (make_agent, make_env, Validation())


def _round(pod_id: int, incarnation: int, state: bytes | None) -> PodRound:
    return PodRound(incarnation, pod_id, TINY_PPO, pod_id, 1, state, 0.0)


def test_a_host_keeps_its_pods_between_rounds_and_drops_the_ones_that_left() -> None:
    host = PopulationHost(torch_threads=1)
    states = [pack_state(make_agent(TINY_PPO, seed).state_dict()) for seed in (0, 1)]
    first = host.run_rounds(CODE, [_round(0, 10, states[0]), _round(1, 11, states[1])])
    assert all(not isinstance(outcome, BaseException) for outcome in first)
    assert host.held() == {0: 10, 1: 11}
    again = host.run_rounds(CODE, [_round(0, 10, None), _round(1, 11, None)])  # no state: it holds them
    assert [outcome[0]["env_steps"] for outcome in again if not isinstance(outcome, BaseException)] == [
        ROUND_ENV_STEPS,
        ROUND_ENV_STEPS,
    ]
    only = host.run_rounds(CODE, [_round(0, 10, None)])  # pod 1 moved elsewhere: dropped here
    assert not isinstance(only[0], BaseException)
    assert host.held() == {0: 10}


def test_a_pod_the_host_cannot_build_fails_alone() -> None:
    host = PopulationHost(torch_threads=1)
    state = pack_state(make_agent(TINY_PPO, 0).state_dict())
    outcomes = host.run_rounds(CODE, [_round(0, 1, state), _round(1, 2, None)])  # pod 1: new, no state
    assert not isinstance(outcomes[0], BaseException)
    assert isinstance(outcomes[1], TournamentError)
    assert "holds no agent for pod 1" in str(outcomes[1])
    assert host.held() == {0: 1}


class _Unpicklable(Exception):
    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")


def test_errors_cross_to_the_driver_as_themselves_or_named() -> None:
    made: dict[int, BaseException] = {}
    plain = ValueError("bad evaluate")
    assert portable_error(plain, made) is plain
    odd = _Unpicklable(7, "custom init")
    named = portable_error(odd, made)
    assert isinstance(named, TournamentError)
    assert str(named) == "_Unpicklable: 7: custom init"
    assert portable_error(odd, made) is named  # one failure stays one object
    pickle.loads(pickle.dumps(named))


def test_a_population_round_that_fails_counts_as_one_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool of 8 > max_consecutive_crashes (5): one failed population round fails all 8 pods'
    rounds with one exception; the tournament restores them and goes on instead of giving up."""
    real = population_backend.train_population_round
    failed: list[int] = []

    def fails_once(agents: list[Any], envs: list[Any]) -> Any:
        if not failed and agents[0].env_steps >= 2 * ROUND_ENV_STEPS:
            failed.append(len(agents))
            raise RuntimeError("the device ran out of memory")
        return real(agents, envs)

    monkeypatch.setattr(population_backend, "train_population_round", fails_once)
    config = tournament_config(pool_size=8, budget_env_steps=40 * ROUND_ENV_STEPS, max_consecutive_crashes=5)
    with new_tournament(tmp_path, config, PopulationBackend(8, torch_threads=1, workers=1)) as tournament:
        result = tournament.run()
    crashed = [e for e in read_events(tmp_path) if e["kind"] == "pod_crashed"]
    assert failed == [8]
    assert len(crashed) == 8
    assert result.crashes == 8
    assert result.env_steps >= config.budget_env_steps
