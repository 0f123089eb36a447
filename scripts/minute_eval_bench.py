"""Minute-scale evaluation speed: validation scores and the backtest, in seconds per minute-bar year.

Builds a 5-symbol synthetic minute panel of ``--days`` sessions (the first half trains, the second
half is the timed segment), makes PPO agents shaped like the reference minute spec
(``strategies/nasdaq100_minute.toml``: a 512x512 MLP), and times

* a validation score of one snapshot, as one continuous pass (exact) and as the spec's chunks
  (``--chunks`` contiguous chunks side by side, ``--warmup-bars`` warm-up each), and
* the backtest of the traders ``best`` + ``ensemble_top4`` and the baselines (the traders run ahead,
  many bars at a time while their accounts hold: :mod:`finpod.backtest.run_ahead`); with
  ``--compare-stepped`` the same backtest bar by bar (the five networks as one stacked pass), and
  with ``--compare-unstacked`` bar by bar with each trader (and each ensemble member) called on its
  own row, as before stacking; each comparison reports how far its ledgers are from run-ahead's,

then prints each as seconds per minute-bar year (seconds per bar x 98,280 = 252 sessions x 390
minutes), wall and process CPU time, with the box's load average. ``--days 504`` times a whole year directly.

Run from the repository root:  python scripts/minute_eval_bench.py --days 504 --threads 2
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import finpod
from finpod.backtest import runner
from finpod.backtest.ensemble import ensemble_policy
from finpod.data.panel_builder import build_panel
from finpod.data.synth import synth_market
from finpod.pipeline.context import RunContext
from finpod.pipeline.training import deterministic_policy, validation_score
from finpod.spec import Spec, ppo_config_from

BARS_PER_YEAR = 252 * 390
SYMBOLS = 5
ENSEMBLE_K = 4


CPU_SECONDS: dict[str, float] = {}
"""Process CPU seconds of each timed item (all threads): less sensitive than wall time to other load."""


def _timed(name: str, work: Callable[[], Any]) -> tuple[float, Any]:
    started, cpu = time.perf_counter(), time.process_time()
    result = work()
    CPU_SECONDS[name] = time.process_time() - cpu
    return time.perf_counter() - started, result


def _unstacked(policy: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    """The same trader as a plain function, so the backtest calls it on its own row (no stacking)."""
    return lambda obs: policy(obs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=int, default=504, help="sessions of synthetic minute bars")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="process torch threads")
    parser.add_argument("--chunks", type=int, default=64, help="validation chunks (the minute spec's)")
    parser.add_argument("--warmup-bars", type=int, default=390, help="warm-up bars of each chunk")
    parser.add_argument("--skip-continuous", action="store_true", help="skip the continuous validation")
    parser.add_argument(
        "--rebalance-band",
        type=float,
        default=None,
        help="override the spec's band (0: the traders trade on nearly every bar, run-ahead's worst case)",
    )
    parser.add_argument(
        "--policy",
        choices=["mlp", "cross_sectional"],
        default=None,
        help="override the spec's agent.policy (the spec's is the flat MLP)",
    )
    parser.add_argument(
        "--compare-stepped", action="store_true", help="also time the backtest bar by bar (stacked pass)"
    )
    parser.add_argument(
        "--compare-unstacked", action="store_true", help="also time the backtest with one call per trader"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cpu = torch.device("cpu")
    bars = synth_market(SYMBOLS, args.days, "1min", seed=0, start="2019-05-24")
    first, last = bars["timestamp"].min().date(), bars["timestamp"].max().date()
    middle = first + (last - first) / 2
    segments = {"train": (first, middle), "validation": (middle + dt.timedelta(days=1), last)}
    panel = build_panel(
        bars, freq="1min", start=first, end=last, segments=segments, device=cpu, benchmark_symbol=None
    )
    spec = Spec.from_toml(Path(finpod.__file__).parent / "strategies" / "nasdaq100_minute.toml")
    config = spec.env_config(random_start=False)
    if args.rebalance_band is not None:
        config = dataclasses.replace(config, rebalance_band=args.rebalance_band)
    make = RunContext.of(spec, panel, cpu).agent_factory
    agent_table = {**spec.agent, **({"policy": args.policy} if args.policy else {})}
    agents = [make(ppo_config_from(agent_table), seed) for seed in range(ENSEMBLE_K)]
    traders = {
        "best": deterministic_policy(agents[0]),
        f"ensemble_top{ENSEMBLE_K}": ensemble_policy(agents, "weights"),
    }
    start, stop = panel.segment("validation")
    scale = BARS_PER_YEAR / (stop - start)
    result: dict[str, Any] = {"bars_timed": stop - start, "process_threads": args.threads, "symbols": SYMBOLS}
    result["rebalance_band"] = config.rebalance_band
    result["policy"] = agent_table.get("policy", "cross_sectional")
    result["load_average_before"] = os.getloadavg()
    chunked_s, chunked = _timed(
        "validation_chunked",
        lambda: validation_score(
            panel, config, traders["best"], cpu, chunks=args.chunks, warmup_bars=args.warmup_bars
        ),
    )
    result[f"validation_chunked{args.chunks}_s_per_year"] = round(chunked_s * scale, 2)
    result["validation_chunked_score"] = round(chunked, 4)
    if not args.skip_continuous:
        continuous_s, continuous = _timed(
            "validation_continuous", lambda: validation_score(panel, config, traders["best"], cpu)
        )
        result["validation_continuous_s_per_year"] = round(continuous_s * scale, 1)
        result["validation_continuous_score"] = round(continuous, 4)
    backtest_s, ahead = _timed(
        "backtest", lambda: runner.run_backtest(panel, "validation", config, traders, cpu)
    )
    result["backtest_s_per_year"] = round(backtest_s * scale, 1)
    result["backtest_steps_by_threads"] = ahead.steps_by_threads
    result["trade_bars_per_trader"] = {
        name: int(ahead.traders[name].transactions.index.nunique()) for name in traders
    }
    comparisons = {"stepped": args.compare_stepped, "unstacked": args.compare_unstacked}
    for kind in (kind for kind, wanted in comparisons.items() if wanted):
        plain = {
            name: policy if kind == "stepped" else _unstacked(policy) for name, policy in traders.items()
        }
        seconds, other = _timed(
            f"backtest_{kind}",
            lambda plain=plain: runner.run_backtest(panel, "validation", config, plain, cpu, ahead=False),
        )
        result[f"backtest_{kind}_s_per_year"] = round(seconds * scale, 1)
        gaps = [
            float((ahead.traders[name].equity_usd / other.traders[name].equity_usd - 1.0).abs().max())
            for name in traders
        ]
        result[f"backtest_{kind}_max_equity_gap"] = max(gaps)
    result["cpu_s_per_year"] = {name: round(seconds * scale, 1) for name, seconds in CPU_SECONDS.items()}
    result["load_average_after"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
