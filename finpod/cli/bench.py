"""``finpod bench data|env|train``: throughput and peak-memory benchmarks."""

from __future__ import annotations

import json

import torch
import typer

from finpod.bench import env_bench
from finpod.errors import SpecError

app = typer.Typer(no_args_is_help=True)


GIB = 2**30


@app.command("env")
def env(
    envs: int = typer.Option(1024, "--envs", help="Parallel envs N."),
    assets: int = typer.Option(100, "--assets", help="Assets per portfolio M."),
    steps: int = typer.Option(500, "--steps", help="Timed steps K of the batched env (N x K env steps)."),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda (CUDA: replays of a CUDA graph)."),
    features: int = typer.Option(12, "--features", help="Features per asset F (the minute pipeline has 12)."),
    sessions: int = typer.Option(10, "--sessions", help="390-bar sessions in the random panel."),
    warmup_steps: int = typer.Option(20, "--warmup-steps", help="Untimed batched steps first (CPU)."),
    numpy_steps: int = typer.Option(2000, "--numpy-steps", help="Timed steps of the classic numpy env."),
    compile_step: bool = typer.Option(False, "--compile", help="Run the step through torch.compile."),
    threads: int = typer.Option(0, "--threads", help="torch CPU threads (0: torch's default)."),
    seed: int = typer.Option(0, "--seed", help="Seeds panel, start bars and actions."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
) -> None:
    """Batched env steps/s and peak memory, beside a classic one-env numpy implementation."""
    if threads < 0:
        raise SpecError(f"--threads must be >= 0 (0 = torch's default), got {threads}")
    if threads:
        torch.set_num_threads(threads)
    r = env_bench.run_env_bench(
        num_envs=envs,
        num_assets=assets,
        num_features=features,
        num_sessions=sessions,
        steps=steps,
        warmup_steps=warmup_steps,
        numpy_steps=numpy_steps,
        device=env_bench.resolve_device(device),
        compile_step=compile_step,
        seed=seed,
    )
    if as_json:
        typer.echo(json.dumps(r.to_json_dict()))
        return
    mode = "CUDA graph" if r.cuda_graph else ("torch.compile" if r.compiled else "eager")
    typer.echo(
        f"TradingEnv ({r.device}, {mode}, {r.torch_threads} threads): N={r.num_envs} envs, "
        f"M={r.num_assets} assets, F={r.num_features} features, obs {r.obs_dim}"
    )
    typer.echo(
        f"env steps/s: {r.env_steps_per_second:,.0f} ({r.num_envs * r.steps:,} steps in {r.seconds:.2f} s; "
        f"warm-up {r.warmup_seconds:.1f} s)"
    )
    typer.echo(
        f"classic numpy env (1 env, Python loops over stocks): {r.numpy_steps_per_second:,.0f} steps/s "
        f"over {r.numpy_steps:,} steps -> speed-up {r.speedup:,.0f}x"
    )
    typer.echo(
        f"peak memory: {r.peak_memory_bytes / GIB:.2f} GiB "
        f"({'CUDA allocated' if r.device.startswith('cuda') else 'process RSS'}); "
        f"env tables and state {r.env_tensor_bytes / 2**20:.1f} MiB"
    )
