"""A learnable reference on a skill-bench case: a supervised MLP forecaster, traded by the oracle's family.

The oracle knows the planted signal's functional form; a learner does not. This script measures
what a plain supervised learner extracts from the same train rows and features: an MLP of the
cross-sectional policy's encoder size (per asset, shared weights) regresses the next bar's
cross-sectionally standardised close-to-close return on the asset's features (MSE, Adam, minibatches
of 64 bars, train rows only), is early-stopped on the validation segment's information coefficient
(IC: the cross-sectional correlation of forecast and outcome, averaged over bars), and is traded
by the oracle's tilt / top-k / band family, its member chosen on the ``--fit-segment`` through the
env with costs. Printed per epoch: train, validation and held-out IC; then the early-stopped
forecaster's held-out share of the oracle's edge, with the true predictor's own ICs for scale and
the linear baseline's share (BENCHMARKS.md "What a learner can reach").

    python scripts/supervised_probe.py --case daily100-volume-ic05-5bp --seed 101

One torch thread; about a minute at M = 100.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time

import torch
from torch import nn

from finpod.bench import skill_bench
from finpod.bench.skill_bench import cross_sectional_ic as ic_of
from finpod.linear_baseline import fit_linear_trader
from finpod.oracle import returns_sharpe, share_captured, signal_scores
from finpod.tilt import fit_tilt, tilt_policy

WARMUP_BARS = 60
"""Train rows skipped at the start (the longest feature window)."""
MINIBATCH_BARS = 64


def main() -> None:
    """Fit, early-stop and trade the forecaster; print per-epoch ICs and a JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", required=True, choices=sorted(skill_bench.CASES))
    parser.add_argument("--seed", type=int, default=100, help="market seed (tuning seeds: 100+)")
    parser.add_argument("--epochs", type=int, default=10, help="passes over the train rows")
    parser.add_argument("--hidden", type=int, default=64, help="width of the two hidden layers")
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--fit-segment", default="train", choices=("train", "validation"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    case, problem = skill_bench.probe_problem(args.case, args.seed)
    selection, full, device = problem.selection, problem.full, problem.device
    config = problem.eval_config
    oracle, equal = problem.oracle_sharpe, problem.equal_weight_sharpe
    linear = returns_sharpe(problem.held_out(fit_linear_trader(selection, config, device).policy))

    features = full.features  # (T, M, F)
    t_bars, m, f = features.shape
    log_close = full.close.double().log()
    outcome = torch.zeros(t_bars, m, dtype=torch.float64)
    outcome[:-1] = log_close[1:] - log_close[:-1]
    outcome = outcome - outcome.mean(dim=1, keepdim=True)
    outcome = (outcome / (outcome.std(dim=1, keepdim=True) + 1e-12)).float()

    def rows(name: str) -> slice:
        start, stop = full.segments[name]
        return slice(start + (WARMUP_BARS if name == "train" else 0), stop - 1)

    segments = ("train", "validation", "backtest")
    obs = torch.cat([features.reshape(t_bars, m * f), torch.zeros(t_bars, 4 * m)], dim=1)
    true_scores = signal_scores(full, case.signal)(obs)
    true_ics = {name: round(ic_of(true_scores[rows(name)], outcome[rows(name)]), 4) for name in segments}

    width = args.hidden
    net = nn.Sequential(
        nn.Linear(f, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1)
    )
    optimizer = torch.optim.Adam(net.parameters(), lr=args.learning_rate)
    x_train, y_train = features[rows("train")], outcome[rows("train")]
    best: tuple[float, nn.Module, int] = (-math.inf, copy.deepcopy(net), 0)
    started = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(x_train.shape[0])
        for first in range(0, len(order), MINIBATCH_BARS):
            index = order[first : first + MINIBATCH_BARS]
            forecast = net(x_train[index]).squeeze(-1)
            forecast = forecast - forecast.mean(dim=1, keepdim=True)
            loss = (forecast - y_train[index]).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            ics = {
                name: ic_of(net(features[rows(name)]).squeeze(-1), outcome[rows(name)]) for name in segments
            }
        if ics["validation"] > best[0]:
            best = (ics["validation"], copy.deepcopy(net), epoch)
        print(
            epoch,
            " ".join(f"{name} IC {value:.3f}" for name, value in ics.items()),
            f"{time.perf_counter() - started:.1f}s",
            flush=True,
        )

    model = best[1]
    with torch.no_grad():
        held_out_ic = ic_of(model(features[rows("backtest")]).squeeze(-1), outcome[rows("backtest")])

    def scores(batch: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return model(batch[:, : m * f].view(-1, m, f)).squeeze(-1)

    tilt = fit_tilt(full, args.fit_segment, config, scores, device)
    held_out = returns_sharpe(problem.held_out(tilt_policy(full, scores, tilt.params)))
    summary = {
        "case": args.case,
        "seed": args.seed,
        "best_epoch": best[2],
        "validation_ic": round(best[0], 4),
        "held_out_ic": round(held_out_ic, 4),
        "true_predictor_ic": true_ics,
        "tilt": tilt.params.to_json(),
        "fit_segment": args.fit_segment,
        "share": round(share_captured(held_out, oracle, equal), 3),
        "linear_share": round(share_captured(linear, oracle, equal), 3),
        "oracle_edge": round(oracle - equal, 3),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
