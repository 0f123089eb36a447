"""Backtests: one deterministic pass of traders and baselines over a segment."""
