"""``finpod paper`` mistakes are one line naming the fix; a manual trade stops the trader before any order."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import finpod.paper
from finpod.cli import app
from finpod.paper.journal import Journal
from finpod.paper.loop import journal_path
from tests.fakes.alpaca_stream import FakeStreamServer
from tests.fakes.alpaca_trading import FakeTradingServer
from tests.paper.live_kit import KEY_ID, REPO, SECRET, SimMarket


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["paper", *args], env=env)
    return result.exit_code, f"{result.output} {result.exception or ''}"


@pytest.mark.parametrize(
    ("args", "fix"),
    [
        (("status",), "RUN_DIR missing"),
        (("replay", "RUN"), "--start and --end are required"),
        (("RUN", "extra"), "unexpected argument"),
        (("RUN", "--clock", "sundial"), "sundial"),
    ],
)
def test_usage_mistakes(args: tuple[str, ...], fix: str) -> None:
    code, text = _run(*args)
    assert code != 0
    assert fix in text


def test_run_mistakes(tiny_run: Path) -> None:
    code, text = _run(
        str(tiny_run), "--trader", "best", env={"APCA_API_KEY_ID": "", "APCA_API_SECRET_KEY": ""}
    )
    assert code != 0
    assert "set both APCA_API_KEY_ID and APCA_API_SECRET_KEY" in text
    code, text = _run("status", str(tiny_run), "--trader", "worst")
    assert code != 0
    flat = " ".join(text.replace("│", " ").split())
    assert "'worst' is not one of 'best', 'ensemble', 'trajectory', 'pick'" in flat
    code, text = _run("status", str(tiny_run), "--trader", "ensemble")
    assert code != 0
    assert "no paper journal for trader ensemble" in text
    code, text = _run("status", str(tiny_run), "--trader", "trajectory")
    assert code != 0
    assert "no paper journal for trader trajectory" in text


def test_a_manual_trade_stops_the_trader_before_any_order(tiny_run: Path, tmp_path: Path) -> None:
    run = tmp_path / tiny_run.name
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("paper"))
    with (
        FakeTradingServer(key_id=KEY_ID, secret_key=SECRET) as trading,
        FakeStreamServer(key_id=KEY_ID, secret_key=SECRET, kind="d") as stream,
    ):
        market = SimMarket(run, trading, stream)
        with Journal.open(journal_path(run / "paper", "best")) as journal:
            journal.set_baseline({})  # the trader ran before and held nothing
        trading.positions["AAA"] = 7.0  # someone bought by hand
        with pytest.raises(
            finpod.paper.TradingHalted, match="AAA: the broker holds 7 shares, the journal expects 0"
        ):
            finpod.paper.run_paper(run, "best", dry_run=False, env=market.env(), clock="feed")
        assert trading.client_order_ids() == []
        assert stream.connections == 0


def test_wrong_keys_are_one_redacted_line_with_the_fix(tiny_run: Path, tmp_path: Path) -> None:
    run = tmp_path / tiny_run.name
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("paper"))
    wrong_id, wrong_secret = "PKWRONGKEY000", "wrong-secret-000"
    with (
        FakeTradingServer(key_id=KEY_ID, secret_key=SECRET) as trading,
        FakeStreamServer(key_id=KEY_ID, secret_key=SECRET, kind="d") as stream,
    ):
        trading.echo_keys_in_errors = True  # the server repeats the keys it was sent
        env = {
            **SimMarket(run, trading, stream).env(),
            "APCA_API_KEY_ID": wrong_id,
            "APCA_API_SECRET_KEY": wrong_secret,
        }
        result = subprocess.run(
            [sys.executable, "-m", "finpod", "paper", str(run), "--clock", "feed"],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert trading.client_order_ids() == []
    text = result.stdout + result.stderr
    assert result.returncode == 2, text
    assert text.count("error:") == 1
    assert "HTTP 401: request is not authorized (keys presented: [redacted] [redacted])" in text
    assert "fix: set APCA_API_KEY_ID and APCA_API_SECRET_KEY" in text
    assert wrong_id not in text
    assert wrong_secret not in text


def test_a_data_api_that_cannot_be_reached_stops_before_any_order(tiny_run: Path, tmp_path: Path) -> None:
    run = tmp_path / tiny_run.name
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("paper"))
    with (
        FakeTradingServer(key_id=KEY_ID, secret_key=SECRET) as trading,
        FakeStreamServer(key_id=KEY_ID, secret_key=SECRET, kind="d") as stream,
    ):
        env = {**SimMarket(run, trading, stream).env(), "APCA_API_DATA_URL": "http://127.0.0.1:9"}
        result = subprocess.run(
            [sys.executable, "-m", "finpod", "paper", str(run), "--clock", "feed"],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert trading.client_order_ids() == []
        assert stream.connections == 0
    text = result.stdout + result.stderr
    assert result.returncode == 2, text
    assert "warm-up: the data API failed (ConnectionError" in text
    assert "nothing was traded; fix: check APCA_API_DATA_URL" in text
