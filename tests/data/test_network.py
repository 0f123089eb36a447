"""Network hygiene of ``finpod data fetch``: a silent server times out on time, secrets never leak."""

from __future__ import annotations

import logging
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from werkzeug.wrappers import Request, Response

from clirun import run_cli
from fakes.alpaca_server import FakeAlpacaServer
from finpod.net import REDACTED, Timeouts, redact, register_secret

KEY_ID, SECRET = "net-test-key-id-42", "net-test-SECRET/+=value-9"
TIMEOUT_S = 0.5
SLACK_S = 3.0
"""Interpreter and thread scheduling on a loaded CI box, on top of the documented worst case."""


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and never answers (a hung API)."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(16)
        self._socket.settimeout(0.1)
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self.connections = 0

    @property
    def url(self) -> str:
        host, port = self._socket.getsockname()
        return f"http://{host}:{port}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._socket.accept()
            except TimeoutError:
                continue
            self.connections += 1
            self._held.append(conn)

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        for conn in self._held:
            conn.close()
        self._socket.close()


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APCA_API_KEY_ID", KEY_ID)
    monkeypatch.setenv("APCA_API_SECRET_KEY", SECRET)


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    with SilentServer() as server:
        yield server


def _fetch(tmp_path: Path, url: str, *extra: str) -> list[str]:
    return [
        "data", "fetch", "--symbols", "AAPL", "--start", "2021-02-01", "--end", "2021-02-02",
        "--freq", "1min", "--out", str(tmp_path / "ds"), "--data-url", url, *extra,
    ]  # fmt: skip


def test_a_server_that_never_answers_times_out_within_the_documented_time(
    keys: None, silent: SilentServer, tmp_path: Path
) -> None:
    documented = Timeouts(read_s=TIMEOUT_S).worst_case_s()
    started = time.monotonic()
    result = run_cli(*_fetch(tmp_path, silent.url, "--timeout", str(TIMEOUT_S)))
    elapsed = time.monotonic() - started
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "did not answer in time" in line
    assert "--timeout" in line
    assert elapsed < documented + SLACK_S
    assert silent.connections == Timeouts().retries + 1  # bounded: the first try and the retries
    assert not (tmp_path / "ds").exists()


def test_a_secret_echoed_by_the_server_never_appears_in_any_output(
    keys: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The server answers 403 with the request headers (the keys) in its body, plain and encoded."""

    def echo(request: Request) -> Response:
        secret = request.headers["APCA-API-SECRET-KEY"]
        quoted = urllib.parse.quote(secret, safe="")
        message = f"secret {secret} ({quoted}) of key {request.headers['APCA-API-KEY-ID']} denied"
        body = f'{{"code": 40310000, "message": "{message}; headers {dict(request.headers)}"}}'
        return Response(body, status=403, mimetype="application/json")

    caplog.set_level(logging.DEBUG)
    with FakeAlpacaServer(key_id=KEY_ID, secret_key=SECRET) as fake:
        fake.route("GET", "/v2/stocks/bars", echo)
        result = run_cli(*_fetch(tmp_path, fake.url))
        verbose = run_cli("-v", *_fetch(tmp_path, fake.url))
    assert result.exit_code == 2
    assert verbose.exit_code == 2
    assert REDACTED in result.stderr
    outputs = [result.stdout, result.stderr, verbose.stdout, verbose.stderr, caplog.text]
    outputs += [p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()]
    for text in outputs:
        assert SECRET not in text
        assert KEY_ID not in text


def test_redaction_covers_encoded_forms() -> None:
    register_secret("s3cr3t/value+x")
    text = redact("a s3cr3t/value+x b s3cr3t%2Fvalue%2Bx c czNjcjN0L3ZhbHVlK3g")
    assert "s3cr3t" not in text
    assert "czNjcjN0" not in text
    assert text.count(REDACTED) == 3
