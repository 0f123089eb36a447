"""The cross-sectional policy: permutation-equivariant, any number of entities, snapshots, distribution."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from podracer.distributions import LogisticNormalDistribution
from podracer.entity import CrossSectionalActorCritic, EntityLayout, LayoutError
from podracer.errors import SnapshotError
from podracer.ppo import AgentError, PPOAgent, PPOConfig

F, E, G, K = 3, 1, 2, 1


def _layout(m: int) -> EntityLayout:
    return EntityLayout(num_entities=m, entity_features=F, entity_extras=E, num_globals=G, action_globals=K)


def _permute(obs: torch.Tensor, perm: torch.Tensor, m: int) -> torch.Tensor:
    """Observations ``(B, D)`` with the entities reordered by ``perm`` (features, extras; globals kept)."""
    features = obs[:, : m * F].view(-1, m, F)[:, perm].reshape(-1, m * F)
    extras = obs[:, m * F : m * (F + E)].view(-1, E, m)[:, :, perm].reshape(-1, E * m)
    return torch.cat([features, extras, obs[:, m * (F + E) :]], dim=1)


def _net(m: int, seed: int = 0) -> CrossSectionalActorCritic:
    return CrossSectionalActorCritic(_layout(m), (16, 16), "relu", seed)


def _scrambled(net: CrossSectionalActorCritic) -> CrossSectionalActorCritic:
    """Weights of a normal size (the heads start near zero: equivariance must hold for trained weights)."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    return net


def test_permuting_entities_permutes_the_weights() -> None:
    m = 7
    net = _scrambled(_net(m))
    obs = torch.randn(4, _layout(m).obs_dim, generator=torch.Generator().manual_seed(2))
    perm = torch.randperm(m, generator=torch.Generator().manual_seed(3))
    plain, permuted = net.distribution(obs), net.distribution(_permute(obs, perm, m))
    torch.testing.assert_close(permuted.loc[:, K:], plain.loc[:, K:][:, perm])
    torch.testing.assert_close(permuted.loc[:, :K], plain.loc[:, :K])
    weights, weights_permuted = plain.squash(plain.mode()), permuted.squash(permuted.mode())
    torch.testing.assert_close(weights_permuted[:, K:], weights[:, K:][:, perm])
    torch.testing.assert_close(net.value(_permute(obs, perm, m)), net.value(obs))
    assert not torch.allclose(weights[:, K:], weights[:, K:].mean(dim=1, keepdim=True))  # not trivially flat


def test_block_wise_first_layers_equal_the_layers_on_the_concatenation() -> None:
    """The encoders' and the entity head's first layers run by input block (globals and context once
    per row); the function is the documented one: each module on the concatenated inputs."""
    m = 5
    net = _scrambled(_net(m))
    layout = _layout(m)
    obs = torch.randn(6, layout.obs_dim, generator=torch.Generator().manual_seed(4))
    entities, globals_ = layout.split(obs)
    per_entity = torch.cat([entities, globals_.unsqueeze(1).expand(-1, m, -1)], dim=2)
    encoded = net.actor_encoder(per_entity)
    context = encoded.mean(dim=1)
    own_and_context = torch.cat([encoded, context.unsqueeze(1).expand_as(encoded)], dim=2)
    scores = net.entity_head(own_and_context).squeeze(-1)
    assert net.global_head is not None
    global_scores = net.global_head(torch.cat([context, globals_], dim=1))
    torch.testing.assert_close(net.distribution(obs).loc, torch.cat([global_scores, scores], dim=1))
    critic_context = net.critic_encoder(per_entity).mean(dim=1)
    value = net.critic_head(torch.cat([critic_context, globals_], dim=1)).squeeze(-1)
    torch.testing.assert_close(net.value(obs), value)


