"""finpod's CUDA env paths in one process: checks, throughput over N and modes, and a kernel profile.

Runs what ``finpod bench env --device cuda`` runs (:func:`finpod.bench.env_bench.run_env_bench`),
for every N and mode in one process, so torch is imported once and inductor's cache is shared:

    PYTHONPATH=$PWD:$PWD/engine python scripts/gpu_bench.py check sweep profile --out DIR

* ``check``: the CUDA env against the CPU env (same seed and actions; eager steps), and K-step
  CUDA-graph replays (eager and compiled settlement) against eager CUDA steps, at M = 100.
* ``sweep``: env steps/s and ``bandwidth_share`` for each N in ``--envs`` and each mode (eager,
  compiled, graph, both); one JSON line per run in ``DIR/env_sweep.jsonl``, a table last.
* ``train_profile``: a PPO round of ``finpod bench train`` (N = 4096) split into collect and
  learn, with and without TF32 matmuls, and the profiler's tables of each.
* ``population_profile``: where a population round of the minute shape goes (``--device``, default
  cuda; runs on a CPU too): ``P`` pods' collect, update and chunked validation pass timed apart,
  with the collection eager and graphed (and on CUDA the update with TF32 matmuls), and the kernel
  launches (operator calls on a CPU) per eager collect step.
* ``gather``: the observation-template row gather, float32 ``index_select`` against
  :func:`~finpod.env.observation.template_rows`, timed with CUDA events (median).
* ``profile``: torch.profiler's table of the CUDA kernels of eager (and compiled) steps at
  ``--profile-envs``.
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from pathlib import Path

import torch

from finpod.bench.env_bench import random_walk_panel, run_env_bench
from finpod.env import EnvConfig, GraphedRollout, TradingEnv

MODES = {"eager": (False, False), "compiled": (True, False), "graph": (False, True), "both": (True, True)}
"""Mode name -> (compile_step, cuda_graph)."""
CUDA = torch.device("cuda")


def _rel(ours: torch.Tensor, ref: torch.Tensor) -> float:
    ours, ref = ours.double().cpu(), ref.double().cpu()
    if not bool(torch.isfinite(ours).all()):
        return float("nan")
    return float((ours - ref).norm() / ref.norm().clamp_min(1e-300))


def check(num_envs: int = 512, steps: int = 100) -> bool:
    """CUDA eager vs CPU, graph replays vs eager CUDA steps; prints relative errors; True if all pass."""
    panel = random_walk_panel(num_sessions=2, num_assets=100, num_features=12, seed=3)
    config = EnvConfig(horizon_bars=64, half_spread_bps=5.0, max_participation=0.5)
    generator = torch.Generator().manual_seed(1)
    actions = torch.rand(steps, num_envs, 101, generator=generator)
    cpu = TradingEnv(panel, "train", config, num_envs, seed=1, device="cpu")
    gpu = TradingEnv(panel, "train", config, num_envs, seed=1, device=CUDA)
    worst: dict[str, float] = {}
    for k in range(steps):
        c_obs, c_rew, _, c_tr, _ = cpu.step(actions[k])
        g_obs, g_rew, _, g_tr, _ = gpu.step(actions[k].to(CUDA))
        worst["cpu_vs_cuda reward"] = max(worst.get("cpu_vs_cuda reward", 0.0), _rel(g_rew, c_rew))
        worst["cpu_vs_cuda obs"] = max(worst.get("cpu_vs_cuda obs", 0.0), _rel(g_obs, c_obs))
        assert torch.equal(c_tr, g_tr.cpu()), f"truncation differs at step {k}"
    worst["cpu_vs_cuda equity"] = _rel(gpu.equity_usd, cpu.equity_usd)
    ok = all(v < 1e-5 for v in worst.values())
    for compiled in (False, True):
        graph_steps = 32
        graphed = TradingEnv(panel, "train", config, num_envs, seed=2, device=CUDA, compile_step=compiled)
        eager = TradingEnv(panel, "train", config, num_envs, seed=2, device=CUDA)
        graph = GraphedRollout(graphed, graph_steps)
        name = f"graph{'+compiled' if compiled else ''}_vs_eager"
        errors = {"reward": 0.0, "cost": 0.0}
        for replay in range(3):  # 96 steps: crosses episode ends (horizon 64)
            block = torch.rand(graph_steps, num_envs, 101, device=CUDA)
            graph.actions.copy_(block)
            graph.replay()
            for k in range(graph_steps):
                _, reward, _, truncated, info = eager.step(block[k])
                errors["reward"] = max(errors["reward"], _rel(graph.rewards[k], reward))
                errors["cost"] = max(errors["cost"], _rel(graph.cost_usd[k], info["cost_usd"]))
                assert torch.equal(graph.truncated[k], truncated), f"{name}: truncation, replay {replay}"
        for field, ours, theirs in zip(graphed.state._fields, graphed.state, eager.state, strict=True):
            errors[f"state.{field}"] = _rel(ours, theirs)
        for key, value in errors.items():
            worst[f"{name} {key}"] = value
        ok = ok and all(v < 1e-4 for v in errors.values())
    for key, value in worst.items():
        print(f"check {key}: max relative error {value:.3e}", flush=True)
    print(f"check: {'PASS' if ok else 'FAIL'}", flush=True)
    return ok


def sweep(envs: list[int], modes: list[str], steps: int, out: Path) -> None:
    """Every (N, mode) through run_env_bench; JSON lines to ``out``, then a table."""
    rows: list[tuple[int, str, str]] = []
    with out.open("a") as sink:
        for n in envs:
            for mode in modes:
                compile_step, cuda_graph = MODES[mode]
                began = time.perf_counter()
                try:
                    result = run_env_bench(
                        num_envs=n,
                        num_assets=100,
                        num_features=12,
                        num_sessions=10,
                        steps=steps,
                        warmup_steps=20,
                        numpy_steps=200,
                        device=CUDA,
                        compile_step=compile_step,
                        seed=0,
                        cuda_graph=cuda_graph,
                        bandwidth_mib=1024,
                    )
                except Exception:
                    traceback.print_exc()
                    rows.append((n, mode, "FAILED"))
                    continue
                record = {"mode": mode, "wall_s": time.perf_counter() - began, **result.to_json_dict()}
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                line = (
                    f"{result.env_steps_per_second / 1e6:9.2f}M steps/s  "
                    f"{result.achieved_bytes_per_second / 1e9:7.1f} GB/s  "
                    f"share {100 * result.bandwidth_share:5.2f}% "
                    f"of {result.copy_bytes_per_second / 1e12:.2f} TB/s  "
                    f"warm-up {result.warmup_seconds:6.1f} s  peak {result.peak_memory_bytes / 2**30:.2f} GiB"
                )
                rows.append((n, mode, line))
                print(f"sweep N={n} {mode}: {line}", flush=True)
                torch.cuda.empty_cache()
    print("\n| N | mode | result |")
    for n, mode, line in rows:
        print(f"| {n} | {mode} | {line} |")


def profile(num_envs: int, steps: int) -> None:
    """torch.profiler tables of eager and compiled steps at ``num_envs`` (CUDA kernels by total time)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    panel = random_walk_panel(num_sessions=10, num_assets=100, num_features=12, seed=0)
    config = EnvConfig(horizon_bars=390)
    for compiled in (False, True):
        env = TradingEnv(panel, "train", config, num_envs, seed=0, device=CUDA, compile_step=compiled)
        actions = torch.rand(num_envs, env.action_dim, device=CUDA)
        for _ in range(5):
            env.step(actions)
        torch.cuda.synchronize()
        with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                env.step(actions)
            torch.cuda.synchronize()
        print(f"\nprofile: N={num_envs}, {steps} steps, compiled={compiled}", flush=True)
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=70))


