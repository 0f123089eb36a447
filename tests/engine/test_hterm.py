"""The H-term: its objective on hand-computed numbers, its trajectory buffer, its extra policy step,
and ``h_term_coef = 0`` leaving PPO's training bit for bit as it was."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from engine._tournament_kit import (
    ROUND_ENV_STEPS,
    TINY_PPO,
    Validation,
    make_agent,
    make_env,
    tournament_config,
)
from podracer import Tournament, read_events
from podracer.generator import perturb_config
from podracer.hterm import MAX_LOG_DENSITY, TrajectoryBuffer, h_term_loss, normalized_returns
from podracer.ppo import AgentError, PPOAgent, PPOConfig, learning_rate_at, ppo_update
from podracer.rollout import Rollout
from podracer.toy import TargetMatchingEnv

OBS_DIM, ACTION_DIM = 4, 3
TINY = PPOConfig(
    rollout_steps=8, hidden_sizes=(16, 16), update_epochs=2, num_minibatches=4, activation="tanh"
)
LAMBDA = 0.125
"""The reference's ``lambda_h_term`` (2^-3)."""


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def toy_env(num_envs: int = 16) -> TargetMatchingEnv:
    return TargetMatchingEnv(num_envs, OBS_DIM, ACTION_DIM, 8, 0.0, 1.0, task_seed=0, device="cpu")


def toy_agent(config: PPOConfig = TINY, seed: int = 0) -> PPOAgent:
    return PPOAgent(OBS_DIM, ACTION_DIM, 0.0, 1.0, config, device="cpu", seed=seed)


# ---------------------------------------------------------------- the objective


def test_objective_matches_a_hand_computation() -> None:
    """returns [[1, 2], [3, 5]] normalise to [[0, 1/4], [1/2, 1]] (min 1, max 5); densities
    [[2, 1], [1/2, 4]]; H = -1/8 * (0 + 1/4 + 1/4 + 4) / 4 = -0.140625; dH/dlog_prob = -1/8 * density
    * r_norm / 4."""
    normalized = normalized_returns(torch.tensor([[1.0, 2.0], [3.0, 5.0]]))
    assert normalized.tolist() == [[0.0, 0.25], [0.5, 1.0]]
    log_probs = torch.tensor([[2.0, 1.0], [0.5, 4.0]]).log().requires_grad_()
    loss = h_term_loss(log_probs, normalized, LAMBDA)
    assert loss.item() == pytest.approx(-0.140625, rel=1e-6)
    loss.backward()
    assert log_probs.grad is not None
    expected = [[0.0, -0.125 * 0.25 / 4], [-0.125 * 0.25 / 4, -0.125 * 4.0 / 4]]
    torch.testing.assert_close(log_probs.grad, torch.tensor(expected))


def test_an_overflowing_density_is_capped_not_inf() -> None:
    log_probs = torch.tensor([[100.0, 0.0]], requires_grad=True)
    loss = h_term_loss(log_probs, torch.tensor([[1.0, 1.0]]), LAMBDA)
    assert torch.isfinite(loss)
    assert loss.item() == pytest.approx(-LAMBDA * (math.exp(MAX_LOG_DENSITY) + 1.0) / 2, rel=1e-5)
    loss.backward()
    assert log_probs.grad is not None
    assert log_probs.grad.tolist() == [[0.0, pytest.approx(-LAMBDA / 2)]]


def test_equal_returns_normalise_to_zero() -> None:
    assert normalized_returns(torch.full((2, 3), 0.7)).tolist() == [[0.0] * 3] * 2


# ---------------------------------------------------------------- the trajectory buffer


