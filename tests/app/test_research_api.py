"""A research script through the public API only: train, get a trader, replay it elsewhere, compare runs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from tiny import expected_traders, tiny_bars, tiny_spec, trajectory_name, write_tiny_dataset

import finpod
from finpod.env import TorchVectorEnv
from finpod.trader import load_policy


@pytest.mark.slow
def test_research_script_policy_backtest_export_and_compare(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data" / "a", tiny_bars(seed=11))
    other = write_tiny_dataset(tmp_path / "data" / "b", tiny_bars(seed=12))
    reports = tmp_path / "reports"
    spec = tiny_spec(dataset).with_(tournament={"pool_size": 2})  # two pods: two leaderboard entries
    first = finpod.run(spec, out=reports, quiet=True, report=False)
    assert not first.report_html.exists()  # --no-report: data only

    best = first.policy("best")
    env = finpod.make_env(spec, segment="validation", num_envs=2, random_start=False)
    obs, _ = env.reset(seed=0)
    actions = best(obs)
    assert actions.shape == (2, best.action_dim)
    assert float(actions.min()) >= 0.0
    assert float(actions.max()) <= 1.0
    assert first.policy("ensemble").name == "ensemble_top2"
    assert first.policy("ensemble").fully_invested is False  # a daily spec may hold cash
    mandated = load_policy(
        first.run_dir, "ensemble", ensemble_k=2, action_mode="weights", fully_invested=True
    )
    assert mandated.fully_invested
    invested_best = load_policy(
        first.run_dir, "best", ensemble_k=2, action_mode="weights", fully_invested=True
    )
    assert not invested_best(obs)[:, 0].any(), "one agent's cash score is 0 too"
    torch.testing.assert_close(invested_best(obs)[:, 1:], actions[:, 1:])
    assert not mandated(obs)[:, 0].any(), "each member's cash score dropped before the average"
    torch.testing.assert_close(mandated(obs).sum(dim=1), torch.ones(2))
    assert torch.equal(first.policy(1)(obs), actions)
    with pytest.raises(finpod.SpecError, match="rank from 1"):
        first.policy(9)
    trajectory = first.policy("trajectory")  # the run's archived snapshots, their weights averaged
    assert trajectory.name == trajectory_name(first.metrics.index)
    assert len(trajectory.agents) >= 2

    # Same data, same dates: the replay equals the run's own backtest, although the replay's panel
    # starts elsewhere (a refit of the normalisation on it would change every action).
    again = finpod.backtest_run(first)
    assert "linear" in first.metrics.index  # the API exposes the linear baseline like equal weight
    assert first.backtest.traders["linear"].kind == "baseline"
    for name in ("best", "ensemble_top2", "equal_weight", "linear"):  # the linear baseline, like EW
        pd.testing.assert_series_equal(
            again.traders[name].returns, first.backtest.traders[name].returns, check_freq=False
        )

    moved = finpod.backtest_run(
        first, dataset=other, start="2019-11-01", end="2019-12-31", costs={"fee_rate": 0.0005}
    )
    assert isinstance(moved, type(first.backtest))
    assert moved.start == pd.Timestamp("2019-11-01", tz="UTC")
    assert list(moved.traders) == expected_traders(moved.traders)
    assert not moved.traders["best"].returns.equals(first.backtest.traders["best"].returns)
    with pytest.raises(finpod.SpecError, match="costs: unknown key"):
        finpod.backtest_run(first, costs={"fee": 0.1})
    with pytest.raises(finpod.DataError, match="no bar before it"):
        finpod.backtest_run(first, start="2019-01-02")

    exported = best.export(tmp_path / "best.pt2")
    sidecar = json.loads(exported.with_suffix(".pt2.json").read_text(encoding="utf-8"))
    assert sidecar["action_mode"] == "weights"
    assert sidecar["fully_invested"] is False
    probe = np.random.default_rng(0).normal(size=(5, best.obs_dim)).astype(np.float32)
    np.save(tmp_path / "obs.npy", probe)
    expected = best(torch.from_numpy(probe)).numpy()
    script = textwrap.dedent(
        f"""
        import sys, importlib.abc
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("finpod", "podracer"):
                    raise ImportError("training code is not available here: " + name)
        sys.meta_path.insert(0, Block())
        import numpy, torch
        program = torch.export.load({str(exported)!r}).module()
        obs = torch.from_numpy(numpy.load({str(tmp_path / "obs.npy")!r}))
        numpy.save({str(tmp_path / "actions.npy")!r}, program(obs).detach().numpy())
        assert not any(m.split(".")[0] in ("finpod", "podracer") for m in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(np.load(tmp_path / "actions.npy"), expected, rtol=1e-5, atol=1e-6)

    second = finpod.run(spec.with_(seed=4), out=reports, quiet=True, report=False)
    table = finpod.runs(reports)
    assert list(table.index) == sorted([first.run_dir.name, second.run_dir.name])
    assert set(table["status"]) == {"done"}
    assert table.loc[first.run_dir.name, "sharpe_ratio"] == pytest.approx(
        first.metrics.loc["best", "sharpe_ratio"]
    )
    metrics, spec_diff = finpod.compare_runs([first.run_dir, second.run_dir])
    assert metrics.loc[(second.run_dir.name, "best"), "sharpe_ratio"] == pytest.approx(
        second.metrics.loc["best", "sharpe_ratio"]
    )
    assert list(spec_diff.index) == ["seed"]
    assert list(spec_diff.loc["seed"]) == ["3", "4"]


def test_a_run_without_an_archive_has_no_trajectory_trader(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", tiny_bars(seed=11))
    spec = tiny_spec(dataset, budget_env_steps=512).with_(tournament={"archive_size": 0})
    run = finpod.run(spec, out=tmp_path / "reports", quiet=True, report=False)
    assert not [name for name in run.metrics.index if name.startswith("trajectory")]
    with pytest.raises(
        finpod.SpecError, match=r"no trajectory archive .* fix: use policy\('best'\) \(--trader best\)"
    ):
        run.policy("trajectory")


def test_make_env_starts_invested_on_train_only(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", tiny_bars(seed=3))
    spec = tiny_spec(dataset).with_(env={"start_portfolio": "equal_weight"})
    for segment, random_start, invested in [
        ("train", True, True),
        ("train", False, True),
        ("validation", True, False),
        ("validation", None, False),
    ]:
        env = finpod.make_env(spec, segment=segment, num_envs=3, random_start=random_start)
        env.reset(seed=0)
        assert isinstance(env, TorchVectorEnv)
        assert bool(env.env.state.shares.any(dim=1).all()) is invested, (segment, random_start)
        if not invested:
            assert not env.env.state.shares.any(), (segment, random_start)
