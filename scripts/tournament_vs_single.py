"""Experiment: for the same total env-step budget, does a podracer tournament beat single PPO pods?

Every contender is the same PPO with the same base hyper-parameters and the same total budget of
env steps:

* ``tournament``: a tournament of ``--pool-size`` pods sharing the budget; its result is the
  leaderboard's best entry (chosen on the validation score).
* ``single (full budget)``: one pod trained alone on the whole budget, keeping its best checkpoint on
  the validation score. This is the baseline the tournament's claim is about: one agent given all
  the env steps the tournament used.
* ``best of P (split budget)``: ``--pool-size`` independent pods with ``budget / P`` steps each
  (same base config, different seeds), the best on validation kept: the same per-pod budget and the
  same wall time on P workers as the tournament, without its generator and updater (no copying of
  leaders, no perturbation, no replacement of laggards).

Every contender is then scored once on data it was never selected on (``test``), so selection on
validation does not inflate its score.

Problems:

* default: the domain-free toy task (:class:`podracer.toy.TargetMatchingEnv`, contextual target
  matching; score = mean reward on a batch of observations, in ``[-1, 0]``, 0 optimal). Each seed
  changes the task's hidden matrix, the validation and test batches, and every agent's seed.
* ``--finpod-spec strategies/demo.toml``: the finpod trading env of a strategy spec (train segment),
  PPO from the spec's ``[agent]`` table; validation = annualised Sharpe on the validation segment,
  test = annualised Sharpe on the backtest segment (touched once per contender, after selection).
  Each seed changes every agent's and the tournament's seed; the market is the spec's.

Printed per contender: mean, std, min and max of the test score over seeds, and wall time.

Run: ``.venv/bin/python scripts/tournament_vs_single.py --seeds 5`` (a few minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from podracer import Policy, TensorVectorEnv, Tournament, TournamentConfig
from podracer.config import PoolSchedule
from podracer.ppo import PPOAgent, PPOConfig
from podracer.toy import TargetMatchingEnv

OBS_DIM = 8
ACTION_DIM = 4
NUM_ENVS = 64
EPISODE_LENGTH = 64
ACTION_LOW, ACTION_HIGH = 0.0, 1.0
EVAL_ROWS = 2048
"""Observations in each of the toy task's validation and test batches."""
VALIDATION_SEED_OFFSET, TEST_SEED_OFFSET = 1_000, 2_000
"""Toy batch seeds are the run seed plus these offsets (disjoint batches)."""
TOY_BASE_CONFIG = PPOConfig(
    rollout_steps=32,
    learning_rate=3e-4,
    update_epochs=4,
    num_minibatches=8,
    hidden_sizes=(64, 64),
    activation="tanh",
)
"""The same base PPO for every contender on the toy task (the tournament perturbs its copies)."""
TOURNAMENT, SINGLE, SPLIT = "tournament", "single (full budget)", "best of P (split budget)"


@dataclasses.dataclass(frozen=True)
class Problem:
    """What the contenders train on and how they are scored.

    Attributes:
        seed: the run seed (tournament seed; base of the agents' seeds).
        base_config: the PPO every contender starts from.
        env: ``seed -> TensorVectorEnv``, a training env.
        agent: ``(config, seed) -> PPOAgent``.
        validation: ``policy -> score`` used for every selection (higher is better).
        test: ``policy -> score`` reported, never used for selection.
    """

    seed: int
    base_config: PPOConfig
    env: Callable[[int], TensorVectorEnv]
    agent: Callable[[Any, int], PPOAgent]
    validation: Callable[[Policy], float]
    test: Callable[[Policy], float]


def toy_problem(seed: int, base_config: PPOConfig = TOY_BASE_CONFIG) -> Problem:
    """The toy task with its matrix, batches and agent seeds drawn from ``seed``, from ``base_config``."""

    def env(env_seed: int) -> TargetMatchingEnv:
        del env_seed  # the agent seeds its env's resets; the task is fixed by ``seed``
        return TargetMatchingEnv(
            NUM_ENVS, OBS_DIM, ACTION_DIM, EPISODE_LENGTH, ACTION_LOW, ACTION_HIGH, seed, "cpu"
        )

    def agent(config: Any, agent_seed: int) -> PPOAgent:
        return PPOAgent(OBS_DIM, ACTION_DIM, ACTION_LOW, ACTION_HIGH, config, "cpu", agent_seed)

    def scorer(batch_seed: int) -> Callable[[Policy], float]:
        reference = env(0)
        obs = torch.randn(EVAL_ROWS, OBS_DIM, generator=torch.Generator().manual_seed(batch_seed))

        def score(policy: Policy) -> float:
            with torch.no_grad():
                return float(reference.reward(obs, policy(obs)).mean())

        return score

    return Problem(
        seed,
        base_config,
        env,
        agent,
        scorer(seed + VALIDATION_SEED_OFFSET),
        scorer(seed + TEST_SEED_OFFSET),
    )