def _rollout(trajectory_means: list[float], steps: int = 2) -> Rollout:
    """A rollout whose env ``n`` has returns ``[mean - 1, mean + 1, ...]`` and observations ``n``."""
    num_envs = len(trajectory_means)
    rollout = Rollout.allocate(steps, num_envs, OBS_DIM, ACTION_DIM, torch.device("cpu"))
    offsets = torch.tensor([-1.0, 1.0]).repeat(steps // 2)[:, None]
    rollout.returns.copy_(torch.tensor(trajectory_means)[None, :] + offsets)
    rollout.obs.copy_(
        torch.arange(num_envs, dtype=torch.float32)[None, :, None].expand(steps, num_envs, OBS_DIM)
    )
    rollout.unit_actions.fill_(0.5)
    return rollout


def test_buffer_keeps_the_better_half_of_each_round_oldest_out() -> None:
    first = _rollout([0.0, 3.0, 1.0, 2.0])  # better half: envs 1 (mean 3) and 3 (mean 2)
    buffer = TrajectoryBuffer.for_rollout(None, first, capacity=3)
    buffer.push(first)
    assert (buffer.filled, buffer.next_slot) == (2, 2)
    assert buffer.obs[:2, 0, 0].tolist() == [1.0, 3.0]
    assert buffer.returns[:2].tolist() == [[2.0, 4.0], [1.0, 3.0]]  # (L, K): one row per trajectory

    second = _rollout([9.0, 8.0, -5.0, -6.0])  # envs 0 and 1: slot 2, then the oldest (slot 0)
    assert TrajectoryBuffer.for_rollout(buffer, second, capacity=3) is buffer
    buffer.push(second)
    assert (buffer.filled, buffer.next_slot) == (3, 1)
    assert buffer.obs[:, 0, 0].tolist() == [1.0, 3.0, 0.0]
    assert buffer.returns[:, 0].tolist() == [7.0, 1.0, 8.0]


def test_buffer_of_another_shape_starts_empty() -> None:
    rollout = _rollout([0.0, 1.0])
    buffer = TrajectoryBuffer.for_rollout(None, rollout, capacity=2)
    buffer.push(rollout)
    longer = _rollout([0.0, 1.0], steps=4)
    fresh = TrajectoryBuffer.for_rollout(buffer, longer, capacity=2)
    assert fresh is not buffer
    assert fresh.filled == 0
    assert TrajectoryBuffer.for_rollout(buffer, rollout, capacity=4) is not buffer


# ---------------------------------------------------------------- the extra policy step


def test_learn_adds_one_step_on_the_documented_objective_per_epoch() -> None:
    """One epoch, capacity for the whole round: ``learn`` equals PPO's epoch followed by one Adam step
    on ``-lambda * mean(pi(a|s) * r_norm)`` over the better half of the round's trajectories, with the
    objective written out here from the reference's formula."""
    config = dataclasses.replace(TINY, update_epochs=1, h_term_coef=LAMBDA, h_term_trajectories=64)
    agent = toy_agent(config, seed=3)
    env = toy_env()
    rollout, _ = agent.collect(env)
    twin = copy.deepcopy(agent)

    metrics = agent.learn(rollout)

    lr = learning_rate_at(config, twin.env_steps)
    ppo_update(twin.model, twin.optimizer, rollout, config, lr, twin.generator, twin.device, None)
    ppo_only = copy.deepcopy(twin.model.state_dict())
    best = rollout.returns.mean(0).topk(env.num_envs // 2).indices
    obs, actions = rollout.obs[:, best].transpose(0, 1), rollout.unit_actions[:, best].transpose(0, 1)
    returns = rollout.returns[:, best].T
    r_norm = (returns - returns.min()) / (returns.max() - returns.min())
    density = twin.model.distribution(obs.flatten(0, 1)).log_prob(actions.flatten(0, 1)).exp()
    objective = -LAMBDA * (density.view(r_norm.shape) * r_norm).mean()
    twin.optimizer.zero_grad(set_to_none=True)
    objective.backward()
    nn.utils.clip_grad_norm_(twin.model.parameters(), config.max_grad_norm)
    twin.optimizer.step()

    assert metrics["h_term_loss"].item() == pytest.approx(objective.item(), rel=1e-5)
    for name, weight in agent.model.state_dict().items():
        torch.testing.assert_close(weight, twin.model.state_dict()[name], msg=name)
    assert not torch.equal(agent.model.state_dict()["actor.0.weight"], ppo_only["actor.0.weight"])
    assert torch.equal(agent.model.state_dict()["critic.0.weight"], ppo_only["critic.0.weight"])


def test_the_h_term_moves_the_policy_only() -> None:
    agent = toy_agent(dataclasses.replace(TINY, h_term_coef=LAMBDA), seed=1)
    rollout, _ = agent.collect(toy_env())
    buffer = TrajectoryBuffer.for_rollout(None, rollout, capacity=8)
    buffer.push(rollout)
    buffer.loss(agent.model, LAMBDA).backward()
    grads = {name: p.grad for name, p in agent.model.named_parameters()}
    assert all(grads[name] is None for name in grads if name.startswith("critic"))
    assert all(grads[name] is not None for name in grads if name.startswith("actor"))


def test_h_term_coef_zero_trains_bit_identically_to_plain_ppo() -> None:
    """``h_term_coef = 0`` (the default) against the unchanged code path, driven by hand: collect,
    then :func:`ppo_update` with no hook. Same weights, optimiser state, metrics and generator after
    three rounds."""
    agent, reference = toy_agent(seed=5), toy_agent(seed=5)
    env, reference_env = toy_env(), toy_env()
    for _ in range(3):
        metrics = agent.train_round(env).metrics
        rollout, _ = reference.collect(reference_env)
        lr = learning_rate_at(reference.config, reference.env_steps)
        expected = ppo_update(
            reference.model,
            reference.optimizer,
            rollout,
            reference.config,
            lr,
            reference.generator,
            reference.device,
            None,
        )
        reference.env_steps += rollout.rewards.numel()
        assert "h_term_loss" not in metrics
        assert metrics["policy_loss"] == expected["policy_loss"].item()
    for name, weight in reference.model.state_dict().items():
        assert torch.equal(agent.model.state_dict()[name], weight), name
    ours, theirs = agent.optimizer.state_dict()["state"], reference.optimizer.state_dict()["state"]
    assert all(torch.equal(ours[i]["exp_avg_sq"], theirs[i]["exp_avg_sq"]) for i in theirs)
    assert torch.equal(agent.generator.get_state(), reference.generator.get_state())


# ---------------------------------------------------------------- config and search


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("h_term_coef", -0.1, r"h_term_coef must be in >= 0.0, got -0.1"),
        ("h_term_trajectories", 0, "h_term_trajectories must be >= 1, got 0"),
    ],
)
def test_bad_h_term_settings_are_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(AgentError, match=message):
        dataclasses.replace(TINY, **{field: value})


