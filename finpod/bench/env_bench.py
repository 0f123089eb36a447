"""``finpod bench env``: batched env steps per second and peak memory, beside a classic numpy env.

Both envs trade the same seeded random panel with random target weights (so every step trades),
under the default :class:`EnvConfig` (0.2% fee, volume cap at the bar's volume, fill at the next
open, one-session horizon). The batched env runs ``N x K`` env steps after an untimed warm-up (and
compilation, when asked); the numpy env, one portfolio with Python loops over the stocks, runs
fewer steps. Random actions come from a small pool drawn before timing, so the timings are the
env's, not a random-number generator's.

Three modes on a GPU: eager steps, ``torch.compile``-d steps, and (the default there) replays of a
CUDA graph of :data:`GRAPH_STEPS` steps (:class:`~finpod.env.GraphedRollout`: an advance-only graph
when no episode ends within its steps, else one that autoresets on every step; the result counts
the timed replays of each). Memory-bandwidth use:
the bytes an env step must move (:func:`min_bytes_per_env_step`) times the steps per second, as a
share of the device's measured copy bandwidth (:func:`copy_bandwidth`, a large device-to-device copy:
the practical peak, as the PPO bench measures its matmul peak).
"""

from __future__ import annotations

import math
import resource
import time
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np
import torch

from finpod.bench.numpy_env import ClassicNumpyEnv
from finpod.data.panel import Panel
from finpod.env import EnvConfig, GraphedRollout, TradingEnv
from finpod.errors import SpecError

BARS_PER_SESSION = 390
"""Regular-hours minutes of a full NASDAQ session: the synthetic panel's session length."""
BAR_LOG_RETURN_STD = 0.001
"""Per-bar log-return standard deviation of the synthetic prices."""
INITIAL_PRICE_RANGE_USD = (20.0, 500.0)
VOLUME_RANGE_SHARES = (1_000.0, 100_000.0)
ACTION_POOL_SIZE = 8
"""Distinct random action batches cycled through the timed steps."""
GRAPH_STEPS = 32
"""Env steps captured in one CUDA graph on a GPU."""
KIB = 1024
MIB = 2**20
COPY_REPEATS = 5
"""Timed copies of the bandwidth measurement (the best counts)."""


@dataclass(frozen=True)
class EnvBenchResult:
    """Throughput and memory of one benchmark run.

    Attributes:
        device: where the batched env ran.
        num_envs, num_assets, num_features, obs_dim: ``N``, ``M``, ``F``, ``D``.
        steps: timed steps ``K`` of the batched env (``N x K`` env steps).
        torch_threads: ``torch.get_num_threads()`` during the run (CPU).
        compiled: whether the step ran through ``torch.compile``.
        cuda_graph: whether the steps ran as replays of a CUDA graph (``GRAPH_STEPS`` steps each).
        entity_info: whether each step also reported the per-asset outcomes and costs (what an
            agent with per-asset advantages trains on; eager and compiled steps only).
        advance_graph_replays: timed replays of the advance-only graph (no episode ended in them).
        step_graph_replays: timed replays of the graph that autoresets on every step (0 without
            ``cuda_graph``).
        env_steps_per_second: ``N x K`` / timed wall seconds.
        seconds: timed wall seconds of the batched env.
        warmup_seconds: untimed warm-up (compilation included).
        peak_memory_bytes: CUDA: ``torch.cuda.max_memory_allocated``; CPU: the process's peak
            resident set (torch's own libraries included).
        env_tensor_bytes: bytes of the env's market tables and state.
        numpy_steps: steps of the classic numpy env.
        numpy_steps_per_second: its env steps per second.
        speedup: ``env_steps_per_second / numpy_steps_per_second``.
        min_bytes_per_env_step: the memory traffic one env step cannot avoid (see
            :func:`min_bytes_per_env_step`), averaged over the timed steps: the steps of
            ``step_graph_replays`` count as resetting ones. Eager and compiled steps count as
            advance-only (they autoreset on one step in a horizon, 1 in 390 here).
        achieved_bytes_per_second: ``env_steps_per_second x min_bytes_per_env_step``, to compare
            with the device's memory bandwidth.
        copy_bytes_per_second: the device's measured copy bandwidth (bytes read plus written per
            second, :func:`copy_bandwidth`).
        bandwidth_share: ``achieved_bytes_per_second / copy_bytes_per_second``.
    """

    device: str
    num_envs: int
    num_assets: int
    num_features: int
    obs_dim: int
    steps: int
    torch_threads: int
    compiled: bool
    cuda_graph: bool
    entity_info: bool
    advance_graph_replays: int
    step_graph_replays: int
    env_steps_per_second: float
    seconds: float
    warmup_seconds: float
    peak_memory_bytes: int
    env_tensor_bytes: int
    numpy_steps: int
    numpy_steps_per_second: float
    speedup: float
    min_bytes_per_env_step: int
    achieved_bytes_per_second: float
    copy_bytes_per_second: float
    bandwidth_share: float

    def to_json_dict(self) -> dict[str, object]:
        """The result as plain JSON values."""
        return asdict(self)


