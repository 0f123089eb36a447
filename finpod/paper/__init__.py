"""Paper trading through Alpaca: a run's selected trader, live, safe across restarts.

Modules, one job each: :mod:`~finpod.paper.keys` (keys from the environment, redaction),
:mod:`~finpod.paper.ids` (deterministic client order ids), :mod:`~finpod.paper.journal` (the durable
SQLite journal), :mod:`~finpod.paper.broker` (the broker interface and its order types),
:mod:`~finpod.paper.alpaca_broker` (alpaca-py ``TradingClient(paper=True)``),
:mod:`~finpod.paper.orders` (idempotent submission), :mod:`~finpod.paper.reconcile` (broker vs
journal), :mod:`~finpod.paper.features` (online causal features), :mod:`~finpod.paper.decision` (the
run's trader), :mod:`~finpod.paper.sizing` (target weights to orders), :mod:`~finpod.paper.limits`
(limits, market hours, kill switch), :mod:`~finpod.paper.sim_broker` (a broker that fills like the
env), :mod:`~finpod.paper.replay` (the parity replay), :mod:`~finpod.paper.feed` (live bars),
:mod:`~finpod.paper.loop` (the trading loop) and :mod:`~finpod.paper.status`.
"""

from finpod.paper.loop import TradingHalted, run_paper
from finpod.paper.replay import ReplayResult, replay
from finpod.paper.status import paper_status

__all__ = ["ReplayResult", "TradingHalted", "paper_status", "replay", "run_paper"]
