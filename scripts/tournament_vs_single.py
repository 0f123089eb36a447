"""Experiment: for the same total env-step budget, does a podracer tournament beat single PPO pods?

Task: the domain-free toy task (:class:`podracer.toy.TargetMatchingEnv`, contextual target matching,
reward in ``[-1, 0]``, 0 optimal). Every contender is the same PPO with the same base
hyper-parameters and the same total budget of env steps:

* ``tournament``: a tournament of ``--pool-size`` pods sharing the budget; its result is the
  leaderboard's best entry (chosen on the validation batch).
* ``single (full budget)``: one pod trained alone on the whole budget, keeping its best checkpoint on
  the validation batch. This is the baseline the tournament's claim is about: one agent given all
  the compute the tournament used.
* ``best of P (split budget)``: ``--pool-size`` independent pods with ``budget / P`` steps each
  (same base config, different seeds), the best on validation kept: the tournament without its
  generator and updater (no copying of leaders, no perturbation, no replacement of laggards).

Every contender is scored on a separate test batch of observations it was never selected on, so
selection on validation does not inflate its score. Each seed changes the task's hidden matrix, the
batches and every agent's seed. Printed per contender: mean, std, min and max over seeds.

Run: ``.venv/bin/python scripts/tournament_vs_single.py --seeds 5`` (a few minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from podracer import Policy, Tournament, TournamentConfig
from podracer.ppo import PPOAgent, PPOConfig
from podracer.toy import TargetMatchingEnv

OBS_DIM = 8
ACTION_DIM = 4
NUM_ENVS = 64
EPISODE_LENGTH = 64
ACTION_LOW, ACTION_HIGH = 0.0, 1.0
EVAL_ROWS = 2048
"""Observations in each of the validation and test batches."""
VALIDATION_SEED_OFFSET, TEST_SEED_OFFSET = 1_000, 2_000
"""Batch seeds are the run seed plus these offsets (disjoint batches)."""
BASE_CONFIG = PPOConfig(
    rollout_steps=32,
    learning_rate=3e-4,
    update_epochs=4,
    num_minibatches=8,
    hidden_sizes=(64, 64),
    activation="tanh",
)
"""The same base PPO for every contender (the tournament perturbs its copies)."""
TOURNAMENT, SINGLE, SPLIT = "tournament", "single (full budget)", "best of P (split budget)"


@dataclasses.dataclass(frozen=True)
class Task:
    """One seed's task: env factory, agent factory, and the validation and test scorers."""

    seed: int

    def env(self, seed: int) -> TargetMatchingEnv:
        """A training env of this seed's task (``seed`` is unused: the agent seeds its resets)."""
        del seed
        return TargetMatchingEnv(
            NUM_ENVS, OBS_DIM, ACTION_DIM, EPISODE_LENGTH, ACTION_LOW, ACTION_HIGH, self.seed, "cpu"
        )

    def agent(self, config: Any, seed: int) -> PPOAgent:
        """A PPO agent for the task."""
        return PPOAgent(OBS_DIM, ACTION_DIM, ACTION_LOW, ACTION_HIGH, config, "cpu", seed)

    def scorer(self, batch_seed: int) -> Callable[[Policy], float]:
        """Mean reward of a policy's actions on a fixed batch of observations."""
        env = self.env(0)
        obs = torch.randn(EVAL_ROWS, OBS_DIM, generator=torch.Generator().manual_seed(batch_seed))

        def score(policy: Policy) -> float:
            with torch.no_grad():
                return float(env.reward(obs, policy(obs)).mean())

        return score


def run_tournament(task: Task, budget_env_steps: int, pool_size: int, run_dir: Path) -> float:
    """Test score of the tournament's best leaderboard entry."""
    config = TournamentConfig(
        pool_size=pool_size,
        leaderboard_size=2 * pool_size,
        budget_env_steps=budget_env_steps,
        budget_seconds=None,
        fresh_pod_prob=0.1,
        perturb_scale=0.5,
        softmax_temperature=1.0,
        eval_every_rounds=1,
        seed=task.seed,
        lagging_rounds=3,
        max_consecutive_crashes=5,
    )
    validation = task.scorer(task.seed + VALIDATION_SEED_OFFSET)
    result = Tournament(config, run_dir, task.agent, BASE_CONFIG, task.env, validation).run()
    best = result.leaderboard.load_agent(0, task.agent)
    entry = result.leaderboard.entries[0]
    print(
        f"  tournament seed {task.seed}: best pod {entry.pod_id} (generation {entry.generation}) learned "
        f"from {entry.env_steps} env steps along its lineage ({result.rounds} rounds)"
    )
    return task.scorer(task.seed + TEST_SEED_OFFSET)(best.act)


