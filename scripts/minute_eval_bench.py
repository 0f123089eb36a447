"""Minute-scale evaluation speed: a validation score and a backtest pass, per bar, then per year.

Builds a 5-symbol synthetic minute panel (``--days`` sessions), makes PPO agents sized like the
reference minute spec (``strategies/nasdaq100_minute.toml``), and times

* one validation score (one snapshot, one env, one policy), and
* the backtest of the traders ``best`` + ``ensemble_top4`` (and the baselines) over one segment,

with the current code ("after": one batched env pass for all traders, one torch thread for batch-1
work) and with the old behaviour ("before": the process's torch threads, one env pass per trader).
Seconds per minute-bar year = seconds per bar x 98,280 (252 sessions x 390 minutes).

Run from the repository root:  python scripts/minute_eval_bench.py --days 20
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import finpod
from finpod.backtest import runner
from finpod.data.panel_builder import build_panel
from finpod.data.synth import synth_market
from finpod.env.trading_env import TradingEnv
from finpod.pipeline.main import ensemble_policy
from finpod.pipeline.training import agent_factory, deterministic_policy, env_config, validation_score
from finpod.spec import Spec, ppo_config_from

BARS_PER_YEAR = 252 * 390
SYMBOLS = 5
ENSEMBLE_K = 4


def _timed(work: Callable[[], Any]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=int, default=20, help="sessions of synthetic minute bars")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="process torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cpu = torch.device("cpu")
    bars = synth_market(SYMBOLS, args.days, "1min", seed=0, start="2019-01-02")
    first, last = bars["timestamp"].min().date(), bars["timestamp"].max().date()
    middle = first + (last - first) / 2
    segments = {"train": (first, middle), "validation": (middle + dt.timedelta(days=1), last)}
    panel = build_panel(
        bars, freq="1min", start=first, end=last, segments=segments, device=cpu, benchmark_symbol=None
    )
    spec = Spec.from_toml(Path(finpod.__file__).parent / "strategies" / "nasdaq100_minute.toml")
    config = env_config(spec, random_start=False)
    probe = TradingEnv(panel, "train", env_config(spec, random_start=True), 1, 0, cpu)
    make = agent_factory(probe, cpu)
    agents = [make(ppo_config_from(spec.agent), seed) for seed in range(ENSEMBLE_K)]
    traders = {"best": deterministic_policy(agents[0]), "ensemble_top4": ensemble_policy(agents, "weights")}
    start, stop = panel.segment("validation")
    bars_timed = stop - start

    def old_threads(rows: int) -> int:
        return torch.get_num_threads()

    def one_pass_each() -> None:
        for policy in traders.values():
            runner.run_policy(panel, "validation", config, policy, cpu)

    figures: dict[str, float] = {}
    new_threads = runner.threads_for
    runner.threads_for = old_threads
    figures["before_validation_s_per_year"] = _timed(
        lambda: validation_score(panel, config, traders["best"], cpu)
    )
    figures["before_backtest_s_per_year"] = _timed(one_pass_each)
    runner.threads_for = new_threads
    figures["after_validation_s_per_year"] = _timed(
        lambda: validation_score(panel, config, traders["best"], cpu)
    )
    figures["after_backtest_s_per_year"] = _timed(
        lambda: runner.run_backtest(panel, "validation", config, traders, cpu)
    )
    scale = BARS_PER_YEAR / bars_timed
    result = {name: round(seconds * scale, 1) for name, seconds in figures.items()}
    result |= {"bars_timed": bars_timed, "process_threads": args.threads, "symbols": SYMBOLS}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