def gather(envs: list[int], repeats: int = 200) -> None:
    """The template gather at M = 100 (D = 1302): float32 ``index_select`` vs :func:`template_rows`."""
    from finpod.env.observation import template_rows

    template = torch.randn(3900, 1302, device=CUDA)
    for n in envs:
        bars = torch.randint(0, 3900, (n,), device=CUDA)
        assert torch.equal(template_rows(template, bars), template.index_select(0, bars))
        for name, fn in (("float32 index_select", template.index_select), ("template_rows", None)):
            times = []
            for _ in range(repeats):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                rows = template_rows(template, bars) if fn is None else fn(0, bars)
                stop.record()
                stop.synchronize()
                times.append(start.elapsed_time(stop) * 1e3)
            median = sorted(times)[len(times) // 2]
            gbps = rows.numel() * 4 * 2 / median / 1e3
            print(f"gather N={n} {name}: median {median:.1f} us ({gbps:.0f} GB/s read+written)", flush=True)


def train_profile(num_envs: int, rounds: int = 2) -> None:
    """Where a PPO round of ``finpod bench train`` goes: collect vs learn wall time, GPU kernel time."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from podracer.ppo import PPOAgent, PPOConfig

    panel = random_walk_panel(num_sessions=10, num_assets=100, num_features=12, seed=0)
    env = TradingEnv(panel, "train", EnvConfig(horizon_bars=390), num_envs, seed=0, device=CUDA)
    agent = PPOAgent(
        env.obs_dim, env.action_dim, env.action_low, env.action_high, PPOConfig(), CUDA, 0, layout=env.layout
    )
    agent.train_round(env)
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for _ in range(rounds):
            torch.cuda.synchronize()
            began = time.perf_counter()
            rollout, _ = agent.collect(env)
            torch.cuda.synchronize()
            collected = time.perf_counter()
            agent.learn(rollout)
            torch.cuda.synchronize()
            done = time.perf_counter()
            print(
                f"train_profile N={num_envs} tf32={tf32}: collect {collected - began:.3f} s, "
                f"learn {done - collected:.3f} s",
                flush=True,
            )
    torch.backends.cuda.matmul.allow_tf32 = False
    for name in ("collect", "learn"):
        rollout = agent.collect(env)[0]
        torch.cuda.synchronize()
        with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            began = time.perf_counter()
            if name == "collect":
                agent.collect(env)
            else:
                agent.learn(rollout)
            torch.cuda.synchronize()
            wall = time.perf_counter() - began
        print(f"\ntrain_profile {name}: wall {wall:.3f} s, profiled", flush=True)
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)
        print(table)


def population_profile(device: torch.device, pods: int, num_envs: int, policy: str, rounds: int = 2) -> None:
    """Where a population round goes at the paper's minute shape: collect, update, validation pass."""
    import dataclasses

    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from finpod.backtest.chunked import chunk_plan, chunked_equities
    from podracer.population_collect import collect_population
    from podracer.population_update import update_population
    from podracer.ppo import PPOAgent, PPOConfig
    from podracer.stacked import PopulationPolicy, StackedModel

    panel = random_walk_panel(num_sessions=40, num_assets=100, num_features=12, seed=0)
    config = EnvConfig(horizon_bars=1950, fee_rate=0.002, half_spread_bps=1.0, rebalance_band=0.01)
    entity = policy == "cross_sectional"
    cfg = PPOConfig(
        policy=policy,
        advantages="entity" if entity else "joint",
        hidden_sizes=(64, 64) if entity else (512, 512),
        rollout_steps=8 if entity else 128,
        num_minibatches=4 if entity else 16,
    )
    envs = [
        TradingEnv(panel, "train", config, num_envs, seed=p, device=device, entity_info=entity)
        for p in range(pods)
    ]
    agents = [
        PPOAgent(e.obs_dim, e.action_dim, e.action_low, e.action_high, cfg, device, p, layout=e.layout)
        for p, e in enumerate(envs)
    ]
    first, stop = panel.segment("train")
    plan = chunk_plan(stop - first, 64, 390)
    eval_config = dataclasses.replace(config, random_start=False)

    def sync() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter()

    steps = cfg.rollout_steps * num_envs * pods
    variants = [
        ("eager collect, fp32", False, "highest"),
        ("graphed collect, fp32", device.type == "cuda", "highest"),
    ]
    if device.type == "cuda":
        variants.append(("graphed collect, TF32", True, "high"))
    for name, graphs, precision in variants:
        torch.set_float32_matmul_precision(precision)
        for index in range(rounds + 1):  # the first round warms up
            began = sync()
            model = StackedModel([agent.model for agent in agents])
            batch, _, rollouts = collect_population(agents, envs, model, graphs=graphs)
            collected = sync()
            update_population(agents, batch, model, rollouts)
            learned = sync()
            chunked_equities(panel, "train", eval_config, PopulationPolicy(agents), pods, device, plan)
            scored = sync()
            if index:
                print(
                    f"population_profile {policy} P={pods} N={num_envs} on {device}, {name}: collect "
                    f"{collected - began:.3f} s, update {learned - collected:.3f} s, validation pass of "
                    f"{plan.steps} steps x {plan.num_chunks * pods} accounts {scored - learned:.3f} s; "
                    f"{steps / (learned - began):,.0f} env steps/s without scoring, "
                    f"{steps / (scored - began):,.0f} with one score a round",
                    flush=True,
                )
    torch.set_float32_matmul_precision("highest")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    model = StackedModel([agent.model for agent in agents])
    for part in ("collect", "update"):
        with torch_profile(activities=activities) as prof:
            if part == "collect":
                batch, _, rollouts = collect_population(agents, envs, model, graphs=False)
            else:
                update_population(agents, batch, model, rollouts)
            sync()
        events = prof.key_averages()
        kernels = sum(e.count for e in events if device.type == "cuda" and e.device_type.name == "CUDA")
        gpu_us = sum(e.self_device_time_total for e in events if device.type == "cuda")
        operators = sum(e.count for e in events if e.key.startswith("aten::"))
        per = cfg.rollout_steps if part == "collect" else 1
        print(
            f"population_profile {part}: {kernels / per:,.0f} CUDA kernels and {operators / per:,.0f} "
            f"aten calls per {'step' if per > 1 else 'update'}; GPU busy {gpu_us / 1e6:.3f} s in total",
            flush=True,
        )
        sort = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
        print(events.table(sort_by=sort, row_limit=12))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "parts",
        nargs="+",
        choices=("check", "sweep", "profile", "train_profile", "gather", "population_profile"),
    )
    parser.add_argument("--device", default="cuda", help="population_profile: cuda or cpu")
    parser.add_argument("--pods", type=int, default=4, help="population_profile: pods P")
    parser.add_argument("--pod-envs", type=int, default=1024, help="population_profile: envs per pod")
    parser.add_argument("--policy", default="mlp", help="population_profile: mlp or cross_sectional")
    parser.add_argument("--envs", default="1024,4096,16384", help="comma-separated N of the sweep")
    parser.add_argument("--modes", default="eager,graph,compiled,both", help="comma-separated modes")
    parser.add_argument("--steps", type=int, default=2000, help="timed steps per run")
    parser.add_argument("--profile-steps", type=int, default=20)
    parser.add_argument("--profile-envs", type=int, default=16384, help="N of the profile")
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    envs = [int(n) for n in args.envs.split(",")]
    print(
        torch.__version__,
        torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA",
        flush=True,
    )
    for part in args.parts:
        began = time.perf_counter()
        try:
            if part == "check":
                check()
            elif part == "sweep":
                sweep(envs, args.modes.split(","), args.steps, args.out / "env_sweep.jsonl")
            elif part == "gather":
                gather(envs)
            elif part == "profile":
                profile(args.profile_envs, args.profile_steps)
            elif part == "population_profile":
                population_profile(torch.device(args.device), args.pods, args.pod_envs, args.policy)
            else:
                train_profile(4096)
        except Exception:
            traceback.print_exc()
        print(f"[{part}: {time.perf_counter() - began:.1f} s]", flush=True)


if __name__ == "__main__":
    main()
