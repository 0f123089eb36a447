"""The batched trading env: N portfolios x M assets on one device, gymnasium-compatible."""

from finpod.env.config import EnvConfig
from finpod.env.graph import GraphedRollout
from finpod.env.gym_adapter import NumpyVectorEnv, TorchVectorEnv
from finpod.env.trading_env import TradingEnv

__all__ = ["EnvConfig", "GraphedRollout", "NumpyVectorEnv", "TorchVectorEnv", "TradingEnv"]