def random_walk_panel(num_sessions: int, num_assets: int, num_features: int, seed: int) -> Panel:
    """A seeded CPU minute panel of log random-walk prices, random volumes and normal features.

    Every cell is tradable; the whole panel is the ``train`` segment (``T = 390 x num_sessions``).
    """
    rng = np.random.default_rng(seed)
    num_bars = BARS_PER_SESSION * num_sessions
    first = rng.uniform(*INITIAL_PRICE_RANGE_USD, size=num_assets)
    shape = (num_bars, num_assets)
    close = np.exp(np.log(first) + np.cumsum(rng.normal(0.0, BAR_LOG_RETURN_STD, shape), axis=0))
    open_ = np.vstack([first, close[:-1]]) * np.exp(rng.normal(0.0, BAR_LOG_RETURN_STD, shape))

    def tensor(values: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))

    return Panel(
        timestamps_ns=np.arange(num_bars, dtype=np.int64) * 60_000_000_000,
        session_ids=np.arange(num_bars, dtype=np.int64) // BARS_PER_SESSION,
        symbols=tuple(f"BENCH{i:03d}" for i in range(num_assets)),
        open=tensor(open_),
        high=tensor(np.maximum(open_, close)),
        low=tensor(np.minimum(open_, close)),
        close=tensor(close),
        volume=tensor(rng.uniform(*VOLUME_RANGE_SHARES, size=shape)),
        features=tensor(rng.standard_normal((num_bars, num_assets, num_features))),
        feature_names=tuple(f"feature_{i}" for i in range(num_features)),
        tradable=torch.ones(num_bars, num_assets, dtype=torch.bool),
        segments={"train": (0, num_bars)},
    )


def min_bytes_per_env_step(num_assets: int, obs_dim: int, action_dim: int, every_step_resets: bool) -> int:
    """Bytes one env step must move at least: a model, to judge memory-bandwidth use.

    Reads the action (``A`` float32), the fill bar's row of the market table (``4 M`` float32), the
    holdings (``M`` float64) and one observation template row (``D`` float32); writes the holdings
    (``M`` float64) and the observation (``D`` float32). A step that may autoreset (every step of
    the general CUDA graph) also reads a second template row and writes ``final_obs`` (``2 D``
    float32 more); an advance-only step (eager ones where no episode ends, the advance-only graph)
    does not.
    Per-env scalars are left out.
    """
    float32s = action_dim + 4 * num_assets + 2 * obs_dim
    if every_step_resets:
        float32s += 2 * obs_dim
    return 4 * float32s + 8 * 2 * num_assets


