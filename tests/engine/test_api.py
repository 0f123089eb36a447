"""The public API: the names the application codes against, and the README's ten-line example runs."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import podracer

README_EXAMPLE = """
from pathlib import Path
import torch
from podracer import EnsemblePolicy, Tournament, TournamentConfig
from podracer.ppo import PPOAgent, PPOConfig
from podracer.toy import TargetMatchingEnv

make_env = lambda seed: TargetMatchingEnv(64, 4, 2, 32, 0.0, 1.0, task_seed=0, device="cpu")
make_agent = lambda config, seed: PPOAgent(4, 2, 0.0, 1.0, config, "cpu", seed)
val_env, val_obs = make_env(0), torch.randn(512, 4, generator=torch.Generator().manual_seed(1))
score = lambda policy: float(val_env.reward(val_obs, policy(val_obs)).mean())  # higher is better
cfg = TournamentConfig(pool_size=2, leaderboard_size=4, budget_env_steps=50_000, budget_seconds=None,
                       fresh_pod_prob=0.2, perturb_scale=0.25, softmax_temperature=1.0,
                       eval_every_rounds=1, seed=0)
base = PPOConfig(hidden_sizes=(64, 64))
result = Tournament(cfg, Path("runs/toy"), make_agent, base, make_env, score).run()
# the ensemble: the best agent of each of (up to) 3 distinct lineages
ensemble = EnsemblePolicy.from_leaderboard(result.leaderboard, k=3, agent_factory=make_agent)
print(f"best {result.leaderboard.entries[0].score:.3f}  ensemble {score(ensemble):.3f}")
"""
UNIFORM_POLICY_SCORE = -0.35
"""About the toy task's score of uniformly random actions; a trained agent must do clearly better."""
LEARNED_MARGIN = 0.1

PUBLIC_NAMES = {
    "Agent",
    "Backend",
    "EnsemblePolicy",
    "Leaderboard",
    "LeaderboardEntry",
    "LocalBackend",
    "Policy",
    "RoundStats",
    "SnapshotError",
    "TensorVectorEnv",
    "Tournament",
    "TournamentConfig",
    "TournamentError",
    "TournamentEvent",
    "TournamentResult",
}


def test_the_public_names_are_exported() -> None:
    assert set(podracer.__all__) >= PUBLIC_NAMES
    assert all(hasattr(podracer, name) for name in podracer.__all__)


def test_the_readme_example_runs_and_learns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(README_EXAMPLE, "README example", "exec"), {"__name__": "readme_example"})
    match = re.fullmatch(r"best (-?\d\.\d{3})  ensemble (-?\d\.\d{3})\n", output.getvalue())
    assert match is not None, output.getvalue()
    best, ensemble = float(match[1]), float(match[2])
    assert best > UNIFORM_POLICY_SCORE + LEARNED_MARGIN
    assert ensemble > UNIFORM_POLICY_SCORE + LEARNED_MARGIN
    assert (tmp_path / "runs" / "toy" / "leaderboard" / "index.json").exists()
