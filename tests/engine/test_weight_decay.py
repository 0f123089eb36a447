"""Decoupled weight decay (``PPOConfig.weight_decay``): the optimiser, snapshots, populations."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from engine._choice_kit import (
    CHOICE_PPO,
    assert_population_equals_pods_one_by_one,
    choice_agent,
    choice_env,
    trained_alone,
)
from podracer.ppo import PPOConfig
from podracer.ppo_config import AgentError, build_optimizer, set_optimizer_hypers

DECAYING_PPO = dataclasses.replace(CHOICE_PPO, weight_decay=2.0)


def _train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, steps: int) -> None:
    for _ in range(steps):
        optimizer.zero_grad()
        model(x).square().sum().backward()
        optimizer.step()


def _norm(model: torch.nn.Module) -> float:
    return float(torch.sqrt(sum(p.detach().square().sum() for p in model.parameters())))


def test_a_step_first_shrinks_every_parameter_by_the_rate_times_the_decay() -> None:
    """The AdamW step (Loshchilov and Hutter): ``p <- p (1 - lr wd)``, then Adam's own step."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(6, 4)
    reference = torch.nn.Linear(6, 4)
    reference.load_state_dict(layer.state_dict())
    config = PPOConfig(learning_rate=1e-2, weight_decay=3.0)
    ours = build_optimizer(layer, config)
    theirs = torch.optim.AdamW(reference.parameters(), lr=1e-2, eps=config.adam_eps, weight_decay=3.0)
    x = torch.randn(5, 6)
    _train(layer, ours, x, steps=3)
    _train(reference, theirs, x, steps=3)
    for mine, expected in zip(layer.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(mine, expected)


def test_no_decay_is_plain_adam_bit_for_bit() -> None:
    torch.manual_seed(1)
    layer, reference = torch.nn.Linear(6, 4), torch.nn.Linear(6, 4)
    reference.load_state_dict(layer.state_dict())
    ours = build_optimizer(layer, PPOConfig(learning_rate=1e-3))
    theirs = torch.optim.Adam(reference.parameters(), lr=1e-3, eps=PPOConfig().adam_eps, fused=True)
    x = torch.randn(5, 6)
    _train(layer, ours, x, steps=5)
    _train(reference, theirs, x, steps=5)
    for mine, expected in zip(layer.parameters(), reference.parameters(), strict=True):
        assert torch.equal(mine, expected)


def test_training_with_decay_keeps_the_weights_smaller() -> None:
    plain = trained_alone(CHOICE_PPO, seed=0, rounds=6)
    decayed = trained_alone(DECAYING_PPO, seed=0, rounds=6)
    assert _norm(decayed.model) < _norm(plain.model)


def test_the_decay_is_validated() -> None:
    with pytest.raises(AgentError, match=r"weight_decay must be in >= 0.0"):
        PPOConfig(weight_decay=-1.0)
    with pytest.raises(AgentError, match="weight_decay"):
        PPOConfig(weight_decay=float("nan"))


def test_a_loaded_snapshot_trains_at_the_loading_config_s_decay() -> None:
    """A snapshot's Adam moments are kept, but its decay (like its learning rate) is the config's:
    a tournament that perturbs the decay of a child of a snapshot gets the new value."""
    donor = trained_alone(CHOICE_PPO, seed=0, rounds=2)
    child = choice_agent(DECAYING_PPO, 1)
    child.load_weights_from(donor.state_dict(), keep_optimizer=True)
    assert {group["weight_decay"] for group in child.optimizer.param_groups} == {2.0}
    child.train_round(choice_env())
    assert {group["weight_decay"] for group in child.optimizer.param_groups} == {2.0}
    set_optimizer_hypers(child.optimizer, CHOICE_PPO, 1e-3)
    assert {group["weight_decay"] for group in child.optimizer.param_groups} == {0.0}
    assert {group["lr"] for group in child.optimizer.param_groups} == {1e-3}


def test_a_population_with_weight_decay_equals_its_pods_trained_one_by_one() -> None:
    """Within 2e-7 after four rounds, with torch's AVX-512 and AVX2 kernels. Like any PPO pair that
    differs by float rounding, a pod can drift apart when a discrete choice (a clipped ratio, a
    clipped gradient norm) flips: seen with ``weight_decay = 0.5`` and ``entropy_coef = 0.01`` on
    seed 4 under AVX2 kernels only (1.4e-3 after four rounds; without either setting, 1e-7)."""
    configs = [
        DECAYING_PPO,
        dataclasses.replace(DECAYING_PPO, weight_decay=1.0, entropy_coef=0.01),
        CHOICE_PPO,
    ]
    assert_population_equals_pods_one_by_one(configs)


def test_the_decay_is_pinned_unless_a_search_names_it() -> None:
    assert PPOConfig.PERTURBABLE["weight_decay"] == (0.0, 0.0)
