"""Scale-out figures for BENCHMARKS.md: local vs Ray backend, scheduling rate, learner fusion at K = 1, 2.

Everything runs on the toy task (``podracer.toy``) on CPU with one torch thread per pod, so the
figures measure the machinery (orchestration, actors, fusion), not finpod's env.

    PYTHONPATH=$PWD:$PWD/engine python scripts/bench_scale.py backends   # local vs Ray tournament
    PYTHONPATH=$PWD:$PWD/engine python scripts/bench_scale.py schedule   # pod rounds scheduled per second
    PYTHONPATH=$PWD:$PWD/engine python scripts/bench_scale.py fusion     # samples/s, time-to-score, K=1,2
    PYTHONPATH=$PWD:$PWD/engine python scripts/bench_scale.py learner    # one plain learner (K = 1)

Each prints one JSON line per measurement. Ray runs start a private Ray on 127.0.0.1 (no dashboard).
``learner`` needs only ``podracer.ppo`` and ``podracer.toy``, so it also runs against an engine from
before learner fusion existed (``PYTHONPATH=<old checkout>/engine``): K = 1 before and after fusion.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

import podracer
from podracer import Policy, Tournament, TournamentConfig
from podracer.api import RoundStats, TensorVectorEnv
from podracer.backends import Backend, LocalBackend, PopulationBackend
from podracer.pod import pod_policy
from podracer.ppo import PPOAgent, PPOConfig
from podracer.toy import TargetMatchingEnv

OBS_DIM, ACTION_DIM, NUM_ENVS, EPISODE = 8, 4, 64, 32
PPO = PPOConfig(
    rollout_steps=32, learning_rate=1e-3, update_epochs=4, num_minibatches=4, hidden_sizes=(64, 64)
)
ROUND_STEPS = PPO.rollout_steps * NUM_ENVS
TARGET_SCORE = -0.17
"""Validation reward (0 is optimal, a uniform policy scores about -0.27) that counts as "learned"."""


def make_env(seed: int) -> TargetMatchingEnv:
    """A pod's env: the toy task (fixed by task_seed), ``NUM_ENVS`` envs, on the CPU."""
    del seed
    return TargetMatchingEnv(NUM_ENVS, OBS_DIM, ACTION_DIM, EPISODE, 0.0, 1.0, 3, "cpu")


def make_agent(config: Any, seed: int) -> PPOAgent:
    """A PPO learner for the toy task."""
    return PPOAgent(OBS_DIM, ACTION_DIM, 0.0, 1.0, config, "cpu", seed)


class Validation:
    """Mean reward on a fixed batch of 1024 observations (higher is better, 0 optimal)."""

    def __init__(self) -> None:
        self.env = make_env(0)
        self.obs = torch.randn(1024, OBS_DIM, generator=torch.Generator().manual_seed(1))

    def __call__(self, policy: Policy) -> float:
        with torch.no_grad():
            return float(self.env.reward(self.obs, policy(self.obs)).mean())


def _config(budget_rounds: int, pool: int) -> TournamentConfig:
    return TournamentConfig(
        pool_size=pool,
        leaderboard_size=4,
        budget_env_steps=budget_rounds * ROUND_STEPS,
        budget_seconds=None,
        fresh_pod_prob=0.2,
        perturb_scale=0.2,
        softmax_temperature=1.0,
        eval_every_rounds=1,
        seed=0,
        pool_schedule="fixed",
        torch_threads_per_pod=1,
    )


def _tournament(backend: Backend, rounds: int, pool: int, agent_factory: Any = make_agent) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        tournament = Tournament(
            _config(rounds, pool), Path(folder), agent_factory, PPO, make_env, Validation(), backend
        )
        start = time.perf_counter()
        result = tournament.run()
        wall = time.perf_counter() - start
    return {
        "wall_s": round(wall, 2),
        "env_steps": result.env_steps,
        "env_steps_per_s": round(result.env_steps / wall),
        "rounds": result.rounds,
        "rounds_per_s": round(result.rounds / wall, 2),
        "best": round(max(result.leaderboard.scores()), 4),
    }


def _ray_backend(**options: Any) -> tuple[Backend, float]:
    from podracer.backends.ray_backend import RayBackend

    start = time.perf_counter()
    backend = RayBackend(None, **options)
    return backend, time.perf_counter() - start


def bench_backends(rounds: int = 40, pool: int = 2) -> None:
    """The same tournament on the local backend and on a private local Ray, wall time and steps/s."""
    torch.set_num_threads(1)
    local = LocalBackend(pool, torch_threads_per_slot=1)
    try:
        print(
            json.dumps(
                {"bench": "tournament", "backend": "local", "pool": pool, **_tournament(local, rounds, pool)}
            )
        )
    finally:
        local.shutdown()
    backend, startup = _ray_backend(cpus_per_pod=1.0, max_slots=pool)
    try:
        _tournament(backend, 2 * pool, pool)  # warm: the actors' processes start and import torch once
        figures = _tournament(backend, rounds, pool)
        print(
            json.dumps(
                {
                    "bench": "tournament",
                    "backend": "ray",
                    "pool": pool,
                    "ray_start_s": round(startup, 1),
                    **figures,
                }
            )
        )
    finally:
        backend.shutdown()


