"""``finpod data synth|import|fetch|info`` through the real entry point: output, JSON, exit 2 on errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clirun import CliResult, run_cli
from fakes.alpaca_server import FakeAlpacaServer, bars_to_alpaca_json
from finpod.data.synth import synth_market

KEY_ID = "cli-key-id-789"
SECRET = "cli-secret-000"


def _one_line_error(result: CliResult, *fragments: str) -> None:
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0]


def test_synth_with_a_planted_signal(tmp_path: Path) -> None:
    made = run_cli(
        "data", "synth", "--out", str(tmp_path / "syn"), "--symbols", "4", "--days", "30", "--freq", "1d",
        "--seed", "1", "--signal", "reversal", "--signal-strength", "0.2", "--alpha-annual", "0",
    )  # fmt: skip
    assert made.exit_code == 0, made.stderr
    assert "planted signal: reversal, rho = -0.2" in made.stdout
    assert "drift alpha: SYN000 +0%" in made.stdout


def test_synth_then_info_json(tmp_path: Path) -> None:
    out = tmp_path / "syn"
    made = run_cli(
        "data", "synth", "--out", str(out), "--symbols", "3", "--days", "2", "--freq", "1min", "--seed", "5"
    )
    assert made.exit_code == 0, made.stderr
    assert "wrote" in made.stdout
    assert "drift alpha: SYN000 +10%" in made.stdout
    assert "planted signal: none" in made.stdout
    info = json.loads(run_cli("data", "info", str(out), "--json").stdout)
    assert info["symbols"] == ["SYN000", "SYN001", "SYN002"]
    assert info["frequency"] == "1min"
    assert info["bars"] == 3 * 2 * 390
    assert info["calendar_bars"] == 2 * 390
    assert info["filled_bars"] == 0
    assert info["tradable_share"] == 1.0
    assert info["adjustment"] == "synthetic"
    assert info["first_bar"] == "2016-01-04T14:30:00+00:00"


def test_synth_positional_out_still_works_with_a_note_and_not_twice(tmp_path: Path) -> None:
    out = tmp_path / "syn"
    made = run_cli("data", "synth", str(out), "--symbols", "2", "--days", "3", "--freq", "1d")
    assert made.exit_code == 0, made.stderr
    assert (out / "manifest.json").is_file()
    assert f"deprecated; use `finpod data synth --out {out}`" in made.stderr
    assert "deprecated" not in made.stdout
    twice = run_cli("data", "synth", str(tmp_path / "a"), "--out", str(tmp_path / "b"), "--symbols", "2")
    _one_line_error(twice, "given twice", "pass --out only")


def test_info_table_shows_every_field(tmp_path: Path) -> None:
    out = tmp_path / "syn"
    run_cli(
        "data", "synth", "--out", str(out), "--symbols", "2", "--days", "3", "--freq", "1d", "--seed", "1"
    )
    shown = run_cli("data", "info", str(out))
    assert shown.exit_code == 0, shown.stderr
    for label in ("symbols", "frequency", "first bar", "last bar", "bars", "filled bars", "tradable share"):
        assert label in shown.stdout
    assert "adjustment" in shown.stdout
    assert "repairs" in shown.stdout


def test_info_counts_filled_bars(tmp_path: Path) -> None:
    bars = synth_market(2, 2, "1min", seed=0)
    holes = bars.drop(index=[5, 6, 7]).reset_index(drop=True)
    holes.to_parquet(tmp_path / "bars.parquet")
    assert (
        run_cli("data", "import", str(tmp_path / "bars.parquet"), "--out", str(tmp_path / "ds")).exit_code
        == 0
    )
    info = json.loads(run_cli("data", "info", str(tmp_path / "ds"), "--json").stdout)
    assert info["filled_bars"] == 3
    assert info["tradable_share"] == pytest.approx((2 * 780 - 3) / (2 * 780))


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("--freq", "5min"), ("--freq", "'5min' is not one of '1min', '1d'")),
        (("--symbols", "0"), ("--symbols 0",)),
        (("--start", "2016-13-01"), ("--start '2016-13-01' is not a date",)),
        (("--signal", "wave"), ("--signal", "'wave' is not one of 'none', 'reversal', 'momentum'")),
        (("--signal", "reversal", "--signal-strength", "1.5"), ("--signal-strength 1.5", "[0, 0.9]")),
    ],
)
def test_synth_bad_flags(tmp_path: Path, args: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    flags = {"--symbols": "2", "--days": "2", "--freq": "1d", "--seed": "0", "--start": "2016-01-04"}
    flags.update(dict(zip(args[::2], args[1::2], strict=True)))
    argv = [item for pair in flags.items() for item in pair]
    _one_line_error(run_cli("data", "synth", "--out", str(tmp_path / "out"), *argv), *fragments)


def test_import_user_errors(tmp_path: Path) -> None:
    _one_line_error(
        run_cli("data", "import", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "ds")),
        "missing.csv: no such file or folder",
    )
    bars = tmp_path / "b.csv"
    bars.write_text("Date,Open,High,Low,Close,Volume\n2021-01-04,1,1,1,1,1\n2021-01-05,1,1,1,1,1\n")
    _one_line_error(
        run_cli("data", "import", str(bars), "--out", str(tmp_path / "ds"), "--column-map", "Date"),
        "--column-map 'Date': write old=new pairs",
    )
    _one_line_error(
        run_cli("data", "import", str(bars), "--out", str(tmp_path / "ds"), "--column-map", "Day=timestamp"),
        "--column-map names column(s) Day",
    )
    _one_line_error(
        run_cli("data", "import", str(bars), str(bars), "--out", str(tmp_path / "ds"), "--symbol", "X"),
        "--symbol X applies to one input file",
    )
    assert run_cli("data", "import", str(bars), "--out", str(tmp_path / "ds")).exit_code == 0
    _one_line_error(run_cli("data", "import", str(bars), "--out", str(tmp_path / "ds")), "already exists")
    _one_line_error(run_cli("data", "info", str(tmp_path)), "not a complete dataset")


def test_fetch_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APCA_API_KEY_ID", KEY_ID)
    monkeypatch.setenv("APCA_API_SECRET_KEY", SECRET)
    bars = synth_market(2, 2, "1min", seed=2, start="2021-03-01")
    with FakeAlpacaServer(key_id=KEY_ID, secret_key=SECRET) as server:
        for symbol, rows in bars_to_alpaca_json(bars).items():
            server.add_bars("1Min", symbol, rows)
        argv = [
            "--symbols",
            "SYN000,SYN001",
            "--start",
            "2021-03-01",
            "--end",
            "2021-03-02",
            "--freq",
            "1min",
        ]
        result = run_cli("data", "fetch", *argv, "--out", str(tmp_path / "ds"), "--data-url", server.url)
        cache = ["--cache", str(tmp_path / "ds.cache")]
        again = run_cli(
            "data", "fetch", *argv, "--out", str(tmp_path / "ds2"), *cache, "--data-url", server.url
        )
    assert result.exit_code == 0, result.stderr
    assert "chunks: 2 fetched, 0 from cache" in result.stdout
    assert "chunks: 0 fetched, 2 from cache" in again.stdout
    assert (tmp_path / "ds.cache" / "SYN000").is_dir()
    for text in (result.stdout, result.stderr, again.stdout, again.stderr):
        assert KEY_ID not in text
        assert SECRET not in text
    info = json.loads(run_cli("data", "info", str(tmp_path / "ds"), "--json").stdout)
    assert info["bars"] == 2 * 2 * 390
    assert info["source"] == "alpaca"


def test_fetch_without_keys_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("APCA_API_KEY_ID", raising=False)
    monkeypatch.setenv("APCA_API_SECRET_KEY", SECRET)
    argv = ["--symbols", "AAPL", "--start", "2021-03-01", "--end", "2021-03-02", "--freq", "1d"]
    result = run_cli(
        "data", "fetch", *argv, "--out", str(tmp_path / "ds"), "--data-url", "http://127.0.0.1:9"
    )
    _one_line_error(result, "APCA_API_KEY_ID", "APCA_API_SECRET_KEY")
    assert SECRET not in result.stderr


def test_fetch_bad_dates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APCA_API_KEY_ID", KEY_ID)
    monkeypatch.setenv("APCA_API_SECRET_KEY", SECRET)
    argv = ["--symbols", "AAPL", "--start", "2021-03-05", "--end", "2021-03-01", "--freq", "1d"]
    result = run_cli(
        "data", "fetch", *argv, "--out", str(tmp_path / "ds"), "--data-url", "http://127.0.0.1:9"
    )
    _one_line_error(result, "--end 2021-03-01 is before --start 2021-03-05")
