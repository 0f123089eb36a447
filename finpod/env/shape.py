"""The sizes of a trading env, known without building one: what an agent is built for."""

from __future__ import annotations

from dataclasses import dataclass

from finpod.env.config import ActionMode
from finpod.env.observation import entity_layout, observation_size
from podracer.api import EntityLayout


@dataclass(frozen=True)
class EnvShape:
    """What a :class:`~finpod.env.TradingEnv` over ``M`` assets with ``F`` features each takes and
    gives, per env: the sizes and bounds an agent's networks are built for.

    Attributes:
        obs_dim: ``D``, the observation row's length (:func:`~finpod.env.observation.observation_size`).
        action_dim: ``A``: ``M + 1`` target weights over ``[cash, asset_1 .. asset_M]`` in
            ``weights`` mode, ``M`` share deltas in ``share_delta`` mode.
        action_low: lower bound of every action component (0 for weights, -1 for share deltas).
        action_high: upper bound of every action component (1).
        layout: the observation as entities (the assets) x features plus globals, for a
            cross-sectional policy.
    """

    obs_dim: int
    action_dim: int
    action_low: float
    action_high: float
    layout: EntityLayout

    @classmethod
    def of(cls, num_assets: int, num_features: int, action_mode: ActionMode) -> EnvShape:
        """The shape of an env over ``num_assets`` assets with ``num_features`` features each."""
        if action_mode == "weights":
            action_dim, low, high = num_assets + 1, 0.0, 1.0
        else:
            action_dim, low, high = num_assets, -1.0, 1.0
        layout = entity_layout(num_assets, num_features, action_dim - num_assets)
        return cls(observation_size(num_assets, num_features), action_dim, low, high, layout)