def finpod_problem(spec_path: Path, seed: int) -> Problem:
    """The finpod trading env of a strategy spec (imports finpod: this script is not engine code)."""
    import empyrical as ep

    from finpod.backtest.pyfolio_format import ledger_to_result
    from finpod.backtest.runner import run_policy
    from finpod.data.panel import Panel
    from finpod.env.trading_env import TradingEnv
    from finpod.paths import default_data_root
    from finpod.pipeline.context import RunContext
    from finpod.pipeline.inputs import (
        backtest_panel,
        dataset_for,
        load_bars,
        selection_panel,
        universe_symbols,
    )
    from finpod.spec import Spec

    spec = Spec.from_toml(spec_path)
    device = torch.device(spec.resolve_device())
    bars = load_bars(dataset_for(spec, default_data_root()))
    symbols = universe_symbols(spec, bars)
    selection = selection_panel(spec, bars, symbols, str(device))
    full = backtest_panel(spec, bars, symbols, str(device))
    context = RunContext.of(spec, selection, device)
    eval_config = context.eval_config

    def env(env_seed: int) -> TradingEnv:
        return context.train_env(selection, env_seed)

    agent = context.agent_factory  # the pipeline's own: agents built on one thread

    def sharpe(panel: Panel, segment: str) -> Callable[[Policy], float]:
        def score(policy: Policy) -> float:
            ledger = run_policy(panel, segment, eval_config, policy, device)
            returns = ledger_to_result(
                "candidate", "trader", panel, ledger, eval_config.initial_cash_usd
            ).returns
            value = float(ep.sharpe_ratio(returns.to_numpy()))
            return value if math.isfinite(value) else 0.0

        return score

    return Problem(
        seed, spec.agent_config(), env, agent, sharpe(selection, "validation"), sharpe(full, "backtest")
    )


def run_tournament(
    problem: Problem, budget_env_steps: int, pool_size: int, run_dir: Path, schedule: PoolSchedule
) -> float:
    """Test score of the tournament's best leaderboard entry."""
    config = TournamentConfig(
        pool_size=pool_size,
        leaderboard_size=2 * pool_size,
        budget_env_steps=budget_env_steps,
        budget_seconds=None,
        fresh_pod_prob=0.1,
        perturb_scale=0.3,
        softmax_temperature=1.0,
        eval_every_rounds=1,
        seed=problem.seed,
        lagging_rounds=2,
        max_consecutive_crashes=5,
        pool_schedule=schedule,
    )
    with Tournament(
        config, run_dir, problem.agent, problem.base_config, problem.env, problem.validation
    ) as tournament:
        result = tournament.run()
    best = result.leaderboard.load_agent(0, problem.agent)
    entry = result.leaderboard.entries[0]
    print(
        f"  tournament seed {problem.seed}: best pod {entry.pod_id} (generation {entry.generation}) learned "
        f"from {entry.env_steps} env steps along its lineage ({result.rounds} rounds)"
    )
    return problem.test(best.act)


def train_single(problem: Problem, budget_env_steps: int, seed: int) -> tuple[float, dict[str, Any]]:
    """Train one pod alone; returns its best validation score and that checkpoint's state."""
    agent, env = problem.agent(problem.base_config, seed), problem.env(seed)
    best_score, best_state = problem.validation(agent.act), agent.state_dict()
    while agent.env_steps < budget_env_steps:
        agent.train_round(env)
        score = problem.validation(agent.act)
        if score > best_score:
            best_score, best_state = score, agent.state_dict()
    return best_score, best_state


def score_on_test(problem: Problem, state: dict[str, Any]) -> float:
    """Test score of the agent stored in ``state``."""
    agent = problem.agent(problem.base_config, problem.seed)
    agent.load_state_dict(state)
    return problem.test(agent.act)


def run_single(problem: Problem, budget_env_steps: int) -> float:
    """Test score of one pod trained on the whole budget (best validation checkpoint)."""
    _, state = train_single(problem, budget_env_steps, seed=problem.seed)
    return score_on_test(problem, state)


