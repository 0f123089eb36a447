"""Backtests: one deterministic pass of traders and baselines over a segment.

A finished run's traders replayed on other data, dates or costs: :func:`finpod.backtest_run`
(:mod:`finpod.replay`).
"""
