"""Learning from a population's round: every pod's clipped-PPO epochs as one batched loss.

Shapes: ``P`` pods, ``B`` transitions per pod and round, ``b`` rows per minibatch.

:func:`update_population` is :func:`podracer.ppo_update.ppo_update` for ``P`` agents at once, on the
:class:`~podracer.population_collect.PodBatch` that :func:`~podracer.population_collect.collect_population`
made; :func:`podracer.population.train_population_round` ties the two together.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from podracer.entity_advantage import entity_policy_loss
from podracer.forecast import forecast_loss
from podracer.grad_step import ClippedStep
from podracer.pathwise import pathwise_loss
from podracer.population_collect import PodBatch
from podracer.ppo import PPOAgent, learning_rate_at
from podracer.ppo_config import set_optimizer_hypers
from podracer.rollout import Rollout
from podracer.stacked import StackedModel, hyper_column


def update_population(
    agents: Sequence[PPOAgent], batch: PodBatch, model: StackedModel, rollouts: Sequence[Rollout | None]
) -> tuple[dict[str, torch.Tensor], list[dict[str, torch.Tensor]]]:
    """``update_epochs`` passes of clipped-PPO minibatch updates of every pod, as one batched loss.

    The loss is the sum of the pods' own losses, so each pod's gradient is its own; then every
    agent clips its gradient and steps its own Adam. After each pass a pod with the H-term on takes
    its own H-term step (:meth:`~podracer.ppo.PPOAgent.epoch_hooks`, on its rollout in
    ``rollouts``). A pod whose epoch KL passes its ``target_kl`` stops updating (and drawing
    shuffles) while the others go on.

    Returns:
        Per-pod metrics ``(P,)``, as :func:`~podracer.ppo_update.ppo_update` reports them, and each
        pod's extra metrics (``h_term_loss`` where the H-term ran).
    """
    cfg = agents[0].config
    pods, rows = batch.obs.shape[:2]
    device = batch.obs.device
    _, action_globals = agents[0].entity_shape()
    lrs = []
    for agent in agents:
        lr = learning_rate_at(agent.config, agent.env_steps, agent.budget_spent)
        set_optimizer_hypers(agent.optimizer, agent.config, lr)
        lrs.append(lr)
    low = (1.0 - hyper_column(agents, "clip_coef", device, float64=True)).float().unsqueeze(1)
    high = (1.0 + hyper_column(agents, "clip_coef", device, float64=True)).float().unsqueeze(1)
    clip_coef = hyper_column(agents, "clip_coef", device).unsqueeze(1)
    value_clip = hyper_column(agents, "value_clip_coef", device).unsqueeze(1)
    value_coef = hyper_column(agents, "value_coef", device)
    entropy_coef = hyper_column(agents, "entropy_coef", device)
    use_entropy = any(agent.config.entropy_coef > 0.0 for agent in agents)
    pathwise_coef = hyper_column(agents, "pathwise_coef", device)
    pathwise_risk = hyper_column(agents, "pathwise_risk", device)
    pathwise_cost = hyper_column(agents, "pathwise_cost", device)
    pathwise = (
        (batch.entity_outcomes, batch.entity_holdings, batch.entity_cost_rates)
        if any(agent.config.pathwise_coef > 0.0 for agent in agents)
        and batch.entity_outcomes is not None
        and batch.entity_holdings is not None
        and batch.entity_cost_rates is not None
        else None
    )
    forecast_coef = hyper_column(agents, "forecast_coef", device)
    forecasting = batch.entity_outcomes is not None and all(
        agent.config.forecast_coef > 0.0 for agent in agents
    )
    optimizer_steps = [ClippedStep(agent.optimizer, agent.config.max_grad_norm) for agent in agents]
    hooks = [
        None if rollout is None else agent.epoch_hooks(rollout)
        for agent, rollout in zip(agents, rollouts, strict=True)
    ]
    active = [True] * pods
    pod_rows = torch.arange(pods, device=device).unsqueeze(1)
    sums = torch.zeros(pods, 5, device=device)  # policy loss, value loss, approx_kl, clip_frac, count
    epochs_run = torch.zeros(pods, device=device)
    minibatch_count = cfg.num_minibatches
    for _ in range(cfg.update_epochs):
        if not any(active):
            break
        mask = torch.tensor(active, dtype=torch.float32, device=device)
        order = torch.stack(
            [
                torch.randperm(rows, generator=agent.generator, device=device)
                if on
                else torch.arange(rows, device=device)
                for agent, on in zip(agents, active, strict=True)
            ]
        )
        minibatches = order.tensor_split(minibatch_count, dim=1)
        epoch_kl = torch.zeros(pods, device=device)
        for idx in minibatches:
            mb_obs = batch.obs[pod_rows, idx]
            forecast = None
            if forecasting:
                dist, new_values, forecast = model.distribution_value_and_forecast(model.parameters(), mb_obs)
            else:
                dist, new_values = model.distribution_and_value(model.parameters(), mb_obs)
            adv = batch.advantages[pod_rows, idx]
            if cfg.normalize_advantages:
                adv = (adv - adv.mean(dim=1, keepdim=True)) / (adv.std(dim=1, keepdim=True) + 1e-8)
            if batch.entity_log_probs is None or batch.entity_advantages is None:
                log_ratio = dist.log_prob(batch.unit_actions[pod_rows, idx]) - batch.log_probs[pod_rows, idx]
                ratio = log_ratio.exp()
                policy_loss = torch.max(-adv * ratio, -adv * ratio.clamp(low, high)).mean(dim=1)
            else:
                components = dist.log_prob_components(batch.unit_actions[pod_rows, idx])
                log_ratio = components.sum(dim=-1) - batch.log_probs[pod_rows, idx]
                ratio = log_ratio.exp()
                policy_loss = entity_policy_loss(
                    components,
                    batch.entity_log_probs[pod_rows, idx],
                    batch.log_probs[pod_rows, idx],
                    batch.entity_advantages[pod_rows, idx],
                    adv,
                    low,
                    high,
                    action_globals,
                    cfg.normalize_advantages,
                )
                if pathwise is not None:  # a pod with weight 0 gets exactly 0 from it
                    outcomes, holdings, cost_rates = (part[pod_rows, idx] for part in pathwise)
                    policy_loss = policy_loss + pathwise_coef * pathwise_loss(
                        dist.squash(dist.mode()),
                        outcomes,
                        holdings,
                        cost_rates,
                        action_globals,
                        pathwise_risk,
                        pathwise_cost,
                    )
            old_values, returns = batch.values[pod_rows, idx], batch.returns[pod_rows, idx]
            value_error = (new_values - returns).square()
            if cfg.clip_value:
                clipped = old_values + (new_values - old_values).clamp(-value_clip, value_clip)
                value_error = torch.max(value_error, (clipped - returns).square())
            value_loss = 0.5 * value_error.mean(dim=1)
            loss = policy_loss + value_coef * value_loss
            if forecast is not None and batch.entity_outcomes is not None:
                loss = loss + forecast_coef * forecast_loss(forecast, batch.entity_outcomes[pod_rows, idx])
            if use_entropy:  # a pod with weight 0 gets exactly 0 from it
                loss = loss - entropy_coef * dist.entropy().mean(dim=1)
            for optimizer_step in optimizer_steps:
                optimizer_step.zero_grad()
            loss.sum().backward()
            for optimizer_step, on in zip(optimizer_steps, active, strict=True):
                if on:
                    optimizer_step.clip_and_step()
            with torch.no_grad():
                approx_kl = ((ratio - 1.0) - log_ratio).mean(dim=1)
                clip_frac = ((ratio - 1.0).abs() > clip_coef).float().mean(dim=1)
                epoch_kl += approx_kl / len(minibatches)
                step = torch.stack(
                    (
                        policy_loss.detach(),
                        value_loss.detach(),
                        approx_kl,
                        clip_frac,
                        torch.ones_like(approx_kl),
                    ),
                    dim=1,
                )
                sums += step * mask.unsqueeze(1)
        epochs_run += mask
        for index, hook in enumerate(hooks):
            if hook is not None and hook[0] is not None and active[index]:
                epoch_kl[index] = hook[0](epoch_kl[index])
        targets = [agent.config.target_kl for agent in agents]
        if any(target is not None for target in targets):
            kls = epoch_kl.tolist()
            active = [
                on and (target is None or kl <= target)
                for on, target, kl in zip(active, targets, kls, strict=True)
            ]

    with torch.no_grad():
        count = sums[:, 4]
        returns, old_values = batch.returns, batch.values
        explained_variance = 1.0 - (returns - old_values).var(dim=1) / returns.var(dim=1).clamp_min(1e-8)
        first = batch.obs[:, : minibatches[0].shape[1]]
        entropy = model.distribution(model.parameters(), first).entropy().mean(dim=1)
    extras = [
        {"h_term_loss": hook[1].last_loss}
        if hook is not None and hook[1] is not None and hook[1].last_loss is not None
        else {}
        for hook in hooks
    ]
    return {
        "policy_loss": sums[:, 0] / count,
        "value_loss": sums[:, 1] / count,
        "entropy": entropy,
        "approx_kl": sums[:, 2] / count,
        "clip_fraction": sums[:, 3] / count,
        "explained_variance": explained_variance,
        "learning_rate": torch.tensor(lrs, device=device),
        "epochs_run": epochs_run,
    }, extras
