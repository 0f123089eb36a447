"""The auxiliary forecast loss (``PPOConfig.forecast_coef``): the target, the head, learning, populations."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from engine._choice_kit import (
    CHOICE_PPO,
    ENTITIES,
    LAYOUT,
    assert_population_equals_pods_one_by_one,
    choice_agent,
    trained_alone,
)
from podracer.forecast import forecast_loss
from podracer.ppo import PPOConfig
from podracer.ppo_config import AgentError

FORECAST_PPO = dataclasses.replace(CHOICE_PPO, forecast_coef=1.0)


def test_the_target_is_the_row_demeaned_outcome_in_units_of_its_spread() -> None:
    outcomes = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 3.0]])
    relative = outcomes - outcomes.mean(dim=1, keepdim=True)
    spread = relative.square().mean().sqrt()
    target = relative / spread
    assert float(forecast_loss(target, outcomes)) == pytest.approx(0.0, abs=1e-12)
    forecast = torch.zeros(2, 3)
    torch.testing.assert_close(forecast_loss(forecast, outcomes), target.square().mean())
    # the same at any reward scale, and for any common shift of a row
    torch.testing.assert_close(forecast_loss(forecast, 1e-3 * outcomes + 5.0), target.square().mean())


def test_each_leading_batch_gets_its_own_loss_and_flat_outcomes_give_none() -> None:
    outcomes = torch.randn(3, 8, 4, generator=torch.Generator().manual_seed(0))
    outcomes[1] = 2.5  # one pod whose outcomes do not differ across entities
    forecast = torch.randn(3, 8, 4, requires_grad=True)
    loss = forecast_loss(forecast, outcomes)
    assert loss.shape == (3,)
    assert float(loss[1].detach()) == 0.0
    for pod in (0, 2):
        torch.testing.assert_close(loss[pod], forecast_loss(forecast[pod], outcomes[pod]))
    loss.sum().backward()
    assert forecast.grad is not None
    assert float(forecast.grad[1].abs().sum()) == 0.0


def test_only_a_forecasting_agent_has_the_head_so_older_snapshots_still_load() -> None:
    plain, forecasting = choice_agent(CHOICE_PPO, 0), choice_agent(FORECAST_PPO, 0)
    plain_keys = set(plain.model.state_dict())
    assert not any(key.startswith("forecast_head") for key in plain_keys)
    assert set(forecasting.model.state_dict()) - plain_keys == {"forecast_head.0.weight"}  # no bias
    # the head is drawn last, so every other initial weight is the same
    for name, value in plain.model.state_dict().items():
        torch.testing.assert_close(forecasting.model.state_dict()[name], value, rtol=0.0, atol=0.0)


def test_the_forecast_loss_needs_per_entity_outcomes() -> None:
    with pytest.raises(AgentError, match="forecast_coef > 0 needs advantages 'entity'"):
        PPOConfig(policy="cross_sectional", advantages="joint", forecast_coef=1.0)
    with pytest.raises(AgentError, match=r"forecast_coef must be in >= 0.0"):
        PPOConfig(forecast_coef=-0.5)


def test_training_with_it_teaches_the_head_to_rank_the_entities() -> None:
    """On the entity-choice toy (each entity's outcome is its feature's sign times the edge, plus
    noise) the head's forecasts come to rank the entities as their features do."""
    agent = trained_alone(FORECAST_PPO, seed=0, rounds=20, edge=0.5)
    features = torch.randn(512, ENTITIES, generator=torch.Generator().manual_seed(7))
    obs = torch.cat([features, torch.ones(512, 1)], dim=1)
    with torch.no_grad():
        _, _, forecast = agent.model.distribution_value_and_forecast(agent._normalize(obs))
    assert forecast is not None
    assert forecast.shape == (512, LAYOUT.num_entities)
    rank_corr = torch.corrcoef(torch.stack([forecast.flatten(), features.flatten()]))[0, 1]
    assert float(rank_corr) > 0.5, float(rank_corr)


def test_a_population_with_the_forecast_loss_equals_its_pods_trained_one_by_one() -> None:
    configs = [
        FORECAST_PPO,
        dataclasses.replace(FORECAST_PPO, forecast_coef=0.25, entropy_coef=0.01),
        dataclasses.replace(FORECAST_PPO, pathwise_coef=1.0, pathwise_risk=0.01),
    ]
    assert_population_equals_pods_one_by_one(configs)


def test_pods_with_and_without_a_forecast_head_are_not_stacked_together() -> None:
    from podracer.errors import TournamentError
    from podracer.stacked import check_population, structure_key

    plain, forecasting = choice_agent(CHOICE_PPO, 0), choice_agent(FORECAST_PPO, 1)
    assert structure_key(plain) != structure_key(forecasting)
    assert structure_key(forecasting) == structure_key(
        choice_agent(dataclasses.replace(FORECAST_PPO, forecast_coef=0.1), 2)
    )
    with pytest.raises(TournamentError, match="forecast head"):
        check_population([plain, forecasting])


def test_weights_from_a_network_with_another_forecast_head_are_refused_by_name() -> None:
    from podracer.errors import SnapshotError

    forecasting = choice_agent(FORECAST_PPO, 0)
    with pytest.raises(SnapshotError, match="forecast head=True"):
        choice_agent(CHOICE_PPO, 1).load_weights_from(forecasting.state_dict(), keep_optimizer=True)
    choice_agent(dataclasses.replace(FORECAST_PPO, forecast_coef=0.2), 1).load_weights_from(
        forecasting.state_dict(), keep_optimizer=True
    )
