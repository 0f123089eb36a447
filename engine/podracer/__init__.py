"""podracer: an asynchronous, elastic tournament of RL agents ("pods").

Domain-free: it knows tensors, envs, scores and snapshots, nothing about markets. It imports no
pandas, no finpod and no broker client, and ``tests/engine/test_domain_free.py`` proves it.
"""

from podracer.api import Agent, Policy, RoundStats, TensorVectorEnv

__all__ = ["Agent", "Policy", "RoundStats", "TensorVectorEnv"]
