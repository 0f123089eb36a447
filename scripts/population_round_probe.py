"""One pod's training round against a population's, per pod, at a spec's shape (one torch thread).

Builds the spec's pods as ``finpod run`` does (its panel, env and agent defaults), then times
``PPOAgent.train_round`` of one pod alone and ``podracer.population.train_population_round`` of
``P`` pods, after three untimed rounds each. The per-pod figure says what batching pods into one
computation saves on this machine: the per-op overhead, not the arithmetic (BENCHMARKS.md "The
run's own process per round").

    python scripts/population_round_probe.py --spec strategies/demo.toml --rounds 20 --pods 1 4 8
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from finpod.paths import default_data_root
from finpod.pipeline.context import RunContext
from finpod.pipeline.inputs import dataset_for, load_bars, selection_panel, universe_symbols
from finpod.spec import Spec
from podracer.population import train_population_round


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="strategies/demo.toml")
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds per setting")
    parser.add_argument("--pods", type=int, nargs="+", default=[1, 4, 8], help="population sizes")
    args = parser.parse_args()
    torch.set_num_threads(1)
    spec = Spec.from_toml(args.spec)
    bars = load_bars(dataset_for(spec, default_data_root()))
    panel = selection_panel(spec, bars, universe_symbols(spec, bars), "cpu")
    context = RunContext.of(spec, panel, torch.device("cpu"))
    config = spec.agent_config()
    steps = config.rollout_steps * spec.env.num_envs
    for pods in [0, *args.pods]:  # 0: one pod alone, on its own train_round
        agents = [context.agent_factory(config, seed) for seed in range(max(pods, 1))]
        envs = [context.train_env(panel, seed) for seed in range(max(pods, 1))]

        def one_round(agents: list[Any] = agents, envs: list[Any] = envs, pods: int = pods) -> None:
            if pods == 0:
                agents[0].train_round(envs[0])
            else:
                train_population_round(agents, envs)

        for _ in range(3):
            one_round()
        start = time.perf_counter()
        for _ in range(args.rounds):
            one_round()
        seconds = (time.perf_counter() - start) / args.rounds
        count = max(pods, 1)
        label = "alone" if pods == 0 else f"population of {pods}"
        print(
            f"{label:>18}: {seconds * 1e3:7.1f} ms a round, {seconds * 1e3 / count:6.1f} ms per pod, "
            f"{count * steps / seconds:8.0f} env steps/s"
        )


if __name__ == "__main__":
    main()