def copy_bandwidth(device: torch.device, size_bytes: int, repeats: int = COPY_REPEATS) -> float:
    """The device's memory bandwidth as a large copy reaches it: bytes read plus written per second.

    Copies a ``size_bytes`` buffer into another on ``device`` once untimed, then ``repeats`` times,
    and counts ``2 x size_bytes`` per copy over the fastest one (a CPU copy runs on torch's threads).
    """
    source = torch.ones(size_bytes // 4 or 1, dtype=torch.float32, device=device)
    target = torch.empty_like(source)
    target.copy_(source)
    _synchronize(device)
    best = math.inf
    for _ in range(repeats):
        began = time.perf_counter()
        target.copy_(source)
        _synchronize(device)
        best = min(best, time.perf_counter() - began)
    return 2 * source.element_size() * source.numel() / best


def resolve_device(name: str) -> torch.device:
    """``cpu`` or ``cuda`` (``cuda:K``) as a device; a one-line error when it cannot be used here."""
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise SpecError(f"--device {name!r} is not a torch device; use cpu or cuda") from err
    if device.type not in ("cpu", "cuda"):
        raise SpecError(f"--device {name!r} is not supported; use cpu or cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SpecError(f"--device {name!r}: this torch build sees no CUDA GPU; use --device cpu")
    return device


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if value < 1:
            raise SpecError(f"--{name.replace('_', '-')} must be >= 1, got {value}")


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _Timing(NamedTuple):
    seconds: float
    warmup_seconds: float
    steps: int
    """Steps timed (whole graphs with ``cuda_graph``)."""
    advance_graph_replays: int = 0
    step_graph_replays: int = 0
    reset_steps: int = 0
    """Timed steps that autoreset: those of the general graph's replays."""


def _time_torch_env(env: TradingEnv, steps: int, warmup_steps: int, seed: int, cuda_graph: bool) -> _Timing:
    generator = torch.Generator(device=env.device).manual_seed(seed)
    shape = (ACTION_POOL_SIZE, env.num_envs, env.action_dim)
    pool = torch.rand(shape, generator=generator, device=env.device)
    began = time.perf_counter()
    if cuda_graph:
        graph = GraphedRollout(env, min(GRAPH_STEPS, steps))
        graph.actions.copy_(pool[torch.arange(graph.actions.shape[0], device=env.device) % ACTION_POOL_SIZE])
        replays = -(-steps // graph.actions.shape[0])
        graph.replay()
        _synchronize(env.device)
        warmup = time.perf_counter() - began
        before = dict(graph.replays)
        began = time.perf_counter()
        for _ in range(replays):
            graph.replay()
        _synchronize(env.device)
        seconds = time.perf_counter() - began
        advance, step = (graph.replays[kind] - before[kind] for kind in ("advance", "step"))
        return _Timing(seconds, warmup, replays * graph.num_steps, advance, step, step * graph.num_steps)
    for k in range(warmup_steps):
        env.step(pool[k % ACTION_POOL_SIZE])
    _synchronize(env.device)
    warmup = time.perf_counter() - began
    began = time.perf_counter()
    for k in range(steps):
        env.step(pool[k % ACTION_POOL_SIZE])
    _synchronize(env.device)
    return _Timing(time.perf_counter() - began, warmup, steps)


def _time_numpy_env(panel: Panel, config: EnvConfig, steps: int, seed: int) -> float:
    env = ClassicNumpyEnv(panel, "train", config, seed=seed)
    rng = np.random.default_rng(seed)
    pool = rng.random((ACTION_POOL_SIZE, panel.num_assets + 1))
    began = time.perf_counter()
    for k in range(steps):
        env.step(pool[k % ACTION_POOL_SIZE])
    return time.perf_counter() - began


def run_env_bench(
    num_envs: int,
    num_assets: int,
    num_features: int,
    num_sessions: int,
    steps: int,
    warmup_steps: int,
    numpy_steps: int,
    device: torch.device,
    compile_step: bool,
    seed: int,
    cuda_graph: bool | None = None,
    bandwidth_mib: int = 256,
    entity_info: bool = False,
) -> EnvBenchResult:
    """Time the batched env and the classic numpy env on the same random panel.

    Args:
        num_envs: ``N`` batched envs.
        num_assets: ``M`` assets.
        num_features: ``F`` features per asset.
        num_sessions: 390-bar sessions in the panel.
        steps: timed batched steps ``K`` (rounded up to whole CUDA graphs on a GPU).
        warmup_steps: untimed batched steps first (CPU; the GPU warms up with one graph replay).
        numpy_steps: timed steps of the numpy env.
        device: ``cpu`` or a CUDA device.
        compile_step: run the batched step through ``torch.compile``.
        seed: seeds panel, starts and actions.
        cuda_graph: time replays of a CUDA graph (``None``: on a CUDA device, not on the CPU).
        bandwidth_mib: size of the buffer :func:`copy_bandwidth` copies, MiB.
        entity_info: build the env with ``entity_info`` (per-asset outcomes and costs in every
            step's info, :mod:`finpod.env.entity_outcomes`).

    Raises:
        SpecError: a count is < 1, the panel is too short for an episode, or a CUDA graph is asked
            for on the CPU.
    """
    _check_positive(envs=num_envs, assets=num_assets, features=num_features, sessions=num_sessions)
    _check_positive(steps=steps, warmup_steps=warmup_steps, numpy_steps=numpy_steps)
    _check_positive(bandwidth_mib=bandwidth_mib)
    if cuda_graph is None:
        cuda_graph = device.type == "cuda"
    if cuda_graph and device.type != "cuda":
        raise SpecError("--cuda-graph needs --device cuda; drop it to time eager steps on the CPU")
    if cuda_graph and entity_info:
        raise SpecError(
            "--entity-info times the env's own steps, which a CUDA graph does not take; add --no-cuda-graph"
        )
    config = EnvConfig(horizon_bars=BARS_PER_SESSION)
    panel = random_walk_panel(num_sessions, num_assets, num_features, seed)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    env = TradingEnv(
        panel,
        "train",
        config,
        num_envs,
        seed,
        device=device,
        compile_step=compile_step,
        entity_info=entity_info,
    )
    timing = _time_torch_env(env, steps, warmup_steps, seed, cuda_graph)
    seconds, timed_steps = timing.seconds, timing.steps
    numpy_seconds = _time_numpy_env(panel, config, numpy_steps, seed)
    if device.type == "cuda":
        peak = int(torch.cuda.max_memory_allocated(device))
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * KIB
    tensors = [env.market.bars, env.market.obs_template, *env.state]
    env_steps_per_second = num_envs * timed_steps / seconds
    resetting, advancing = (
        min_bytes_per_env_step(num_assets, env.obs_dim, env.action_dim, resets) for resets in (True, False)
    )
    reset_steps = timing.reset_steps
    traffic = round((reset_steps * resetting + (timed_steps - reset_steps) * advancing) / timed_steps)
    numpy_steps_per_second = numpy_steps / numpy_seconds
    copy_bytes_per_second = copy_bandwidth(device, bandwidth_mib * MIB)
    return EnvBenchResult(
        device=str(device),
        num_envs=num_envs,
        num_assets=num_assets,
        num_features=num_features,
        obs_dim=env.obs_dim,
        steps=timed_steps,
        torch_threads=torch.get_num_threads(),
        compiled=compile_step,
        entity_info=entity_info,
        cuda_graph=cuda_graph,
        advance_graph_replays=timing.advance_graph_replays,
        step_graph_replays=timing.step_graph_replays,
        env_steps_per_second=env_steps_per_second,
        seconds=seconds,
        warmup_seconds=timing.warmup_seconds,
        peak_memory_bytes=peak,
        env_tensor_bytes=sum(t.element_size() * t.nelement() for t in tensors),
        numpy_steps=numpy_steps,
        numpy_steps_per_second=numpy_steps_per_second,
        speedup=env_steps_per_second / numpy_steps_per_second,
        min_bytes_per_env_step=traffic,
        achieved_bytes_per_second=env_steps_per_second * traffic,
        copy_bytes_per_second=copy_bytes_per_second,
        bandwidth_share=env_steps_per_second * traffic / copy_bytes_per_second,
    )
