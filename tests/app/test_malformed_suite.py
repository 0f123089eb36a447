"""The malformed-input suite: every input a user can get wrong, through the real CLI entry point.

Each case sets up a bad input (a data file, a spec, a flag, a damaged run folder, a broker reply, a
disk or permission fault), runs ``finpod ...`` in-process, and asserts what a user must see: exit
code 2, ONE line on stderr naming the problem, no traceback, and nothing half-written (the output
folder does not exist, no temporary file is left behind).
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from tiny import tiny_bars, tiny_spec, write_tiny_dataset

from clirun import CliResult, run_cli
from fakes.alpaca_server import FakeAlpacaServer, bars_to_alpaca_json
from finpod.data.alpaca_source import RetryPolicy
from finpod.data.synth import synth_market

Setup = Callable[[Path, "Fixtures"], list[str]]
"""``(tmp folder, fixtures) -> CLI arguments``; outputs go to ``tmp/out`` (must stay absent)."""

KEY_ID, SECRET = "suite-key-id", "suite-secret-789"
NO_WAIT = RetryPolicy(attempts=2, wait_seconds=0, status_codes=(429, 500, 502, 503, 504))


@dataclass(frozen=True)
class Fixtures:
    """What cases build on: a tiny daily dataset, its spec text, and a finished run folder."""

    dataset: Path
    spec_text: str
    finished_run: Path


@dataclass(frozen=True)
class Bad:
    """One malformed input: how to make it, and the fragments the one-line error must contain."""

    name: str
    setup: Setup
    expected: tuple[str, ...]
    broker_status: int | None = None
    fault: tuple[str, int] | None = None
    serve: Callable[[FakeAlpacaServer], None] | None = None


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> Fixtures:
    root = tmp_path_factory.mktemp("suite")
    dataset = write_tiny_dataset(root / "data", tiny_bars(seed=5))
    spec_text = tiny_spec(dataset, budget_env_steps=256).to_toml()
    spec_file = root / "tiny.toml"
    spec_file.write_text(spec_text, encoding="utf-8")
    result = run_cli("run", str(spec_file), "--out", str(root / "reports"))
    assert result.exit_code == 0, result.stderr
    assert "not adjusted for splits" in result.stdout  # the tiny dataset is labelled adjustment none
    (run_dir,) = (root / "reports").iterdir()
    assert "not adjusted for splits" in (run_dir / "metrics.json").read_text()
    return Fixtures(dataset, spec_text, run_dir)


# ---------------------------------------------------------------- helpers that build bad inputs


def _spec(edit: Callable[[str], str]) -> Setup:
    def setup(tmp: Path, fx: Fixtures) -> list[str]:
        spec_file = tmp / "bad.toml"
        spec_file.write_text(edit(fx.spec_text), encoding="utf-8")
        return ["run", str(spec_file), "--out", str(tmp / "out")]

    return setup


def _spec_bytes(data: bytes) -> Setup:
    def setup(tmp: Path, fx: Fixtures) -> list[str]:
        spec_file = tmp / "bad.toml"
        spec_file.write_bytes(data)
        return ["run", str(spec_file), "--out", str(tmp / "out")]

    return setup


def _replace(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)

    return edit


def _add_line(section: str, line: str) -> Callable[[str], str]:
    return _replace(f"[{section}]\n", f"[{section}]\n{line}\n")


def _args(*args: str) -> Setup:
    def setup(tmp: Path, fx: Fixtures) -> list[str]:
        return [arg.replace("{tmp}", str(tmp)).replace("{data}", str(fx.dataset)) for arg in args]

    return setup


def _data_file(name: str, content: bytes, *extra: str) -> Setup:
    def setup(tmp: Path, fx: Fixtures) -> list[str]:
        (tmp / name).write_bytes(content)
        return ["data", "import", str(tmp / name), "--out", str(tmp / "out"), *extra]

    return setup


def _split_file(*extra: str, table: str | None = None) -> Setup:
    """Minute bars of SYN000 with an unadjusted 4:1 split on 2021-02-04, imported with ``extra``."""

    def setup(tmp: Path, fx: Fixtures) -> list[str]:
        bars = synth_market(1, 6, "1min", seed=2, start="2021-02-01")
        earlier = bars["timestamp"] < pd.Timestamp("2021-02-04", tz="UTC")
        bars.loc[earlier, ["open", "high", "low", "close"]] *= 4.0
        bars.loc[earlier, "volume"] /= 4.0
        bars.to_parquet(tmp / "raw.parquet")
        if table is not None:
            (tmp / "t.csv").write_text(table)
        args = [arg.replace("{tmp}", str(tmp)) for arg in extra]
        return ["data", "import", str(tmp / "raw.parquet"), "--out", str(tmp / "out"), *args]

    return setup


def _broken_link(tmp: Path, fx: Fixtures) -> list[str]:
    folder = tmp / "in"
    folder.mkdir()
    (folder / "a.csv").write_bytes(BARS + ROW0 + ROW1)
    (folder / "b.csv").symlink_to(tmp / "gone.csv")
    return ["data", "import", str(folder), "--out", str(tmp / "out")]


def _fifo(in_folder: bool) -> Setup:
    """A named pipe called ``b.csv``, given directly or inside a folder: never read (it would block)."""

    def setup(tmp: Path, fx: Fixtures) -> list[str]:
        folder = tmp / "in"
        folder.mkdir()
        (folder / "a.csv").write_bytes(BARS + ROW0 + ROW1)
        os.mkfifo(folder / "b.csv")
        return ["data", "import", str(folder if in_folder else folder / "b.csv"), "--out", str(tmp / "out")]

    return setup


def _mkfifo(path: Path) -> list[str]:
    """Make ``path`` a named pipe; no extra arguments."""
    os.mkfifo(path)
    return []


def _socket_file(tmp: Path, fx: Fixtures) -> list[str]:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp / "b.csv"))
    return ["data", "import", str(tmp / "b.csv"), "--out", str(tmp / "out")]


def _link_loop(tmp: Path, fx: Fixtures) -> list[str]:
    (tmp / "a.csv").symlink_to(tmp / "b.csv")
    (tmp / "b.csv").symlink_to(tmp / "a.csv")
    return ["data", "import", str(tmp / "a.csv"), "--out", str(tmp / "out")]


def _under_a_file(tmp: Path, fx: Fixtures) -> list[str]:
    (tmp / "a.csv").write_bytes(BARS + ROW0 + ROW1)
    return ["data", "import", str(tmp / "a.csv" / "b.csv"), "--out", str(tmp / "out")]


def _bad_files(count: int) -> Setup:
    """``count`` files with a missing close and one good file, imported as a folder."""

    def setup(tmp: Path, fx: Fixtures) -> list[str]:
        folder = tmp / "in"
        folder.mkdir()
        for index in range(count):
            (folder / f"f{index}.csv").write_bytes(BARS + ROW0 + ROW1.replace(b",10,100", b",,100"))
        (folder / "good.csv").write_bytes((BARS + ROW0 + ROW1).replace(b"AAPL", b"MSFT"))
        return ["data", "import", str(folder), "--out", str(tmp / "out")]

    return setup


def _run_folder(damage: Callable[[Path], None], command: str = "backtest") -> Setup:
    def setup(tmp: Path, fx: Fixtures) -> list[str]:
        run = tmp / "run"
        shutil.copytree(fx.finished_run, run)
        damage(run)
        return [command, str(run)]

    return setup


def _run_folder_args(damage: Callable[[Path], None], *args: str) -> Setup:
    """A damaged copy of the finished run at ``tmp/run``, then ``args`` ({run}, {finished}, {tmp})."""

    def setup(tmp: Path, fx: Fixtures) -> list[str]:
        run = tmp / "run"
        shutil.copytree(fx.finished_run, run)
        damage(run)
        places = {"{run}": str(run), "{finished}": str(fx.finished_run), "{tmp}": str(tmp)}
        return [places.get(arg, arg) for arg in args]

    return setup


def _replace_in(relative: str, old: str, new: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        text = (run / relative).read_text()
        assert old in text, old
        (run / relative).write_text(text.replace(old, new, 1))

    return damage


def _write(relative: str, data: bytes) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        (run / relative).write_bytes(data)

    return damage


def _remove(relative: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        target = run / relative
        shutil.rmtree(target) if target.is_dir() else target.unlink()

    return damage


def _set_info(**changes: object) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        info = json.loads((run / "run.json").read_text())
        info.update(changes)
        (run / "run.json").write_text(json.dumps(info))

    return damage


def _truncate(relative: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        data = (run / relative).read_bytes()
        (run / relative).write_bytes(data[: len(data) * 2 // 3])

    return damage


def _edit_json(relative: str) -> Callable[[Path], None]:
    """Re-save a JSON part with one score changed: valid, but not what the run wrote."""

    def damage(run: Path) -> None:
        record = json.loads((run / relative).read_text())
        record["entries"][0]["score"] = record["entries"][0]["score"] + 1.0
        (run / relative).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")

    return damage


def _foreign_leaderboard(tmp: Path, fx: Fixtures) -> list[str]:
    """The leaderboard of another run of the same spec copied over this run's."""
    run = tmp / "run"
    shutil.copytree(fx.finished_run, run)
    other = tmp / "other"
    result = run_cli("-q", "run", str(fx.finished_run / "spec.toml"), "--out", str(other))
    assert result.exit_code == 0, result.stderr
    (other_run,) = other.iterdir()
    board = run / "tournament" / "leaderboard"
    shutil.rmtree(board)
    shutil.copytree(other_run / "tournament" / "leaderboard", board)
    shutil.rmtree(other)
    return ["backtest", str(run)]


