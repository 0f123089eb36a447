"""Fixtures of the paper-trading tests: the fake Alpaca broker and a journal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from finpod.paper.alpaca_broker import AlpacaBroker
from finpod.paper.journal import Journal
from finpod.paper.keys import AlpacaKeys, Redactor
from tests.fakes.alpaca_trading import FakeTradingServer

KEY_ID, SECRET = "PKTESTKEYID123", "test-secret-value-456"
TIMEOUT_S = 0.5
MINUTE_SEGMENTS = {
    "train": ["2019-11-25", "2019-11-26"],
    "validation": ["2019-11-27", "2019-11-27"],
    "backtest": ["2019-11-29", "2019-11-29"],  # a half day: 210 minutes, the session ends at 13:00
}
HALF_DAY_MINUTES = 210


@pytest.fixture
def server() -> Iterator[FakeTradingServer]:
    """A fake paper broker with 100k USD and prices for AAA and BBB."""
    with FakeTradingServer(key_id=KEY_ID, secret_key=SECRET) as fake:
        fake.set_price("AAA", 50.0)
        fake.set_price("BBB", 20.0)
        yield fake


@pytest.fixture
def broker(server: FakeTradingServer) -> AlpacaBroker:
    """The real alpaca-py client against the fake, with a short timeout."""
    keys = AlpacaKeys(KEY_ID, SECRET)
    return AlpacaBroker(keys, url=server.url, timeout_s=TIMEOUT_S, redact=Redactor([KEY_ID, SECRET]))


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    """A fresh journal file."""
    with Journal.open(tmp_path / "journal.sqlite") as j:
        yield j


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny daily run (3 symbols, 2019; best and a top-2 ensemble), trained once."""
    import finpod
    from tests.app.tiny import tiny_bars, tiny_spec, write_tiny_dataset

    root = tmp_path_factory.mktemp("paper_run")
    dataset = write_tiny_dataset(root / "data", tiny_bars(seed=11))
    spec = tiny_spec(dataset).with_(tournament={"pool_size": 2})  # two lineages: an ensemble exists
    result = finpod.run(spec, out=root / "reports", quiet=True)
    return Path(result.run_dir)


@pytest.fixture(scope="session")
def minute_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny minute run (3 synthetic symbols, 4 sessions; best and a top-2 ensemble)."""
    import finpod
    from finpod.data.store import write_dataset
    from finpod.data.synth import synth_market
    from tests.app.tiny import tiny_spec

    root = tmp_path_factory.mktemp("paper_minute_run")
    bars = synth_market(n_symbols=3, n_days=4, freq="1min", seed=4, start="2019-11-25")
    dataset = root / "data"
    write_dataset(bars, dataset, source="test", frequency="1min", adjustment="none", repairs={}, notes=[])
    spec = tiny_spec(dataset).with_(
        name="tiny-minute", frequency="1min", benchmark_symbol="SYN002", segments=MINUTE_SEGMENTS
    )
    return Path(finpod.run(spec, out=root / "reports", quiet=True).run_dir)