def train_single(task: Task, budget_env_steps: int, seed: int) -> tuple[float, dict[str, Any]]:
    """Train one pod alone; returns its best validation score and that checkpoint's state."""
    agent, env = task.agent(BASE_CONFIG, seed), task.env(seed)
    validation = task.scorer(task.seed + VALIDATION_SEED_OFFSET)
    best_score, best_state = validation(agent.act), agent.state_dict()
    while agent.env_steps < budget_env_steps:
        agent.train_round(env)
        score = validation(agent.act)
        if score > best_score:
            best_score, best_state = score, agent.state_dict()
    return best_score, best_state


def run_single(task: Task, budget_env_steps: int) -> float:
    """Test score of one pod trained on the whole budget (best validation checkpoint)."""
    _, state = train_single(task, budget_env_steps, seed=task.seed)
    agent = task.agent(BASE_CONFIG, task.seed)
    agent.load_state_dict(state)
    return task.scorer(task.seed + TEST_SEED_OFFSET)(agent.act)


def run_best_of_split(task: Task, budget_env_steps: int, pods: int) -> float:
    """Test score of the best (on validation) of ``pods`` independent pods with ``budget / pods`` each."""
    runs = [train_single(task, budget_env_steps // pods, seed=task.seed * pods + i) for i in range(pods)]
    _, state = max(runs, key=lambda run: run[0])
    agent = task.agent(BASE_CONFIG, task.seed)
    agent.load_state_dict(state)
    return task.scorer(task.seed + TEST_SEED_OFFSET)(agent.act)


def summary(name: str, scores: list[float], seconds: float) -> str:
    """One table row: mean, std, min, max over seeds, and wall time."""
    std = statistics.stdev(scores) if len(scores) > 1 else 0.0
    return (
        f"{name:<28} {statistics.mean(scores):>8.4f} {std:>8.4f} {min(scores):>8.4f} "
        f"{max(scores):>8.4f} {seconds:>8.1f}"
    )


def run_seed(task: Task, args: argparse.Namespace, scratch: Path) -> dict[str, tuple[float, float]]:
    """Every contender on one seed's task: ``{name: (test score, wall seconds)}``."""
    contenders: dict[str, Callable[[], float]] = {
        TOURNAMENT: lambda: run_tournament(
            task, args.budget_env_steps, args.pool_size, scratch / f"{task.seed}"
        ),
        SINGLE: lambda: run_single(task, args.budget_env_steps),
        SPLIT: lambda: run_best_of_split(task, args.budget_env_steps, args.pool_size),
    }
    results: dict[str, tuple[float, float]] = {}
    for name, contender in contenders.items():
        start = time.perf_counter()
        score = contender()
        results[name] = (score, time.perf_counter() - start)
    return results


def main() -> None:
    """Run every contender over the seeds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds (0..seeds-1)")
    parser.add_argument("--budget-env-steps", type=int, default=100_000, help="total env steps per contender")
    parser.add_argument("--pool-size", type=int, default=4, help="tournament pods (and split-budget pods)")
    parser.add_argument(
        "--torch-threads", type=int, default=1, help="torch intra-op threads (1: comparable on a shared box)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.torch_threads)
    scores: dict[str, list[float]] = {TOURNAMENT: [], SINGLE: [], SPLIT: []}
    seconds = dict.fromkeys(scores, 0.0)
    with tempfile.TemporaryDirectory() as scratch:
        for seed in range(args.seeds):
            results = run_seed(Task(seed), args, Path(scratch))
            for name, (score, wall_s) in results.items():
                scores[name].append(score)
                seconds[name] += wall_s
            print(f"seed {seed}: " + ", ".join(f"{name} {score:.4f}" for name, (score, _) in results.items()))
    print(
        f"\ntoy task {OBS_DIM}->{ACTION_DIM}, {args.budget_env_steps} env steps per contender, "
        f"pool {args.pool_size}, {args.seeds} seeds; test-batch score (mean reward, 0 is optimal)"
    )
    print(f"{'contender':<28} {'mean':>8} {'std':>8} {'min':>8} {'max':>8} {'time s':>8}")
    for name, values in scores.items():
        print(summary(name, values, seconds[name]))


if __name__ == "__main__":
    main()
