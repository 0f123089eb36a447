"""Wall cost of the H-term: agents with and without it alternate training rounds in one process.

On the skill bench's market (``--case``, ``--signal-strength``) with its agent (``GOOD_AGENT``: the
cross-sectional policy, rollout 8 x 32 envs, 4 epochs), one agent per ``h_term_coef`` (``0`` first,
then each ``--coef``) trains in turn, one round each, ``--rounds`` times; the order rotates every
round so no setting always runs first. Printed per setting: median seconds per training round (no
validation) and its ratio to ``h_term_coef = 0``. One torch thread. A busy machine slows every
setting alike, since they alternate.

Run: ``.venv/bin/python scripts/hterm_cost.py --coef 0.03125 --coef 0.125`` (about a minute).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch

from finpod.bench.skill_bench import CASES, bench_spec, case_panels
from finpod.data.signals import SignalSpec
from finpod.pipeline.context import RunContext


def main() -> None:
    """Parse the flags, alternate the agents' rounds, print seconds per round and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="daily20-reversal-ic05-5bp", choices=sorted(CASES))
    parser.add_argument("--signal-strength", type=float, default=0.05)
    parser.add_argument("--coef", type=float, action="append", required=True, help="h_term_coef > 0")
    parser.add_argument("--rounds", type=int, default=40, help="timed rounds per setting")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)

    case = dataclasses.replace(
        CASES[args.case], signal=SignalSpec(CASES[args.case].signal.kind, args.signal_strength)
    )
    spec = bench_spec(case, args.seed, "good")
    panel, _ = case_panels(case, args.seed, spec)
    context = RunContext.of(spec, panel, torch.device("cpu"))
    make = context.agent_factory
    coefs = [0.0, *args.coef]
    agents = [make(dataclasses.replace(spec.agent_config(), h_term_coef=c), args.seed) for c in coefs]
    envs = [context.train_env(panel, args.seed) for _ in coefs]
    seconds: list[list[float]] = [[] for _ in coefs]
    for step in range(args.rounds + 1):  # round 0 warms up every agent (buffers, caches) untimed
        for offset in range(len(coefs)):
            i = (step + offset) % len(coefs)
            start = time.perf_counter()
            agents[i].train_round(envs[i])
            if step > 0:
                seconds[i].append(time.perf_counter() - start)
    base = statistics.median(seconds[0])
    for coef, times in zip(coefs, seconds, strict=True):
        median = statistics.median(times)
        ratio = median / base
        print(f"h_term_coef {coef:g}: {median * 1e3:.1f} ms per round (median of {len(times)}), x{ratio:.2f}")


if __name__ == "__main__":
    main()
