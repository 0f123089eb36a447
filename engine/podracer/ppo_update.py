"""The PPO update: clipped-PPO minibatch epochs over one round's transitions.

Shapes: ``B = T * N`` transitions of a :class:`~podracer.rollout.Rollout` (``T`` steps, ``N`` envs).
:meth:`podracer.ppo.PPOAgent.learn` sets the round's learning rate, checks the round fills its
minibatches, and calls :func:`ppo_update`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from podracer.adam import FusedAdam
from podracer.distributions import PolicyDistribution
from podracer.entity import CrossSectionalActorCritic
from podracer.entity_advantage import entity_policy_loss
from podracer.forecast import forecast_loss
from podracer.grad_step import ClippedStep
from podracer.networks import ActorCritic
from podracer.pathwise import pathwise_loss
from podracer.ppo_config import PPOConfig
from podracer.rollout import Rollout


def ppo_update(
    model: ActorCritic | CrossSectionalActorCritic,
    optimizer: FusedAdam,
    rollout: Rollout,
    cfg: PPOConfig,
    lr: float,
    generator: torch.Generator,
    device: torch.device,
    epoch_hook: Callable[[torch.Tensor], torch.Tensor] | None,
) -> dict[str, torch.Tensor]:
    """``cfg.update_epochs`` passes of clipped-PPO minibatch updates of ``model`` over ``rollout``.

    Each pass shuffles the ``B`` transitions (``generator``) into ``cfg.num_minibatches`` minibatches
    and minimises the clipped policy loss, the (optionally clipped) value loss and the negative
    entropy bonus, with advantage normalisation and gradient-norm clipping. After every pass
    ``epoch_hook`` (learner fusion) gets the pass's mean approximate KL and returns the KL to act on;
    ``cfg.target_kl`` stops the remaining passes.

    Args:
        model: the actor-critic to update in place.
        optimizer: its optimiser, already at the learning rate ``lr``.
        rollout: the round's transitions, advantages and returns, on ``device``.
        cfg: the agent's hyper-parameters.
        lr: the round's learning rate (reported as a metric).
        generator: draws the minibatch shuffles.
        device: where the metrics are accumulated (the rollout's device).
        epoch_hook: called after every pass, or ``None``.

    Returns:
        Metrics as 0-d tensors: losses, approximate KL and clip fraction are means over the
        minibatches run; ``entropy`` is the updated policy's mean entropy (nats) over the
        round's first minibatch-size transitions; ``explained_variance`` is the rollout
        critic's against the returns.
    """
    obs = rollout.obs.flatten(0, 1)
    unit_actions = rollout.unit_actions.flatten(0, 1)
    old_log_probs = rollout.log_probs.flatten()
    old_values = rollout.values.flatten()
    advantages = rollout.advantages.flatten()
    returns = rollout.returns.flatten()
    batch = obs.shape[0]
    entity = rollout.entity_advantages is not None and rollout.entity_log_probs is not None
    if rollout.entity_advantages is not None and rollout.entity_log_probs is not None:
        entity_advantages = rollout.entity_advantages.flatten(0, 1)
        entity_log_probs = rollout.entity_log_probs.flatten(0, 1)
        action_globals = unit_actions.shape[-1] - entity_log_probs.shape[-1]
    pathwise = None
    if (
        cfg.pathwise_coef > 0.0
        and rollout.entity_outcomes is not None
        and rollout.entity_holdings is not None
        and rollout.entity_cost_rates is not None
    ):
        pathwise = (
            rollout.entity_outcomes.flatten(0, 1),
            rollout.entity_holdings.flatten(0, 1),
            rollout.entity_cost_rates.flatten(0, 1),
        )

    forecast_outcomes = (
        rollout.entity_outcomes.flatten(0, 1)
        if cfg.forecast_coef > 0.0
        and rollout.entity_outcomes is not None
        and isinstance(model, CrossSectionalActorCritic)
        else None
    )

    step = ClippedStep(optimizer, cfg.max_grad_norm)
    sums = torch.zeros(5, device=device)  # policy loss, value loss, approx_kl, clip_frac, count
    epochs_run = 0
    for _ in range(cfg.update_epochs):
        epoch_kl = torch.zeros((), device=device)
        order = torch.randperm(batch, generator=generator, device=device)
        minibatches = order.tensor_split(cfg.num_minibatches)
        for idx in minibatches:
            mb_obs, mb_old_values, mb_returns = obs[idx], old_values[idx], returns[idx]
            forecast = None
            dist: PolicyDistribution
            if forecast_outcomes is not None:
                assert isinstance(model, CrossSectionalActorCritic)
                dist, new_values, forecast = model.distribution_value_and_forecast(mb_obs)
            else:
                dist, new_values = model.distribution_and_value(mb_obs)
            adv = advantages[idx]
            if cfg.normalize_advantages:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            if entity:
                components = dist.log_prob_components(unit_actions[idx])
                log_ratio = components.sum(dim=-1) - old_log_probs[idx]
                ratio = log_ratio.exp()
                policy_loss = entity_policy_loss(
                    components,
                    entity_log_probs[idx],
                    old_log_probs[idx],
                    entity_advantages[idx],
                    adv,
                    1.0 - cfg.clip_coef,
                    1.0 + cfg.clip_coef,
                    action_globals,
                    cfg.normalize_advantages,
                )
                if pathwise is not None:
                    outcomes, holdings, cost_rates = (part[idx] for part in pathwise)
                    policy_loss = policy_loss + cfg.pathwise_coef * pathwise_loss(
                        dist.squash(dist.mode()),
                        outcomes,
                        holdings,
                        cost_rates,
                        action_globals,
                        cfg.pathwise_risk,
                        cfg.pathwise_cost,
                    )
            else:
                log_ratio = dist.log_prob(unit_actions[idx]) - old_log_probs[idx]
                ratio = log_ratio.exp()
                policy_loss = torch.max(
                    -adv * ratio, -adv * ratio.clamp(1.0 - cfg.clip_coef, 1.0 + cfg.clip_coef)
                ).mean()

            value_error = (new_values - mb_returns).square()
            if cfg.clip_value:
                clipped = mb_old_values + (new_values - mb_old_values).clamp(
                    -cfg.value_clip_coef, cfg.value_clip_coef
                )
                value_error = torch.max(value_error, (clipped - mb_returns).square())
            value_loss = 0.5 * value_error.mean()

            loss = policy_loss + cfg.value_coef * value_loss
            if forecast is not None and forecast_outcomes is not None:
                loss = loss + cfg.forecast_coef * forecast_loss(forecast, forecast_outcomes[idx])
            if cfg.entropy_coef > 0.0:  # the Beta entropy's digammas are costly: skip them when unused
                loss = loss - cfg.entropy_coef * dist.entropy().mean()
            step.zero_grad()
            loss.backward()
            step.clip_and_step()

            with torch.no_grad():
                approx_kl = ((ratio - 1.0) - log_ratio).mean()
                clip_frac = ((ratio - 1.0).abs() > cfg.clip_coef).float().mean()
                epoch_kl += approx_kl / len(minibatches)
                sums += torch.stack(
                    (policy_loss.detach(), value_loss.detach(), approx_kl, clip_frac, sums.new_ones(()))
                )
        epochs_run += 1
        if epoch_hook is not None:  # learner fusion: average with the other learners
            epoch_kl = epoch_hook(epoch_kl)
        if cfg.target_kl is not None and float(epoch_kl) > cfg.target_kl:
            break

    with torch.no_grad():
        count = sums[4]
        explained_variance = 1.0 - (returns - old_values).var() / returns.var().clamp_min(1e-8)
        entropy = model.distribution(obs[: len(minibatches[0])]).entropy().mean()
    return {
        "policy_loss": sums[0] / count,
        "value_loss": sums[1] / count,
        "entropy": entropy,
        "approx_kl": sums[2] / count,
        "clip_fraction": sums[3] / count,
        "explained_variance": explained_variance,
        "learning_rate": torch.tensor(lr),
        "epochs_run": torch.tensor(float(epochs_run)),
    }