def run_best_of_split(problem: Problem, budget_env_steps: int, pods: int) -> float:
    """Test score of the best (on validation) of ``pods`` independent pods with ``budget / pods`` each."""
    runs = [
        train_single(problem, budget_env_steps // pods, seed=problem.seed * pods + i) for i in range(pods)
    ]
    _, state = max(runs, key=lambda run: run[0])
    return score_on_test(problem, state)


def run_seed(problem: Problem, args: argparse.Namespace, scratch: Path) -> dict[str, tuple[float, float]]:
    """Every contender on one seed's problem: ``{name: (test score, wall seconds)}``."""
    contenders: dict[str, Callable[[], float]] = {
        TOURNAMENT: lambda: run_tournament(
            problem, args.budget_env_steps, args.pool_size, scratch / f"{problem.seed}", args.schedule
        ),
        SINGLE: lambda: run_single(problem, args.budget_env_steps),
        SPLIT: lambda: run_best_of_split(problem, args.budget_env_steps, args.pool_size),
    }
    results: dict[str, tuple[float, float]] = {}
    for name, contender in contenders.items():
        start = time.perf_counter()
        score = contender()
        results[name] = (score, time.perf_counter() - start)
    return results


def summary(name: str, scores: list[float], seconds: float) -> str:
    """One table row: mean, std, min, max over seeds, and wall time."""
    std = statistics.stdev(scores) if len(scores) > 1 else 0.0
    return (
        f"{name:<28} {statistics.mean(scores):>8.4f} {std:>8.4f} {min(scores):>8.4f} "
        f"{max(scores):>8.4f} {seconds:>8.1f}"
    )


def main() -> None:
    """Run every contender over the seeds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds (0..seeds-1)")
    parser.add_argument("--budget-env-steps", type=int, default=100_000, help="total env steps per contender")
    parser.add_argument("--pool-size", type=int, default=4, help="tournament pods (and split-budget pods)")
    parser.add_argument(
        "--torch-threads", type=int, default=1, help="torch intra-op threads (1: comparable on a shared box)"
    )
    parser.add_argument(
        "--schedule", choices=["halving", "fixed"], default="halving", help="the tournament's pool schedule"
    )
    parser.add_argument(
        "--learning-rate", type=float, default=None, help="toy task: the contenders' starting learning rate"
    )
    parser.add_argument("--gamma", type=float, default=None, help="toy task: the contenders' starting gamma")
    parser.add_argument(
        "--finpod-spec", type=Path, default=None, help="a strategy TOML: run on the finpod env instead"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.torch_threads)
    start = dataclasses.replace(
        TOY_BASE_CONFIG,
        learning_rate=TOY_BASE_CONFIG.learning_rate if args.learning_rate is None else args.learning_rate,
        gamma=TOY_BASE_CONFIG.gamma if args.gamma is None else args.gamma,
    )
    scores: dict[str, list[float]] = {TOURNAMENT: [], SINGLE: [], SPLIT: []}
    seconds = dict.fromkeys(scores, 0.0)
    with tempfile.TemporaryDirectory() as scratch:
        for seed in range(args.seeds):
            problem = (
                toy_problem(seed, start)
                if args.finpod_spec is None
                else finpod_problem(args.finpod_spec, seed)
            )
            results = run_seed(problem, args, Path(scratch))
            for name, (score, wall_s) in results.items():
                scores[name].append(score)
                seconds[name] += wall_s
            print(f"seed {seed}: " + ", ".join(f"{name} {score:.4f}" for name, (score, _) in results.items()))
    if args.finpod_spec is None:
        what = (
            f"toy task {OBS_DIM}->{ACTION_DIM}, start lr {start.learning_rate:g} gamma {start.gamma:g}; "
            "test-batch score (mean reward, 0 is optimal)"
        )
    else:
        what = f"finpod env of {args.finpod_spec}; test score = annualised Sharpe on the backtest segment"
    print(
        f"\n{what}; {args.budget_env_steps} env steps per contender, pool {args.pool_size} "
        f"({args.schedule}), {args.seeds} seeds"
    )
    print(f"{'contender':<28} {'mean':>8} {'std':>8} {'min':>8} {'max':>8} {'time s':>8}")
    for name, values in scores.items():
        print(summary(name, values, seconds[name]))


if __name__ == "__main__":
    main()