def bench_populations(rounds: int = 40, pool: int = 4) -> None:
    """The same lockstep tournament as one population in this process and as populations of
    ``pool / 2`` pods on two Ray actors (a private local Ray), beside one pod an actor."""
    from podracer.backends.ray_population import RayPopulationBackend

    torch.set_num_threads(1)
    own = PopulationBackend(pool, torch_threads=1, workers=2)
    try:
        figures = _tournament(own, rounds, pool)
        print(json.dumps({"bench": "tournament", "backend": "population", "pool": pool, **figures}))
    finally:
        own.shutdown()
    contenders: list[tuple[str, Any]] = [
        (
            "ray populations",
            lambda: RayPopulationBackend(None, pods_per_worker=pool // 2, cpus_per_pod=2 / pool),
        ),
        ("ray pods", lambda: _ray_backend(cpus_per_pod=2 / pool, max_slots=pool)[0]),
    ]
    for name, make in contenders:
        backend = make()
        try:
            _tournament(backend, 2 * pool, pool)  # warm: the actors start and import torch once
            figures = _tournament(backend, rounds, pool)
            print(json.dumps({"bench": "tournament", "backend": name, "pool": pool, **figures}))
        finally:
            backend.shutdown()


class NoWorkAgent:
    """An agent whose round costs nothing: what is left is the backend's scheduling per round."""

    def __init__(self, config: Any, seed: int) -> None:
        self.config, self.seed, self.env_steps = config, seed, 0

    def train_round(self, env: TensorVectorEnv) -> RoundStats:
        self.env_steps += ROUND_STEPS
        return RoundStats(env_steps=ROUND_STEPS, seconds=0.0)

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        return torch.full((obs.shape[0], ACTION_DIM), 0.5)

    def state_dict(self) -> dict[str, Any]:
        return {"env_steps": self.env_steps, "w": torch.zeros(4)}

    def load_state_dict(self, state: Any) -> None:
        self.env_steps = int(state["env_steps"])

    def load_weights_from(self, state: Any, keep_optimizer: bool) -> None:
        del state, keep_optimizer


def bench_schedule(rounds: int = 300, pool: int = 2) -> None:
    """Pod rounds per second when a round does no work: the orchestrator plus the backend's overhead."""
    torch.set_num_threads(1)
    local = LocalBackend(pool, torch_threads_per_slot=1)
    try:
        figures = _tournament(local, rounds, pool, NoWorkAgent)
        print(json.dumps({"bench": "schedule", "backend": "local", "pool": pool, **figures}))
    finally:
        local.shutdown()
    backend, _ = _ray_backend(cpus_per_pod=1.0, max_slots=pool)
    try:
        _tournament(backend, 2 * pool, pool, NoWorkAgent)
        figures = _tournament(backend, rounds, pool, NoWorkAgent)
        print(json.dumps({"bench": "schedule", "backend": "ray", "pool": pool, **figures}))
    finally:
        backend.shutdown()


def bench_learner(rounds: int = 30, warmup_rounds: int = 2) -> None:
    """One plain PPO learner (what ``learners = 1`` builds): samples/s of whole training rounds."""
    torch.set_num_threads(1)
    agent, env = make_agent(PPO, 7), make_env(7)
    for _ in range(warmup_rounds):
        agent.train_round(env)
    start = time.perf_counter()
    samples = sum(agent.train_round(env).env_steps for _ in range(rounds))
    wall = time.perf_counter() - start
    engine = str(Path(podracer.__file__).resolve().parents[1])
    figures = {"rounds": rounds, "samples_per_s": round(samples / wall)}
    print(json.dumps({"bench": "learner", "engine": engine, **figures}))


def bench_fusion(max_rounds: int = 50) -> None:
    """One pod with K learners: samples/s (all learners' transitions) and time to TARGET_SCORE."""
    from podracer.fusion import FusedAgent

    torch.set_num_threads(1)
    validation = Validation()
    for learners, moments in ((1, True), (2, True), (2, False)):
        agent: Any = (
            make_agent(PPO, 7)
            if learners == 1
            else FusedAgent(make_agent, make_env, PPO, 7, learners, moments)
        )
        env = make_env(7)
        if learners > 1:
            agent.learner_vectors()  # start the helper process outside the timing
        samples, start, reached = 0, time.perf_counter(), None
        for round_index in range(1, max_rounds + 1):
            samples += agent.train_round(env).env_steps
            score = validation(pod_policy(agent))
            if reached is None and score >= TARGET_SCORE:
                reached = (round_index, round(time.perf_counter() - start, 2), samples)
        wall = time.perf_counter() - start
        print(
            json.dumps(
                {
                    "bench": "fusion",
                    "learners": learners,
                    "fuse_moments": moments if learners > 1 else None,
                    "rounds": max_rounds,
                    "samples_per_s": round(samples / wall),
                    "final_score": round(score, 4),
                    "to_target": None
                    if reached is None
                    else dict(zip(("rounds", "seconds", "samples"), reached, strict=True)),
                }
            )
        )
        if isinstance(agent, FusedAgent):
            agent.close()


if __name__ == "__main__":
    benches = {
        "backends": bench_backends,
        "populations": bench_populations,
        "schedule": bench_schedule,
        "fusion": bench_fusion,
        "learner": bench_learner,
    }
    names = sys.argv[1:] or list(benches)
    for name in names:
        benches[name]()
    sys.exit(0)
