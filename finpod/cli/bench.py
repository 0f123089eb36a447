"""``finpod bench data|env|train|skill|main``: throughput, peak-memory and learning benchmarks.

The benchmarks (and torch) are imported inside each command, so that every other ``finpod``
command, ``--help`` and ``--version`` start without them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from finpod.bench.skill_names import CASE_NAMES, CONTENDERS, DEFAULT_CASES, HYPER_SETS
from finpod.errors import SpecError

if TYPE_CHECKING:
    from finpod.bench.skill_bench import ContenderResult

app = typer.Typer(no_args_is_help=True)


GIGA = 1e9
GIB = 2**30


def _set_torch_threads(threads: int) -> None:
    """Apply ``--threads`` (0 keeps torch's default); a negative count is a one-line error."""
    if threads < 0:
        raise SpecError(f"--threads must be >= 0 (0 = torch's default), got {threads}")
    if threads:
        import torch

        torch.set_num_threads(threads)


@app.command("train")
def train(
    envs: int = typer.Option(1024, "--envs", help="Parallel envs N."),
    assets: int = typer.Option(100, "--assets", help="Assets per portfolio M."),
    features: int = typer.Option(12, "--features", help="Features per asset F (the minute pipeline has 12)."),
    sessions: int = typer.Option(10, "--sessions", help="390-bar sessions in the random panel."),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda."),
    warmup_rounds: int = typer.Option(1, "--warmup-rounds", help="Untimed training rounds first."),
    rounds: int = typer.Option(3, "--rounds", help="Timed training rounds."),
    matmul_size: int = typer.Option(4096, "--matmul-size", help="Side of the square matmul of the peak."),
    matmul_repeats: int = typer.Option(5, "--matmul-repeats", help="Timed calls of the peak matmul."),
    threads: int = typer.Option(0, "--threads", help="torch CPU threads (0: torch's default)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seeds panel, env and agent."),
    cuda_matmul_precision: str = typer.Option(
        "highest",
        "--cuda-matmul-precision",
        help='float32 matmuls on CUDA: "highest" (full float32) or "high" (TF32); the CPU ignores it.',
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
) -> None:
    """PPO training samples/s on the finpod env (learning included) and the learner's share of peak matmul."""
    from finpod.bench import env_bench, train_bench
    from podracer.api import PPOConfig

    _set_torch_threads(threads)
    r = train_bench.run_train_bench(
        num_envs=envs,
        num_assets=assets,
        num_features=features,
        num_sessions=sessions,
        device=env_bench.resolve_device(device),
        config=PPOConfig(),
        warmup_rounds=warmup_rounds,
        rounds=rounds,
        matmul_size=matmul_size,
        matmul_repeats=matmul_repeats,
        seed=seed,
        matmul_precision=cuda_matmul_precision,
    )
    if as_json:
        typer.echo(json.dumps(r.to_json_dict()))
        return
    typer.echo(
        f"PPO on TradingEnv ({r.device}, {r.torch_threads} threads): N={r.num_envs} envs, M={r.num_assets} "
        f"assets, F={r.num_features} features, obs {r.obs_dim}, actions {r.action_dim}"
    )
    typer.echo(
        f"agent: actor+critic MLP {r.hidden_sizes}, {r.rollout_steps} steps/round, "
        f"{r.update_epochs} epochs, minibatch {r.minibatch_size}"
    )
    typer.echo(
        f"samples/s (learning included): {r.samples_per_second:,.0f} "
        f"({r.env_steps:,} env steps in {r.seconds:.1f} s over {r.rounds} rounds)"
    )
    typer.echo(
        f"learner: {r.learner_flops_per_second / GIGA:.1f} GFLOP/s = {r.matmul_utilisation:.1%} of the "
        f"measured float32 matmul peak {r.peak_matmul_flops_per_second / GIGA:.1f} GFLOP/s"
    )
    typer.echo(f"peak memory: {r.peak_memory_bytes / GIB:.2f} GiB")


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
    entity_info: bool = typer.Option(
        False,
        "--entity-info",
        help="Also report per-asset outcomes and costs each step (what per-asset advantages train on).",
    ),
    cuda_graph: bool | None = typer.Option(
        None,
        "--cuda-graph/--no-cuda-graph",
        help="Time replays of a CUDA graph (default: on with --device cuda), or plain steps.",
    ),
    bandwidth_mib: int = typer.Option(
        256, "--bandwidth-mib", help="MiB copied to measure the device's memory bandwidth."
    ),
    threads: int = typer.Option(0, "--threads", help="torch CPU threads (0: torch's default)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seeds panel, start bars and actions."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
) -> None:
    """Batched env steps/s, memory traffic and peak memory, beside a classic one-env numpy implementation."""
    from finpod.bench import env_bench

    _set_torch_threads(threads)
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
        cuda_graph=cuda_graph,
        bandwidth_mib=bandwidth_mib,
        entity_info=entity_info,
    )
    if as_json:
        typer.echo(json.dumps(r.to_json_dict()))
        return
    mode = " + ".join(
        name
        for name, on in (
            ("torch.compile", r.compiled),
            ("CUDA graph", r.cuda_graph),
            ("per-asset outcomes", r.entity_info),
        )
        if on
    )
    typer.echo(
        f"TradingEnv ({r.device}, {mode or 'eager'}, {r.torch_threads} threads): N={r.num_envs} envs, "
        f"M={r.num_assets} assets, F={r.num_features} features, obs {r.obs_dim}"
    )
    typer.echo(
        f"env steps/s: {r.env_steps_per_second:,.0f} ({r.num_envs * r.steps:,} steps in {r.seconds:.2f} s; "
        f"warm-up {r.warmup_seconds:.1f} s)"
    )
    if r.cuda_graph:
        typer.echo(
            f"CUDA-graph replays: {r.advance_graph_replays:,} advance-only (no episode ended in them), "
            f"{r.step_graph_replays:,} with autoreset on every step"
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
    typer.echo(
        f"memory traffic (model, {r.min_bytes_per_env_step:,} B per env step): "
        f"{r.achieved_bytes_per_second / 1e9:.1f} GB/s = {r.bandwidth_share:.1%} of the measured copy "
        f"bandwidth {r.copy_bytes_per_second / 1e9:.1f} GB/s"
    )


@app.command("data")
def data(
    symbols: int = typer.Option(100, "--symbols", help="Synthetic stocks M (NASDAQ-100 scale: 100)."),
    days: int = typer.Option(250, "--days", help="Sessions of 390 minute bars (>= 3)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the synthetic market."),
    device: str = typer.Option("cpu", "--device", help="Where the panel's tensors go: cpu or cuda."),
    out: str | None = typer.Option(None, "--out", help="Keep the dataset here (default: a temp folder)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
) -> None:
    """Bars/s and peak memory of synth -> write dataset -> read -> build panel, at minute scale."""
    from finpod.bench import data_bench, env_bench

    r = data_bench.run_data_bench(
        symbols=symbols,
        days=days,
        seed=seed,
        device=env_bench.resolve_device(device),
        out=None if out is None else Path(out),
    )
    if as_json:
        typer.echo(json.dumps(r.to_json_dict()))
        return
    typer.echo(
        f"market: {r.symbols} symbols x {r.days} sessions = {r.bars:,} minute bars; panel on {r.device} "
        f"({r.torch_threads} threads); memory: {r.memory_method}"
    )
    for stage in r.stages:
        typer.echo(
            f"{stage.name:>6}: {stage.bars_per_second:>12,.0f} bars/s ({stage.seconds:6.2f} s), "
            f"peak RSS {stage.peak_rss_bytes / GIB:.2f} GiB (+{stage.peak_rss_increase_bytes / GIB:.2f} GiB)"
        )
    t, m, f = r.panel_shape
    typer.echo(
        f"panel (T={t:,}, M={m}, F={f}): {r.panel_bytes / GIB:.2f} GiB; build {r.panel_bars_per_second:,.0f} "
        f"bars/s; build peak RSS increase = {r.panel_peak_increase_ratio:.2f}x the panel"
    )
    if r.cuda_peak_bytes is not None:
        typer.echo(f"CUDA peak allocated during the build: {r.cuda_peak_bytes / GIB:.2f} GiB")


_CaseOption = Annotated[list[str], typer.Option("--case", help=f"Cases: {', '.join(CASE_NAMES)}.")]
_ContenderOption = Annotated[
    list[str], typer.Option("--contender", help=f"Contenders: {', '.join(CONTENDERS)}.")
]
_HyperOption = Annotated[
    list[str], typer.Option("--hyper", help="Hyper-parameter sets: good, poor (lr x10, gamma 0.9).")
]


def _echo_progress(case: str, seed: int, err: bool) -> Callable[[str, ContenderResult], None]:
    def progress(key: str, result: ContenderResult) -> None:
        traders = "  ".join(
            f"{t} {result.sharpe[t]:.2f} (share {result.share[t]:.2f}, DSR {result.dsr[t]:.2f}, "
            f"costs {result.cost_pct_year.get(t, math.nan):.2f} %/yr, "
            f"{result.gross_sharpe.get(t, math.nan):.2f} before them)"
            for t in result.sharpe
        )
        line = f"{case} seed {seed} {key}: {traders}; {result.env_steps} steps, {result.seconds:.0f} s"
        typer.echo(line, err=err)

    return progress


@app.command("skill")
def skill(
    case: _CaseOption = list(DEFAULT_CASES),  # noqa: B006  # typer copies defaults
    contender: _ContenderOption = list(CONTENDERS),  # noqa: B006
    hyper: _HyperOption = list(HYPER_SETS),  # noqa: B006
    seeds: int = typer.Option(5, "--seeds", help="Seeds 0..N-1 (market, agents and tournament)."),
    first_seed: int = typer.Option(
        0, "--first-seed", min=0, help="Start the seeds here (tuning seeds apart)."
    ),
    overrides: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="SECTION.KEY=VALUE",
            help="override every contender's spec (repeatable), e.g. --set tournament.budget_seconds=60",
        ),
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write the learning curves to this PNG.")
    ] = None,
    threads: int = typer.Option(1, "--threads", help="torch CPU threads (0: torch's default)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
    snapshots: bool = typer.Option(
        False,
        "--snapshots",
        help="Also trade every validated policy on the held-out bars after its contender (not on its "
        "clock) and report their shares and score ICs over the run (in --json: every row).",
    ),
) -> None:
    """Held-out skill on planted-signal markets: shares of the oracle's edge, with the linear baseline's."""
    from finpod.bench import skill_bench

    skill_bench.check_choices(case, contender, hyper, seeds)
    settings = overrides or []
    for name in case:  # a bad --set fails before anything trains
        skill_bench.bench_spec(skill_bench.CASES[name], first_seed, "good", settings)
    _set_torch_threads(threads)
    results = []
    for name in case:
        for seed in range(first_seed, first_seed + seeds):
            progress = _echo_progress(name, seed, err=as_json)  # with --json, progress goes to stderr
            found = skill_bench.run_seed(
                skill_bench.CASES[name], seed, contender, hyper, progress, settings, snapshots
            )
            results.append(found)
            if not as_json:
                params = found.oracle.get("params", {})
                typer.echo(
                    f"{name} seed {seed}: oracle {found.oracle_sharpe:.2f} (train-fitted {params}; "
                    f"{found.oracle_edge_z:+.1f} standard errors over equal weight), "
                    f"equal weight {found.equal_weight_sharpe:.2f} (costs "
                    f"{found.equal_weight_cost_pct_year:.2f} %/yr, {found.equal_weight_gross_sharpe:.2f} "
                    f"before them), linear {found.linear_sharpe:.2f} "
                    f"(share {found.linear_share:.2f})"
                )
                for key, row in found.contenders.items():
                    if row.snapshots:
                        typer.echo(f"  {key}: {skill_bench.snapshot_summary(row.snapshots)}")
    if plot is not None:
        from finpod.bench.skill_plot import plot_curves

        typer.echo(f"learning curves: {plot_curves(results, plot)}", err=as_json)
    if as_json:
        typer.echo(json.dumps(skill_bench.as_json(results), indent=2))
        return
    for name, summary in skill_bench.summarise(results).items():
        typer.echo(
            f"== {name}: medians over seeds {summary['seeds']}: oracle {summary['oracle_sharpe']:.2f}, "
            f"equal weight {summary['equal_weight_sharpe']:.2f}, linear {summary['linear_sharpe']:.2f} "
            f"(share {summary['linear_share']:.2f})"
        )
        for key, row in summary["contenders"].items():
            for trader, sharpe in row["sharpe"].items():
                low, high = row["share_min_max"][trader]
                q1, q3 = row["share_quartiles"][trader]
                typer.echo(
                    f"  {key:<20} {trader:<9} Sharpe {sharpe:5.2f}  share {row['share'][trader]:5.2f} "
                    f"[{low:.2f}, {high:.2f}] IQR {q3 - q1:.2f}  DSR {row['dsr'][trader]:.2f} "
                    f"(max {row['dsr_max'][trader]:.2f})  "
                    f"{row['env_steps']:.0f} steps  {row['seconds']:.0f} s"
                )
            informative = summary["informative_seeds"]
            typer.echo(
                f"  {'':<20} median share over the {len(informative)} "
                f"seed{'' if len(informative) == 1 else 's'} whose oracle beats equal "
                f"weight by >= {skill_bench.INFORMATIVE_EDGE_Z:g} standard errors {informative}: "
                + ", ".join(f"{t} {v:.2f}" for t, v in row["share_informative"].items())
            )


@app.command("main")
def main_job(
    shape: str = typer.Option(
        "daily20", "--shape", help="daily20 (the demo) or minute100 (the paper's shape)."
    ),
    days: int = typer.Option(
        0, "--days", help="minute100: sessions of minute bars (0: 20; the paper's shape has 1,360)."
    ),
    overrides: list[str] = typer.Option(  # noqa: B008  # typer copies defaults
        [], "--set", help="Spec override SECTION.KEY=VALUE, as with finpod run (repeatable)."
    ),
    out: Path | None = typer.Option(  # noqa: B008  # typer copies defaults
        None, "--out", help="Keep the run's data and report folders here (default: a temporary folder)."
    ),
    progress: bool = typer.Option(False, "--progress", help="Show the run's progress on stderr."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
) -> None:
    """The real `finpod run` on a named shape: phase times, env steps/s vs bench train, memory."""
    from rich.console import Console

    from finpod.bench import main_bench

    spec = main_bench.shape_spec(shape, days or None, overrides)
    console = Console(stderr=True) if progress else None
    if progress:  # each phase's seconds as it ends, so a run cut short still says where it was
        import logging

        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        phases_log = logging.getLogger("finpod.pipeline.phases")
        phases_log.addHandler(handler)
        phases_log.setLevel(logging.INFO)
    result = main_bench.run_main_bench(shape, spec, out=out, console=console)
    if as_json:
        typer.echo(main_bench.as_json(result))
        return
    phases = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in result.phase_seconds.items())
    typer.echo(
        f"{result.shape} on {result.device} ({result.backend}, pool {result.pool_size}, "
        f"{result.num_envs} envs x {result.num_assets} assets, {result.torch_threads} torch threads)"
    )
    typer.echo(f"  phases: {phases}; total {result.total_seconds:.1f} s")
    typer.echo(
        f"  training: {result.env_steps:,} env steps at {result.env_steps_per_second:,.0f} env steps/s with "
        f"learning; bench train at this shape {result.train_bench_samples_per_second:,.0f} samples/s "
        f"(ratio {result.ratio_to_train_bench:.2f}); {result.evaluation_share:.0%} of the pods' round "
        "time scoring them on validation"
    )
    workers = (
        f" (each pod worker at most {result.peak_worker_rss_bytes / GIB:.2f} GiB)"
        if result.peak_worker_rss_bytes
        else ""
    )
    typer.echo(
        f"  peak memory {result.peak_rss_bytes / GIB:.2f} GiB{workers}; "
        f"best backtest Sharpe {result.best_backtest_sharpe:.2f}"
    )
    if result.gpu_busy_percent:
        busy = ", ".join(f"{name} {value:.0f} %" for name, value in result.gpu_busy_percent.items())
        memory = ", ".join(f"{name} {value:,.0f} MiB" for name, value in result.gpu_memory_mib.items())
        typer.echo(f"  GPU busy: {busy}; GPU memory: {memory}")
