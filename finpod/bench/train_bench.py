"""``finpod bench train``: PPO training throughput on the finpod env, and the learner's share of peak.

What is measured:

* **samples per second**: env transitions collected per second of whole training rounds (rollout
  collection on the :class:`~finpod.env.TradingEnv` *and* all PPO update epochs), after warm-up
  rounds, with the agent's default :class:`~podracer.ppo.PPOConfig` network and epochs.
* **peak matmul rate**: the best of several timed ``torch.matmul`` calls of two square float32
  matrices on the same device (FLOP/s, ``2 n^3`` per call).
* **learner utilisation**: the learner's matmul FLOPs per round
  (:meth:`~podracer.ppo.PPOAgent.learner_flops_per_round`: rollout inference plus forward and
  backward of every update epoch) times rounds, divided by the rounds' wall time and by the peak.

The market is ``finpod bench env``'s seeded random panel (:func:`finpod.bench.env_bench.random_walk_panel`)
with the shape of the real pipeline's minute panel (``num_features`` features per asset); its values
do not affect the cost of a step. The env runs eagerly with the default :class:`EnvConfig` but
one session of minutes as its horizon (:data:`~finpod.bench.env_bench.BARS_PER_SESSION`, as
``finpod bench env``).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import torch

from finpod.bench.env_bench import BARS_PER_SESSION, random_walk_panel
from finpod.env import EnvConfig, TradingEnv
from finpod.errors import SpecError
from finpod.matmul_precision import check_matmul_precision, cuda_matmul_precision
from finpod.pipeline.phases import peak_rss_bytes
from podracer.api import PPOAgent, PPOConfig


@dataclass(frozen=True)
class TrainBenchResult:
    """One ``finpod bench train`` measurement.

    Attributes:
        device: where env and learner ran.
        num_envs: ``N``, parallel envs.
        num_assets: ``M``, assets per portfolio.
        num_features: ``F``, features per asset.
        obs_dim: observation width ``M * F + M + 2``.
        action_dim: action width ``M + 1``.
        hidden_sizes: the actor's and the critic's hidden widths.
        rollout_steps: steps per env per round.
        update_epochs: passes over each round's transitions.
        minibatch_size: transitions per gradient step.
        rounds: timed rounds (after ``warmup_rounds`` untimed ones).
        env_steps: transitions collected in the timed rounds.
        seconds: wall time of the timed rounds (collection and learning).
        samples_per_second: ``env_steps / seconds``.
        learner_flops: matmul FLOPs of the learner in the timed rounds.
        learner_flops_per_second: ``learner_flops / seconds``.
        peak_matmul_flops_per_second: measured dense float32 matmul rate of the device.
        matmul_utilisation: ``learner_flops_per_second / peak_matmul_flops_per_second``.
        peak_memory_bytes: peak resident memory of the process (cpu) or peak allocated device memory (cuda).
        torch_threads: intra-op threads torch used (cpu).
        matmul_precision: ``torch.get_float32_matmul_precision()`` during the rounds (``"high"``:
            TF32 matmuls, set on CUDA by ``--cuda-matmul-precision high``).
    """

    device: str
    num_envs: int
    num_assets: int
    num_features: int
    obs_dim: int
    action_dim: int
    hidden_sizes: tuple[int, ...]
    rollout_steps: int
    update_epochs: int
    minibatch_size: int
    rounds: int
    env_steps: int
    seconds: float
    samples_per_second: float
    learner_flops: int
    learner_flops_per_second: float
    peak_matmul_flops_per_second: float
    matmul_utilisation: float
    peak_memory_bytes: int
    torch_threads: int
    matmul_precision: str

    def to_json_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (``hidden_sizes`` as a list)."""
        values = dataclasses.asdict(self)
        values["hidden_sizes"] = list(self.hidden_sizes)
        return values


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_matmul_peak(device: torch.device, size: int, repeats: int) -> float:
    """Best dense float32 matmul rate of ``device`` in FLOP/s over ``repeats`` timed calls.

    Args:
        device: where to multiply.
        size: side ``n`` of the two square matrices (``2 n^3`` FLOPs a call).
        repeats: timed calls (after one untimed warm-up call); the fastest counts.
    """
    generator = torch.Generator().manual_seed(0)
    left = torch.randn(size, size, generator=generator).to(device)
    right = torch.randn(size, size, generator=generator).to(device)
    out = torch.empty(size, size, device=device)
    torch.matmul(left, right, out=out)
    _synchronize(device)
    best_seconds = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.matmul(left, right, out=out)
        _synchronize(device)
        best_seconds = min(best_seconds, time.perf_counter() - start)
    return 2.0 * size**3 / best_seconds


