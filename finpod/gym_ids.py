"""The gymnasium id finpod registers on import (light: only gymnasium's registry is imported here)."""

from __future__ import annotations

GYM_ID = "finpod/Trading-v0"
"""``gym.make(GYM_ID, spec=...)``: one portfolio; ``gym.make_vec(GYM_ID, num_envs=N, spec=...)``: N."""


def register_envs() -> None:
    """Register :data:`GYM_ID` (entry points in :mod:`finpod.interop`); idempotent."""
    try:
        from gymnasium.envs.registration import register, registry
    except ImportError:  # gymnasium is a dependency; a stripped environment still imports finpod
        return
    if GYM_ID not in registry:
        register(
            id=GYM_ID,
            entry_point="finpod.interop:TradingGymEnv",
            vector_entry_point="finpod.interop:make_vector_env",
        )