def test_one_network_for_any_number_of_entities() -> None:
    small, large = _net(5), _net(60)
    count = sum(p.numel() for p in small.parameters())
    assert count == sum(p.numel() for p in large.parameters())
    large.load_state_dict(_scrambled(small).state_dict())
    obs = torch.randn(3, _layout(60).obs_dim)
    dist = large.distribution(obs)
    assert dist.loc.shape == (3, K + 60)
    weights = dist.squash(dist.mode())
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(3))
    assert large.value(obs).shape == (3,)


def test_statistics_are_tied_across_entities() -> None:
    layout = _layout(3)
    mean = torch.arange(layout.obs_dim, dtype=torch.float64)
    var = torch.ones(layout.obs_dim, dtype=torch.float64)
    tied_mean, tied_var = layout.tie_statistics(mean, var)
    features_mean = tied_mean[: 3 * F].view(3, F)
    torch.testing.assert_close(features_mean, mean[: 3 * F].view(3, F).mean(dim=0).expand(3, F))
    assert tied_var[0] == pytest.approx(1.0 + torch.tensor([0.0, 3.0, 6.0]).var(unbiased=False).item())
    torch.testing.assert_close(
        tied_mean[3 * F : 3 * (F + E)], torch.full((3,), float(3 * F + 1), dtype=torch.float64)
    )
    torch.testing.assert_close(tied_mean[-G:], mean[-G:])


def test_logistic_normal_matches_torch_normal_and_sums_to_one() -> None:
    loc = torch.randn(5, 4)
    log_std = torch.tensor([-1.0, 0.0, 0.5, 0.2])
    ours = LogisticNormalDistribution(loc, log_std)
    theirs = torch.distributions.Normal(loc, log_std.exp())
    raw = ours.sample(torch.Generator().manual_seed(0))
    torch.testing.assert_close(ours.log_prob(raw), theirs.log_prob(raw).sum(dim=1))
    torch.testing.assert_close(ours.entropy(), theirs.entropy().sum(dim=1))
    torch.testing.assert_close(ours.squash(raw).sum(dim=1), torch.ones(5))


def test_agent_needs_a_matching_layout_and_snapshots_carry_it(tmp_path: Path) -> None:
    layout = _layout(4)
    config = PPOConfig(policy="cross_sectional", hidden_sizes=(8,), rollout_steps=4, num_minibatches=2)
    with pytest.raises(AgentError, match="needs an EntityLayout"):
        PPOAgent(layout.obs_dim, layout.action_dim, 0.0, 1.0, config)
    with pytest.raises(AgentError, match="entity layout describes"):
        PPOAgent(layout.obs_dim + 1, layout.action_dim, 0.0, 1.0, config, layout=layout)
    agent = PPOAgent(layout.obs_dim, layout.action_dim, 0.0, 1.0, config, seed=3, layout=layout)
    path = tmp_path / "agent.pt"
    torch.save(agent.state_dict(), path)
    loaded = PPOAgent.from_state_dict(torch.load(path, weights_only=True))
    obs = torch.randn(2, layout.obs_dim)
    torch.testing.assert_close(loaded.act(obs), agent.act(obs))
    flat = PPOAgent(layout.obs_dim, layout.action_dim, 0.0, 1.0, PPOConfig(hidden_sizes=(8,)))
    with pytest.raises(SnapshotError, match="policy="):
        flat.load_weights_from(agent.state_dict(), keep_optimizer=False)


def test_bad_layouts_and_policies_are_refused() -> None:
    with pytest.raises(LayoutError, match=">= 1 entity"):
        EntityLayout(num_entities=0, entity_features=1, entity_extras=0, num_globals=0, action_globals=0)
    with pytest.raises(AgentError, match="policy"):
        PPOConfig(policy="transformer")  # type: ignore[arg-type]


def test_flop_count_scales_with_entities() -> None:
    small, large = _net(5).matmul_flops_per_row(), _net(50).matmul_flops_per_row()
    assert large[0] > 9 * small[0]
    assert 0 < small[1] < small[0]
    assert math.isfinite(large[0])