def _peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return peak_rss_bytes()


def run_train_bench(
    num_envs: int,
    num_assets: int,
    num_features: int,
    num_sessions: int,
    device: torch.device,
    config: PPOConfig,
    warmup_rounds: int,
    rounds: int,
    matmul_size: int,
    matmul_repeats: int,
    seed: int,
    matmul_precision: str = "highest",
) -> TrainBenchResult:
    """Train PPO on a :class:`TradingEnv` over a random-walk panel and time whole rounds.

    Args:
        num_envs: ``N`` parallel envs (>= 1).
        num_assets: ``M`` assets (>= 1).
        num_features: ``F`` features per asset (>= 1).
        num_sessions: 390-bar sessions in the panel (>= 1).
        device: where env and learner run.
        config: the agent's hyper-parameters (network, epochs, minibatches).
        warmup_rounds: untimed rounds first (allocation, first-call costs).
        rounds: timed rounds (>= 1).
        matmul_size: side of the square matrices of the peak measurement.
        matmul_repeats: timed calls of the peak measurement (taken before and after the timed
            rounds; the best call counts).
        seed: seeds panel, env and agent.
        matmul_precision: float32 matmuls on a CUDA device, ``"highest"`` or ``"high"`` (TF32;
            the matmul peak is measured at it too); the CPU ignores it.
    """
    precision = check_matmul_precision(matmul_precision, "--cuda-matmul-precision")
    for name, value, low in (
        ("--envs", num_envs, 1),
        ("--assets", num_assets, 1),
        ("--features", num_features, 1),
        ("--sessions", num_sessions, 1),
        ("--rounds", rounds, 1),
        ("--warmup-rounds", warmup_rounds, 0),
        ("--matmul-size", matmul_size, 1),
        ("--matmul-repeats", matmul_repeats, 1),
    ):
        if value < low:
            raise SpecError(f"{name} must be >= {low}, got {value}")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    panel = random_walk_panel(num_sessions, num_assets, num_features, seed)
    env = TradingEnv(
        panel,
        "train",
        EnvConfig(horizon_bars=BARS_PER_SESSION),
        num_envs,
        seed=seed,
        device=device,
        entity_info=config.advantages == "entity",
    )
    agent = PPOAgent(
        env.obs_dim, env.action_dim, env.action_low, env.action_high, config, device, seed, layout=env.layout
    )
    with cuda_matmul_precision(device, precision):
        for _ in range(warmup_rounds):
            agent.train_round(env)
        peak_before = measure_matmul_peak(device, matmul_size, matmul_repeats)
        start = time.perf_counter()
        env_steps = sum(agent.train_round(env).env_steps for _ in range(rounds))
        _synchronize(device)
        seconds = time.perf_counter() - start
        peak = max(peak_before, measure_matmul_peak(device, matmul_size, matmul_repeats))
        used_precision = torch.get_float32_matmul_precision()
    learner_flops = agent.learner_flops_per_round(num_envs) * rounds
    return TrainBenchResult(
        device=str(device),
        num_envs=num_envs,
        num_assets=num_assets,
        num_features=num_features,
        obs_dim=env.obs_dim,
        action_dim=env.action_dim,
        hidden_sizes=config.hidden_sizes,
        rollout_steps=config.rollout_steps,
        update_epochs=config.update_epochs,
        minibatch_size=config.rollout_steps * num_envs // config.num_minibatches,
        rounds=rounds,
        env_steps=env_steps,
        seconds=seconds,
        samples_per_second=env_steps / seconds,
        learner_flops=learner_flops,
        learner_flops_per_second=learner_flops / seconds,
        peak_matmul_flops_per_second=peak,
        matmul_utilisation=learner_flops / seconds / peak,
        peak_memory_bytes=_peak_memory_bytes(device),
        torch_threads=torch.get_num_threads(),
        matmul_precision=used_precision,
    )
