"""A fake Alpaca HTTP API on 127.0.0.1 for the real alpaca-py clients (``url_override``).

It serves the market-data endpoints ``GET /v2/stocks/bars`` (multi-symbol, ``next_page_token``
pagination, ordered by symbol then time like Alpaca) and ``GET /v1/corporate-actions`` (forward and
reverse splits added with :meth:`FakeAlpacaServer.add_split`), checks the key headers, records every request,
and can be told to answer an error status (429, 500...) a given number of times. Other routes can be
added with :meth:`FakeAlpacaServer.route` (e.g. trading endpoints for paper-trading tests)::

    with FakeAlpacaServer(key_id="k", secret_key="s") as server:
        bar = {"t": "2021-01-04T14:30:00Z", "o": 1.0, "h": 1.0, "l": 1.0, "c": 1.0, "v": 9.0}
        server.add_bars("1Min", "AAPL", [bar])
        client = StockHistoricalDataClient("k", "s", url_override=server.url)
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

Handler = Callable[[Request], Response]
TRADES_PER_BAR = 10
"""``n`` (trade count) of the bars made by :func:`bars_to_alpaca_json`; alpaca-py requires the field."""
AUTH_HEADERS = ("APCA-API-KEY-ID", "APCA-API-SECRET-KEY")
EXPECTED_HEADERS = frozenset(
    {"host", "user-agent", "accept-encoding", "accept", "connection", *(h.lower() for h in AUTH_HEADERS)}
)


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


def _encode_token(offset: int) -> str:
    return base64.urlsafe_b64encode(str(offset).encode()).decode()


def _decode_token(token: str) -> int:
    return int(base64.urlsafe_b64decode(token.encode()).decode())


class FakeAlpacaServer:
    """Threaded werkzeug server; use as a context manager, read :attr:`url` and :attr:`requests`."""

    def __init__(self, *, key_id: str, secret_key: str, page_size: int = 10_000) -> None:
        self.key_id = key_id
        self.secret_key = secret_key
        self.page_size = page_size
        self.requests: list[RecordedRequest] = []
        self._bars: dict[str, dict[str, list[dict[str, Any]]]] = {}
        self._failures: list[int] = []
        self._splits: list[dict[str, Any]] = []
        self._routes: dict[tuple[str, str], Handler] = {
            ("GET", "/v2/stocks/bars"): self._stock_bars,
            ("GET", "/v1/corporate-actions"): self._corporate_actions,
        }
        self._lock = threading.Lock()
        self._server = make_server("127.0.0.1", 0, self._app, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Base URL to pass as ``url_override``."""
        return f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> FakeAlpacaServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join()

    def route(self, method: str, path: str, handler: Handler) -> None:
        """Serve ``handler(request) -> Response`` at ``method path`` (after the auth check)."""
        self._routes[(method.upper(), path)] = handler

    def fail_next(self, status: int, times: int) -> None:
        """Answer the next ``times`` requests with HTTP ``status`` (and an Alpaca-style JSON body)."""
        with self._lock:
            self._failures.extend([status] * times)

    def add_bars(self, timeframe: str, symbol: str, bars: list[dict[str, Any]]) -> None:
        """Serve ``bars`` (Alpaca JSON bars: ``t`` ISO UTC, ``o h l c v``) for ``symbol`` at ``timeframe``."""
        self._bars.setdefault(timeframe, {}).setdefault(symbol, []).extend(bars)

    def add_split(self, symbol: str, ex_date: str, new_rate: float, old_rate: float = 1.0) -> None:
        """List a split of ``symbol`` (``new_rate`` shares for ``old_rate``) with ex-date ``ex_date``."""
        self._splits.append(
            {
                "id": str(uuid.uuid4()),
                "symbol": symbol,
                "new_rate": new_rate,
                "old_rate": old_rate,
                "process_date": ex_date,
                "ex_date": ex_date,
                "record_date": ex_date,
                "payable_date": ex_date,
            }
        )

    def action_requests(self) -> list[RecordedRequest]:
        """The requests made to the corporate-actions endpoint, in order."""
        return [r for r in self.requests if r.path == "/v1/corporate-actions"]

    def bar_requests(self) -> list[RecordedRequest]:
        """The requests made to the bars endpoint, in order."""
        return [r for r in self.requests if r.path == "/v2/stocks/bars"]

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        self.requests.append(
            RecordedRequest(request.method, request.path, dict(request.args), dict(request.headers))
        )
        response = self._dispatch(request)
        return response(environ, start_response)

    def _dispatch(self, request: Request) -> Response:
        if (request.headers.get(AUTH_HEADERS[0]), request.headers.get(AUTH_HEADERS[1])) != (
            self.key_id,
            self.secret_key,
        ):
            return _json({"code": 40110000, "message": "request is not authorized"}, 401)
        with self._lock:
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            return _json({"code": failure, "message": f"injected failure {failure}"}, failure)
        handler = self._routes.get((request.method, request.path))
        if handler is None:
            return _json({"code": 40410000, "message": "not found"}, 404)
        return handler(request)

    def _stock_bars(self, request: Request) -> Response:
        args = request.args
        symbols = args.get("symbols", "").split(",")
        series = self._bars.get(args.get("timeframe", ""), {})
        start = pd.Timestamp(args["start"]) if "start" in args else None
        end = pd.Timestamp(args["end"]) if "end" in args else None
        items: list[tuple[str, dict[str, Any]]] = []
        for symbol in sorted(symbols):
            for bar in series.get(symbol, []):
                stamp = pd.Timestamp(bar["t"])
                if (start is None or stamp >= start) and (end is None or stamp <= end):
                    items.append((symbol, bar))
        offset = _decode_token(args["page_token"]) if args.get("page_token") else 0
        limit = min(int(args.get("limit", self.page_size)), self.page_size)
        page = items[offset : offset + limit]
        grouped: dict[str, list[dict[str, Any]]] = {}
        for symbol, bar in page:
            grouped.setdefault(symbol, []).append(bar)
        more = offset + limit < len(items)
        return _json({"bars": grouped, "next_page_token": _encode_token(offset + limit) if more else None})

    def _corporate_actions(self, request: Request) -> Response:
        args = request.args
        symbols = set(args.get("symbols", "").split(","))
        types = set(args.get("types", "forward_split,reverse_split").split(","))
        start = dt.date.fromisoformat(args["start"]) if "start" in args else dt.date.min
        end = dt.date.fromisoformat(args["end"]) if "end" in args else dt.date.max
        found: dict[str, list[dict[str, Any]]] = {}
        for split in self._splits:
            kind = "forward_split" if split["new_rate"] > split["old_rate"] else "reverse_split"
            ex_date = dt.date.fromisoformat(split["ex_date"])
            if split["symbol"] in symbols and kind in types and start <= ex_date <= end:
                if kind == "forward_split":
                    found.setdefault("forward_splits", []).append({**split, "cusip": "000000000"})
                else:
                    cusips = {"old_cusip": "000000000", "new_cusip": "000000001"}
                    found.setdefault("reverse_splits", []).append({**split, **cusips})
        return _json({"corporate_actions": found, "next_page_token": None})


def bars_to_alpaca_json(bars: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Bar-schema rows as Alpaca's JSON bars per symbol (``t`` = bar start, ISO UTC), for :meth:`add_bars`."""
    out: dict[str, list[dict[str, Any]]] = {}
    for symbol, group in bars.groupby("symbol"):
        out[str(symbol)] = [
            {
                "t": row.timestamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "o": row.open,
                "h": row.high,
                "l": row.low,
                "c": row.close,
                "v": row.volume,
                "n": TRADES_PER_BAR,
                "vw": row.close,
            }
            for row in group.itertuples()
        ]
    return out