def _truncate_snapshot(run: Path) -> None:
    snapshot = next((run / "tournament" / "leaderboard").glob("*.pt"))
    data = snapshot.read_bytes()
    snapshot.write_bytes(data[: len(data) // 2])


BARS = b"timestamp,symbol,open,high,low,close,volume\n"
ROW0 = b"2019-02-11T14:30:00+00:00,AAPL,10,11,9,10,100\n"
ROW1 = b"2019-02-11T14:31:00+00:00,AAPL,10,11,9,10,100\n"
OPEN_INPUT = "finpod.data.input_paths.open_for_reading"


# ---------------------------------------------------------------- the cases, class by class

SPEC_CASES = [
    Bad("spec_not_utf8", _spec_bytes(b'name = "caf\xe9"\n'), ("not UTF-8", "save the spec as UTF-8")),
    Bad("spec_utf16", _spec_bytes('name = "x"\n'.encode("utf-16")), ("not UTF-8",)),
    Bad("spec_bad_toml", _spec(_replace('name = "tiny"', "name = ")), ("not valid TOML",)),
    Bad("spec_seed_true", _spec(_replace("seed = 3", "seed = true")), ("seed: must be an integer",)),
    Bad("spec_seed_negative", _spec(_replace("seed = 3", "seed = -1")), ("seed", "greater than or equal")),
    Bad("spec_seed_text", _spec(_replace("seed = 3", 'seed = "3"')), ("seed",)),
    Bad(
        "spec_horizon_bool",
        _spec(_replace("horizon_bars = 20", "horizon_bars = true")),
        ("env.horizon_bars: must be an integer",),
    ),
    Bad(
        "spec_agent_float_for_int",
        _spec(_replace("rollout_steps = 32", "rollout_steps = 2.5")),
        ("agent.rollout_steps: must be an integer",),
    ),
    Bad(
        "spec_agent_bool_for_float",
        _spec(_replace("learning_rate = 0.0001", "learning_rate = true")),
        ("agent.learning_rate: must be a finite number",),
    ),
    Bad("spec_agent_unknown", _spec(_add_line("agent", "learnin_rate = 0.1")), ("unknown PPO setting",)),
    Bad(
        "spec_minibatches_cannot_fill",
        _spec(_replace("num_minibatches = 2", "num_minibatches = 1000")),
        ("agent.num_minibatches", "cannot fill 1000 minibatches", "lower agent.num_minibatches"),
    ),
    Bad(
        "spec_minibatches_one_transition",
        _spec(
            lambda t: t.replace("rollout_steps = 32", "rollout_steps = 1").replace(
                "num_envs = 4", "num_envs = 1"
            )
        ),
        ("= 1 transitions cannot fill 2 minibatches", "fix: raise agent.rollout_steps or env.num_envs"),
    ),
    Bad(
        "spec_agent_infinite",
        _spec(_replace("max_grad_norm = 0.5", "max_grad_norm = inf")),
        ("agent.max_grad_norm: must be a finite number, got inf",),
    ),
    Bad(
        "spec_env_infinite",
        _spec(_replace("risk_penalty = 0.0", "risk_penalty = inf")),
        ("env.risk_penalty: must be a finite number (got inf)", "fix:"),
    ),
    Bad(
        "spec_horizon_longer_than_train",
        _spec(_replace("horizon_bars = 20", "horizon_bars = 5000")),
        ("env.horizon_bars 5000 does not fit the train segment", "fix:"),
    ),
    Bad(
        "spec_minute_frequency_on_daily_data",
        _spec(_replace('frequency = "1d"', 'frequency = "1min"')),
        ("the bars are daily", 'set frequency = "1d"'),
    ),
    Bad(
        "spec_negative_fee",
        _spec(_replace("fee_rate = 0.001", "fee_rate = -0.1")),
        ("env.fee_rate", "greater than or equal to 0"),
    ),
    Bad("spec_unknown_field", _spec(_add_line("env", "fees = 1")), ("env.fees: unknown field",)),
    Bad(
        "spec_segments_overlap",
        _spec(_replace('    "2019-07-01",', '    "2019-06-01",')),
        ("segments.validation: must start after segments.train ends",),
    ),
    Bad(
        "spec_missing_dataset",
        _spec(lambda text: text.replace("path = ", 'path = "no_such_dataset"\n#', 1)),
        ("data.path: dataset folder not found",),
    ),
    Bad("spec_empty_universe", _spec(_replace('universe = "all"', "universe = []")), ("empty ticker list",)),
    Bad(
        "spec_ticker_not_in_dataset",
        _spec(_replace('universe = "all"', 'universe = ["AAA", "ZZZ"]')),
        ("universe: ZZZ not in the dataset",),
    ),
    Bad(
        "spec_ensemble_bigger_than_board",
        _spec(_replace("ensemble_k = 2", "ensemble_k = 9")),
        ("ensemble_k: 9 exceeds leaderboard_size",),
    ),
    Bad("spec_bad_name", _spec(_replace('name = "tiny"', 'name = "a b"')), ("name",)),
    Bad(
        "spec_is_a_folder",
        _args("run", "{tmp}", "--out", "{tmp}/out"),
        ("a folder, not a spec file", "fix: pass a .toml spec"),
    ),
    Bad("spec_missing_file", _args("run", "{tmp}/nope.toml", "--out", "{tmp}/out"), ("spec file not found",)),
]

FLAG_CASES = [
    Bad(
        "flag_seed_negative",
        _args(
            "data",
            "synth",
            "--out",
            "{tmp}/out",
            "--symbols",
            "2",
            "--days",
            "3",
            "--freq",
            "1d",
            "--seed",
            "-1",
        ),
        ("--seed", "greater than or equal to 0", "--help"),
    ),
    Bad(
        "flag_seed_text",
        _args(
            "data",
            "synth",
            "--out",
            "{tmp}/out",
            "--symbols",
            "2",
            "--days",
            "3",
            "--freq",
            "1d",
            "--seed",
            "x",
        ),
        ("--seed", "valid integer"),
    ),
    Bad(
        "flag_symbols_zero",
        _args(
            "data",
            "synth",
            "--out",
            "{tmp}/out",
            "--symbols",
            "0",
            "--days",
            "3",
            "--freq",
            "1d",
            "--seed",
            "1",
        ),
        ("--symbols",),
    ),
    Bad(
        "flag_freq_unknown",
        _args(
            "data",
            "synth",
            "--out",
            "{tmp}/out",
            "--symbols",
            "2",
            "--days",
            "3",
            "--freq",
            "5min",
            "--seed",
            "1",
        ),
        ("--freq", "'5min' is not one of '1min', '1d'"),
    ),
    Bad(
        "flag_start_not_a_date",
        _args(
            "data",
            "synth",
            "--out",
            "{tmp}/out",
            "--symbols",
            "2",
            "--days",
            "3",
            "--freq",
            "1d",
            "--seed",
            "1",
            "--start",
            "2020-13-01",
        ),
        ("--start '2020-13-01' is not a date",),
    ),
    Bad(
        "flag_unknown_option",
        _args("data", "synth", "--out", "{tmp}/out", "--bogus"),
        ("No such option: --bogus",),
    ),
    Bad("flag_missing_required", _args("data", "import", "{tmp}/x.csv"), ("--out",)),
    Bad(
        "flag_column_map_malformed",
        _data_file("b.csv", BARS + ROW0 + ROW1, "--column-map", "Date"),
        ("--column-map 'Date'", "old=new"),
    ),
    Bad(
        "flag_column_map_unknown_column",
        _data_file("b.csv", BARS + ROW0 + ROW1, "--column-map", "Date=timestamp"),
        ("--column-map names column(s) Date",),
    ),
    Bad(
        "flag_import_freq_unsupported",
        _data_file("b.csv", BARS + ROW0 + ROW1, "--freq", "1h"),
        ("--freq", "'1h' is not one of '1min', '1d'"),
    ),
    Bad("flag_segment_unknown", _args("backtest", "{tmp}", "--segment", "train"), ("--segment",)),
    Bad(
        "flag_fetch_bad_date",
        _args(
            "data",
            "fetch",
            "--symbols",
            "AAPL",
            "--start",
            "2021-02-30",
            "--end",
            "2021-03-01",
            "--freq",
            "1min",
            "--out",
            "{tmp}/out",
        ),
        ("--start '2021-02-30' is not a date",),
    ),
    Bad(
        "flag_resume_nothing_to_resume",
        lambda tmp, fx: ["run", *_spec(lambda t: t)(tmp, fx)[1:], "--resume"],
        ("no unfinished run of spec 'tiny'",),
    ),
]

DATA_CASES = [
    Bad("data_empty_file", _data_file("b.csv", b""), ("empty file",)),
    Bad("data_header_only", _data_file("b.csv", BARS), ("empty file",)),
    Bad("data_unknown_format", _data_file("b.csv", b"foo,bar\n1,2\n"), ("unknown format", "--column-map")),
    Bad(
        "data_high_below_low",
        _data_file("b.csv", BARS + ROW0 + b"2019-02-11T14:31:00+00:00,AAPL,10.5,10.0,11.0,10.5,100\n"),
        ("AAPL", "high 10.0 < low 11.0"),
    ),
    Bad(
        "data_nan_price",
        _data_file("b.csv", BARS + ROW0 + b"2019-02-11T14:31:00+00:00,AAPL,10,11,9,,100\n"),
        ("AAPL", "close is nan"),
    ),
    Bad("data_duplicate_bar", _data_file("b.csv", BARS + ROW0 + ROW1 + ROW1), ("duplicate timestamp",)),
    Bad("data_unsorted", _data_file("b.csv", BARS + ROW1 + ROW0), ("unsorted",)),
    Bad(
        "data_unknown_time_zone",
        _data_file("b.csv", BARS + ROW0 + b"2019-02-11 14:31:00 XYZ,AAPL,10,11,9,10,100\n"),
        ("line 3", "known UTC offset"),
    ),
    Bad(
        "data_not_a_number",
        _data_file("b.csv", BARS + ROW0 + b"2019-02-11T14:31:00+00:00,AAPL,10,abc,9,10,100\n"),
        ("high 'abc' is not a number",),
    ),
    Bad(
        "data_missing_path",
        _args("data", "import", "{tmp}/missing.csv", "--out", "{tmp}/out"),
        ("no such file",),
    ),
    Bad("data_fifo", _fifo(in_folder=False), ("b.csv: a named pipe (FIFO), not a regular file", "save")),
    Bad(
        "data_fifo_in_folder", _fifo(in_folder=True), ("in/b.csv: a named pipe (FIFO)", "cat PIPE > bars.csv")
    ),
    Bad("data_socket", _socket_file, ("b.csv: a socket, not a regular file",)),
    Bad("data_symlink_loop", _link_loop, ("a.csv: a loop of symbolic links",)),
    Bad("data_path_under_a_file", _under_a_file, ("a.csv is a file, not a folder",)),
    Bad(
        "data_file_not_readable",
        _data_file("b.csv", BARS + ROW0 + ROW1),
        ("b.csv: not readable (permission denied)", "chmod u+r"),
        fault=(OPEN_INPUT, errno.EACCES),
    ),
    Bad(
        "data_fat_finger_price",
        _data_file(
            "b.csv",
            BARS
            + ROW0
            + ROW1
            + ROW1.replace(b"14:31", b"14:32")
            .replace(b",10,100", b",1e300,100")
            .replace(b",11,", b",1e300,"),
        ),
        ("AAPL 2019-02-11 14:32:00+00:00: close 1e+300 is", "--on-outlier drop"),
    ),
    Bad(
        "data_naive_intraday_times",
        _data_file(
            "aapl.csv",
            b"Datetime,Open,High,Low,Close,Volume\n"
            b"2019-02-11 09:30:00,10,11,9,10,100\n2019-02-11 09:31:00,10,11,9,10,100\n",
        ),
        ("bar START or a bar END", "--timestamps start|end and --tz ZONE"),
    ),
    Bad(
        "flag_tz_unknown",
        _data_file("aapl.csv", BARS + ROW0 + ROW1, "--timestamps", "start", "--tz", "Mars/Olympus"),
        ("--tz 'Mars/Olympus' is not a known time zone",),
    ),
    Bad(
        "data_folder_without_files",
        lambda tmp, fx: ["data", "import", str(tmp), "--out", str(tmp / "out")],
        ("folder holds no .csv or .parquet file",),
    ),
    Bad(
        "data_output_exists",
        lambda tmp, fx: [*_data_file("b.csv", BARS + ROW0 + ROW1)(tmp, fx)[:3], "--out", str(fx.dataset)],
        ("already exists",),
    ),
    Bad("data_info_not_a_dataset", _args("data", "info", "{tmp}"), ("manifest",)),
    Bad(
        "data_latin1_encoding",
        _data_file("b.csv", (BARS + ROW0 + ROW1).replace(b"AAPL", "CAF\xc9".encode("latin-1"))),
        ("not UTF-8 or UTF-16 text",),
    ),
    Bad("data_broken_symlink_in_folder", _broken_link, ("a broken symbolic link", "point it at the file")),
    Bad(
        "data_daily_bad_date",
        _data_file(
            "AAPL.csv", b"Date,Open,High,Low,Close,Volume\n2019-02-11,10,11,9,10,100\nxx,10,11,9,10,100\n"
        ),
        ("line 3", "'xx' is not an ISO 8601 date", "2019-02-11 (a date"),
    ),
    Bad("data_many_bad_files", _bad_files(4), ("4 of 5 input files have problems", "and 1 more")),
    Bad(
        "data_truncated_gzip",
        _data_file("b.csv.gz", gzip.compress(BARS + ROW0 + ROW1)[:40]),
        ("b.csv.gz: cannot be read as CSV/parquet (Compressed file ended before",),
    ),
    Bad(
        "data_junk_above_header",
        _data_file("b.csv", b"Exported by Vendor X\n\n" + BARS + ROW0 + ROW1),
        ("header (timestamp,symbol,open,high,low,close,volume) is on line 3", "delete lines 1-2"),
    ),
    Bad(
        "data_bad_time_after_blank_lines",
        _data_file("b.csv", b"\n" + BARS + ROW0 + b"\n\n" + b"yesterday,AAPL,10,11,9,10,100\n"),
        ("AAPL line 6: timestamp 'yesterday'",),
    ),
    Bad(
        "flag_on_duplicate_unknown",
        _data_file("b.csv", BARS + ROW0 + ROW1, "--on-duplicate", "middle"),
        ("--on-duplicate", "middle"),
    ),
    Bad("data_unadjusted_split", _split_file(), ("SYN000", "unadjusted 4:1 split", "--adjust splits=FILE")),
    Bad("data_split_table_missing", _split_file("--adjust", "splits={tmp}/none.csv"), ("table not found",)),
    Bad(
        "data_split_table_bad_ratio",
        _split_file("--adjust", "splits={tmp}/t.csv", table="symbol,date,ratio\nSYN000,2021-02-04,four\n"),
        ("line 2", "split ratio 'four' is not a ratio"),
    ),
    Bad(
        "data_split_table_no_header",
        _split_file("--adjust", "splits={tmp}/t.csv", table="SYN000,2021-02-04,4\n"),
        ("lacks column(s)",),
    ),
    Bad(
        "data_split_table_misses_it",
        _split_file("--adjust", "splits={tmp}/t.csv", table="symbol,date,ratio\nSYN001,2021-02-04,2:1\n"),
        ("SYN000", "4:1", "(not in"),
    ),
    Bad(
        "data_split_table_fifo",
        lambda tmp, fx: [*_split_file("--adjust", "splits={tmp}/t.csv")(tmp, fx), *_mkfifo(tmp / "t.csv")],
        ("t.csv: a named pipe (FIFO), not a regular file",),
    ),
    Bad("flag_adjust_malformed", _split_file("--adjust", "dividends=x.csv"), ("--adjust splits=FILE",)),
    Bad("flag_adjustment_unknown", _split_file("--adjustment", "raw"), ("the only setting is none",)),
    Bad(
        "flag_adjust_and_adjustment_none",
        _split_file("--adjust", "splits={tmp}/t.csv", "--adjustment", "none", table="symbol,date,ratio\n"),
        ("contradict",),
    ),
]

RUN_FOLDER_CASES = [
    Bad("rundir_no_run_json", _run_folder(_remove("run.json")), ("not a finpod run folder",)),
    Bad("rundir_run_json_not_json", _run_folder(_write("run.json", b"{ half")), ("not a valid run file",)),
    Bad(
        "rundir_run_json_not_utf8",
        _run_folder(_write("run.json", b"\xff\xfe\x00")),
        ("not a valid run file",),
    ),
    Bad("rundir_run_json_a_list", _run_folder(_write("run.json", b"[1, 2]")), ("not a finpod run file",)),
    Bad(
        "rundir_still_training",
        _run_folder(_set_info(status="training")),
        ("still training, so its backtest segment stays unread",),
    ),
    Bad("rundir_no_spec", _run_folder(_remove("spec.toml")), ("spec.toml: part of run", "is missing")),
    Bad(
        "rundir_spec_damaged", _run_folder(_write("spec.toml", b"name = ")), ("spec.toml: not the file run",)
    ),
    Bad(
        "rundir_no_leaderboard", _run_folder(_remove("tournament/leaderboard")), ("index.json", "is missing")
    ),
    Bad(
        "rundir_index_corrupted",
        _run_folder(_write("tournament/leaderboard/index.json", b"{ not json")),
        ("index.json",),
    ),
    Bad(
        "rundir_index_foreign",
        _run_folder(_write("tournament/leaderboard/index.json", b'{"format": "other", "version": 1}')),
        ("index.json",),
    ),
    Bad("rundir_snapshot_truncated", _run_folder(_truncate_snapshot), ("snapshot",)),
    Bad(
        "rundir_dataset_gone",
        _run_folder(_set_info(dataset="/no/such/dataset")),
        ("/no/such/dataset",),
    ),
    Bad(
        "rundir_report_no_run_json", _run_folder(_remove("run.json"), "report"), ("not a finpod run folder",)
    ),
    Bad(
        "rundir_returns_truncated",
        _run_folder(_truncate("returns.csv"), "report"),
        ("returns.csv: not the file run", "sha256 differs"),
    ),
    Bad(
        "rundir_positions_truncated",
        _run_folder(_truncate("validation/positions.csv"), "report"),
        ("positions.csv: not the file run",),
    ),
    Bad("rundir_returns_missing", _run_folder(_remove("returns.csv"), "report"), ("is missing",)),
    Bad(
        "rundir_leaderboard_edited",
        _run_folder(_edit_json("tournament/leaderboard/index.json")),
        ("index.json: not the file run",),
    ),
    Bad("rundir_leaderboard_from_another_run", _foreign_leaderboard, ("index.json: not the file run",)),
    Bad(
        "rundir_spec_edited",
        _run_folder(_replace_in("spec.toml", "fee_rate = 0.001", "fee_rate = 0.05")),
        ("spec.toml: not the file run", "sha256 differs"),
    ),
    Bad(
        "rundir_events_damaged",
        _run_folder(_write("tournament/events.jsonl", b"\xff\xfe garbage\n"), "report"),
        ("events.jsonl: not the file run",),
    ),
    Bad(
        "rundir_trader_inputs_truncated_replay",
        _run_folder_args(
            _truncate("trader_inputs.pt"),
            "paper",
            "replay",
            "{run}",
            "--start",
            "2019-10-01",
            "--end",
            "2019-10-15",
        ),
        ("trader_inputs.pt: not the file run",),
    ),
    Bad(
        "rundir_replay_without_dates",
        _run_folder_args(lambda run: None, "paper", "replay", "{run}"),
        ("--start and --end are required", "fix: --start 2019-10-01 --end 2019-12-31 (the run's backtest"),
    ),
    Bad(
        "rundir_spec_toml_damaged_compare",
        _run_folder_args(_write("spec.toml", b"{"), "runs", "compare", "{run}", "{finished}"),
        ("spec.toml",),
    ),
    Bad(
        "rundir_metrics_damaged_ls",
        _run_folder_args(_write("metrics.json", b"{"), "runs", "ls", "{tmp}"),
        ("metrics.json: not valid JSON",),
    ),
]


def _fetch_args(tmp: Path, url: str) -> list[str]:
    return [
        "data", "fetch", "--symbols", "AAPL", "--start", "2021-02-01", "--end", "2021-02-02",
        "--freq", "1min", "--out", str(tmp / "out"), "--data-url", url,
    ]  # fmt: skip


def _fetch(tmp: Path, fx: Fixtures) -> list[str]:
    return _fetch_args(tmp, "{broker}")


def _serve_raw_split(fake: FakeAlpacaServer) -> None:
    """Minute bars of SYN000 with a raw 4:1 split on 2021-02-04, and no corporate action listed."""
    bars = synth_market(1, 6, "1min", seed=2, start="2021-02-01")
    earlier = bars["timestamp"] < pd.Timestamp("2021-02-04", tz="UTC")
    bars.loc[earlier, ["open", "high", "low", "close"]] *= 4.0
    bars.loc[earlier, "volume"] /= 4.0
    for symbol, rows in bars_to_alpaca_json(bars).items():
        fake.add_bars("1Min", symbol, rows)


def _fetch_split(*extra: str) -> Setup:
    def setup(tmp: Path, fx: Fixtures) -> list[str]:
        args = _fetch_args(tmp, "{broker}")
        args[args.index("AAPL")] = "SYN000"
        args[args.index("2021-02-02")] = "2021-02-08"
        return [*args, *(arg.replace("{tmp}", str(tmp)) for arg in extra)]

    return setup


BROKER_CASES = [
    Bad("broker_rejects_keys", _fetch, ("APCA_API_KEY_ID",), broker_status=401),
    Bad("broker_forbidden", _fetch, ("403",), broker_status=403),
    Bad("broker_keeps_failing", _fetch, ("500",), broker_status=500),
    Bad("broker_unknown_symbol", _fetch, ("AAPL",), broker_status=200),
    Bad("broker_missing_keys", lambda tmp, fx: _fetch_args(tmp, "http://127.0.0.1:9"), ("APCA_API_KEY_ID",)),
    Bad(
        "broker_raw_split_nothing_explains",
        _fetch_split(),
        ("SYN000 2021-02-04 14:30:00+00:00", "unadjusted 4:1 split", "list no split there"),
        broker_status=200,
        serve=_serve_raw_split,
    ),
    Bad(
        "broker_split_table_missing",
        _fetch_split("--adjust", "splits={tmp}/none.csv"),
        ("corporate-actions table not found",),
        broker_status=200,
        serve=_serve_raw_split,
    ),
    Bad(
        "flag_fetch_adjust_malformed",
        _fetch_split("--adjust", "4:1"),
        ("--adjust splits=FILE",),
        broker_status=200,
    ),
]


def _touch(path: Path) -> Path:
    path.write_text("not a folder")
    return path


def _file_as_folder(tmp: Path, fx: Fixtures) -> list[str]:
    _touch(tmp / "a_file")
    return ["data", "synth", "--out", str(tmp / "a_file" / "out"), *SYNTH[4:]]


SYNTH = (
    "data",
    "synth",
    "--out",
    "{tmp}/out",
    "--symbols",
    "2",
    "--days",
    "5",
    "--freq",
    "1d",
    "--seed",
    "1",
)
PARQUET_WRITE = "finpod.data.store.pq.write_table"
FSYNC = "podracer.snapshot.os.fsync"
MKSTEMP = "podracer.snapshot.tempfile.mkstemp"
DISK_CASES = [
    Bad("disk_permission_denied_real", _args(*SYNTH[:3], "/sys/finpod_suite", *SYNTH[4:]), ("/sys",)),
    Bad("disk_file_where_folder_should_be", _file_as_folder, ("a file stands where a folder should be",)),
    Bad(
        "disk_run_out_is_a_file",
        lambda tmp, fx: [*_spec(lambda t: t)(tmp, fx)[:2], "--out", str(_touch(tmp / "out"))],
        ("out",),
    ),
    Bad(
        "disk_full_dataset",
        _args(*SYNTH),
        ("no space left", "free disk space"),
        fault=(PARQUET_WRITE, errno.ENOSPC),
    ),
    Bad(
        "disk_read_only_dataset",
        _args(*SYNTH),
        ("read-only file system",),
        fault=(PARQUET_WRITE, errno.EROFS),
    ),
    Bad(
        "disk_access_denied_dataset",
        _args(*SYNTH),
        ("permission denied",),
        fault=(PARQUET_WRITE, errno.EACCES),
    ),
    Bad("disk_full_run_folder", _spec(lambda text: text), ("no space left",), fault=(FSYNC, errno.ENOSPC)),
    Bad(
        "disk_read_only_run_folder",
        _spec(lambda text: text),
        ("read-only file system",),
        fault=(MKSTEMP, errno.EROFS),
    ),
    Bad("disk_quota_run_folder", _spec(lambda text: text), ("quota",), fault=(FSYNC, errno.EDQUOT)),
]


def _install_fault(monkeypatch: pytest.MonkeyPatch, target: str, code: int) -> None:
    """Make ``target`` raise ``OSError(code)`` naming its first argument: a full disk, a read-only folder."""

    def fail(*args: object, **kwargs: object) -> None:
        named = args[1] if target == PARQUET_WRITE else (args[0] if args else kwargs.get("dir"))
        raise OSError(code, os.strerror(code), None if isinstance(named, int) else str(named))

    monkeypatch.setattr(target, fail)


ALL_CASES = SPEC_CASES + FLAG_CASES + DATA_CASES + RUN_FOLDER_CASES + BROKER_CASES + DISK_CASES


def _assert_one_clean_line(result: CliResult, expected: tuple[str, ...]) -> None:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    assert "np.float64" not in lines[0]
    for fragment in expected:
        assert fragment in lines[0], (fragment, lines[0])


def _leftovers(tmp: Path) -> list[Path]:
    """Temporary files or folders a failed write left behind under ``tmp``."""
    return [p for p in tmp.rglob("*") if ".tmp" in p.name]


@pytest.mark.parametrize("case", ALL_CASES, ids=[case.name for case in ALL_CASES])
def test_malformed_input_is_one_line_exit_2_nothing_written(
    case: Bad, fixtures: Fixtures, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("APCA_API_KEY_ID", raising=False)
    monkeypatch.delenv("APCA_API_SECRET_KEY", raising=False)
    args = case.setup(tmp_path, fixtures)
    if case.fault is not None:
        _install_fault(monkeypatch, *case.fault)
    if case.broker_status is None:
        result = run_cli(*args)
    else:
        status = case.broker_status
        monkeypatch.setenv("APCA_API_KEY_ID", KEY_ID if status != 401 else "wrong-key")
        monkeypatch.setenv("APCA_API_SECRET_KEY", SECRET)
        monkeypatch.setattr("finpod.data.alpaca_source.DEFAULT_RETRY", NO_WAIT)  # read by `data fetch`
        with FakeAlpacaServer(key_id=KEY_ID, secret_key=SECRET) as fake:
            if status in (403, 500):
                fake.fail_next(status, times=100)
            if case.serve is not None:
                case.serve(fake)
            result = run_cli(*[arg.replace("{broker}", fake.url) for arg in args])
    _assert_one_clean_line(result, case.expected)
    out = tmp_path / "out"
    assert not out.is_dir() or not any(out.iterdir()), sorted(out.rglob("*"))
    assert _leftovers(tmp_path) == []


def test_suite_covers_every_class_with_at_least_60_cases() -> None:
    assert len(ALL_CASES) >= 60
    assert len({case.name for case in ALL_CASES}) == len(ALL_CASES)
    for group in (SPEC_CASES, FLAG_CASES, DATA_CASES, RUN_FOLDER_CASES, BROKER_CASES, DISK_CASES):
        assert len(group) >= 4


def test_a_bug_is_one_line_with_a_hint_and_verbose_shows_the_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The catch-all: an unexpected exception is a one-line internal error, exit 1; -v adds the trace."""

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr("finpod.data.dataset_info.dataset_info", broken)
    result = run_cli("data", "info", "somewhere")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: internal error (ZeroDivisionError: boom); rerun with -v for the traceback"
    )
    verbose = run_cli("-v", "data", "info", "somewhere")
    assert "Traceback" in verbose.stderr
    assert verbose.stderr.strip().splitlines()[-1].startswith("error: internal error")


def test_an_end_of_file_error_is_not_reported_as_an_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    """click turns every EOFError into Abort ("interrupted", exit 130): a truncated file is no Ctrl-C."""

    def truncated(*args: object, **kwargs: object) -> None:
        raise EOFError("Ran out of input")

    monkeypatch.setattr("finpod.data.dataset_info.dataset_info", truncated)
    result = run_cli("data", "info", "somewhere")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: internal error (EOFError: Ran out of input); rerun with -v for the traceback"
    )