def test_the_tournament_moves_the_coefficient_off_zero_only_when_its_bounds_ask() -> None:
    """Default bounds [0, 0]: a child keeps its parent's value (the H-term costs x1.4 a round for no
    measured gain); a spec's perturb_bounds open the search, in linear space so 0 can move."""
    rng = np.random.default_rng(0)
    assert PPOConfig.PERTURBABLE["h_term_coef"] == (0.0, 0.0)
    assert PPOConfig.PERTURB_SPACES["h_term_coef"] == "linear"
    assert {perturb_config(TINY, 0.2, rng).h_term_coef for _ in range(20)} == {0.0}
    on = dataclasses.replace(TINY, h_term_coef=LAMBDA)
    assert {perturb_config(on, 0.2, rng).h_term_coef for _ in range(20)} == {LAMBDA}
    searched = [
        perturb_config(TINY, 0.2, rng, bounds={"h_term_coef": (0.0, 0.25)}).h_term_coef for _ in range(50)
    ]
    assert all(0.0 <= value <= 0.25 for value in searched)
    assert sum(value > 0.0 for value in searched) > 10


def test_an_agent_with_the_h_term_round_trips_through_a_snapshot() -> None:
    config = dataclasses.replace(TINY, h_term_coef=LAMBDA, h_term_trajectories=4)
    agent = toy_agent(config, seed=2)
    agent.train_round(toy_env())
    restored = PPOAgent.from_state_dict(agent.state_dict())
    assert restored.config.h_term_coef == LAMBDA
    assert restored.config.h_term_trajectories == 4
    stats = restored.train_round(toy_env())  # the buffer refills from the restored pod's next round
    assert np.isfinite(stats.metrics["h_term_loss"])


def test_a_thread_backend_tournament_trains_pods_with_the_h_term(tmp_path: Path) -> None:
    """The local (thread) backend, 2 pods at a time: every round of every pod runs the extra step
    and reports its loss; a perturbed child keeps its parent's coefficient (default bounds)."""
    base = dataclasses.replace(TINY_PPO, h_term_coef=LAMBDA, h_term_trajectories=8)
    tournament = Tournament(
        tournament_config(budget_env_steps=12 * ROUND_ENV_STEPS),
        tmp_path,
        make_agent,
        base,
        make_env,
        Validation(),
    )
    tournament.run()
    rounds = [e for e in read_events(tmp_path) if e["kind"] == "round_finished"]
    assert len(rounds) >= 12
    assert all(np.isfinite(e["data"]["metrics"]["h_term_loss"]) for e in rounds)
    started = [
        e["data"]["agent_config"]["h_term_coef"] for e in read_events(tmp_path) if e["kind"] == "pod_started"
    ]
    assert all(coef > 0.0 for coef in started)
