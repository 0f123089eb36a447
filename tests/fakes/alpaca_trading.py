"""A fake Alpaca paper-trading API on 127.0.0.1 for the real ``TradingClient`` (``url_override``).

A small broker with state: account cash, positions, orders keyed by ``client_order_id`` (a second
POST with the same id is refused with 422, as Alpaca does). Market orders fill at the price the
test sets (:meth:`FakeTradingServer.set_price`) by the fill mode (``"fill"``, ``"partial"``,
``"hold"``). Faults on demand: an error status for the next requests (with ``Retry-After``), a
request that is answered only after a delay (past the client's timeout), an order POST that lands
and then never answers, less buying power, a symbol that is not tradable. It also serves the bars
endpoint of :class:`~tests.fakes.alpaca_server.FakeAlpacaServer` it extends.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import time
import uuid
from typing import Any

from werkzeug.wrappers import Request, Response

from tests.fakes.alpaca_server import AUTH_HEADERS, FakeAlpacaServer

OPEN_STATUSES = frozenset({"new", "accepted", "partially_filled", "pending_new"})
_ORDER_ID = re.compile(r"^/v2/orders/([0-9a-f-]{36})$")
_ASSET = re.compile(r"^/v2/assets/([A-Z0-9.]+)$")


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json", headers=headers)


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class FakeTradingServer(FakeAlpacaServer):
    """The fake paper broker; a context manager like :class:`FakeAlpacaServer`.

    Args:
        key_id, secret_key: the keys the client must send.
        cash_usd: starting cash.
        fill_mode: ``"fill"`` (market orders fill at once), ``"partial"`` (half fills, the rest
            stays open) or ``"hold"`` (orders stay ``accepted`` until :meth:`fill_open`).
    """

    def __init__(
        self, *, key_id: str, secret_key: str, cash_usd: float = 100_000.0, fill_mode: str = "fill"
    ) -> None:
        super().__init__(key_id=key_id, secret_key=secret_key)
        self.cash_usd = cash_usd
        self.fill_mode = fill_mode
        self.prices: dict[str, float] = {}
        self.positions: dict[str, float] = {}
        self.orders: dict[str, dict[str, Any]] = {}
        self.order_posts: list[str] = []
        self.untradable: set[str] = set()
        self.not_fractionable: set[str] = set()
        """Symbols the broker trades in whole shares only (a fractional qty is refused with 422)."""
        self.delisted: set[str] = set()
        """Symbols the asset endpoint no longer knows (HTTP 404, as Alpaca answers for a dropped ticker)."""
        self.buying_power_cap_usd: float | None = None
        self.delay_s: float = 0.0
        self.echo_keys_in_errors = False
        self._delays: list[float] = []
        self._land_then_hang: list[float] = []
        self._busy: list[tuple[int, float]] = []
        self._garbled: list[str] = []
        self._state = threading.RLock()

    # ------------------------------------------------------------------ test controls

    def set_price(self, symbol: str, price_usd: float) -> None:
        """The price market orders in ``symbol`` fill at from now on."""
        with self._state:
            self.prices[symbol] = price_usd

    def busy_next(self, status: int, times: int, retry_after_s: float = 0.0) -> None:
        """Answer the next ``times`` requests with ``status`` and a ``Retry-After`` header."""
        with self._state:
            self._busy.extend([(status, retry_after_s)] * times)

    def garble_next(self, body: str, times: int = 1) -> None:
        """Answer the next ``times`` requests with HTTP 200 and ``body`` (a proxy page, a truncated
        or changed reply), without acting on them."""
        with self._state:
            self._garbled.extend([body] * times)

    def delay_next(self, seconds: float, times: int = 1) -> None:
        """Answer the next ``times`` requests only after ``seconds`` (a hung server)."""
        with self._state:
            self._delays.extend([seconds] * times)

    def land_then_hang(self, seconds: float) -> None:
        """The next order POST is accepted (and fills) but its answer comes after ``seconds``."""
        with self._state:
            self._land_then_hang.append(seconds)

    def fill_open(self, fraction: float = 1.0) -> None:
        """Fill ``fraction`` of what remains of every open order at the current prices."""
        with self._state:
            for order in self.orders.values():
                if order["status"] in OPEN_STATUSES:
                    self._fill(order, fraction)

    def client_order_ids(self) -> list[str]:
        """Every accepted order's client id, in POST order (a duplicate would show twice)."""
        with self._state:
            return [o for o in self.order_posts]

    def positions_held(self) -> dict[str, float]:
        """Non-zero positions (shares)."""
        with self._state:
            return {s: q for s, q in self.positions.items() if abs(q) > 1e-9}

    def equity_usd(self) -> float:
        """Cash plus positions at the current prices."""
        with self._state:
            return self.cash_usd + sum(q * self.prices.get(s, 0.0) for s, q in self.positions.items())

    # ------------------------------------------------------------------ server

    def _dispatch(self, request: Request) -> Response:
        with self._state:
            delay = self._delays.pop(0) if self._delays else self.delay_s
        if delay:
            time.sleep(delay)
        if (request.headers.get(AUTH_HEADERS[0]), request.headers.get(AUTH_HEADERS[1])) != (
            self.key_id,
            self.secret_key,
        ):
            presented = " ".join(str(request.headers.get(h)) for h in AUTH_HEADERS)
            echo = f" (keys presented: {presented})" if self.echo_keys_in_errors else ""
            return _json({"code": 40110000, "message": "request is not authorized" + echo}, 401)
        with self._state:
            busy = self._busy.pop(0) if self._busy else None
        if busy is not None:
            status, wait = busy
            return _json(
                {"code": status, "message": f"injected {status}"}, status, {"Retry-After": f"{wait:g}"}
            )
        with self._state:
            garbled = self._garbled.pop(0) if self._garbled else None
        if garbled is not None:
            return Response(garbled, status=200, mimetype="application/json")
        path, method = request.path, request.method
        if path.startswith("/v2/stocks/"):
            return super()._dispatch(request)
        with self._state:
            if (method, path) == ("POST", "/v2/orders"):
                response, hang = self._post_order(request)
            else:
                response, hang = self._route(method, path, request), 0.0
        if hang:
            time.sleep(hang)
        return response

    def _route(self, method: str, path: str, request: Request) -> Response:
        if (method, path) == ("GET", "/v2/orders:by_client_order_id"):
            order = self.orders.get(request.args.get("client_order_id", ""))
            return _json(order) if order else _json({"code": 40410000, "message": "order not found"}, 404)
        if (method, path) == ("GET", "/v2/orders"):
            return _json([o for o in self.orders.values() if o["status"] in OPEN_STATUSES])
        if (method, path) == ("GET", "/v2/positions"):
            return _json([self._position(s, q) for s, q in sorted(self.positions.items()) if abs(q) > 1e-9])
        if (method, path) == ("GET", "/v2/account"):
            return _json(self._account())
        match = _ORDER_ID.match(path)
        if match and method == "DELETE":
            for order in self.orders.values():
                if order["id"] == match.group(1) and order["status"] in OPEN_STATUSES:
                    order.update(status="canceled", canceled_at=_stamp(), updated_at=_stamp())
                    return Response(status=204)
            return _json({"code": 42210000, "message": "order is not cancelable"}, 422)
        match = _ASSET.match(path)
        if match and method == "GET":
            if match.group(1) in self.delisted:
                return _json({"code": 40410000, "message": "asset not found"}, 404)
            return _json(self._asset(match.group(1)))
        return _json({"code": 40410000, "message": "not found"}, 404)

    def _post_order(self, request: Request) -> tuple[Response, float]:
        body = json.loads(request.get_data() or b"{}")
        cid = str(body.get("client_order_id") or uuid.uuid4())
        symbol, side, qty = str(body["symbol"]), str(body["side"]), float(body["qty"])
        if cid in self.orders:
            return _json({"code": 40010001, "message": "client_order_id must be unique"}, 422), 0.0
        if symbol in self.untradable:
            return _json({"code": 42210000, "message": f"asset {symbol} is not tradable"}, 422), 0.0
        if symbol in self.not_fractionable and qty != int(qty):
            return _json({"code": 42210000, "message": f'asset "{symbol}" is not fractionable'}, 422), 0.0
        price = self.prices.get(symbol)
        if price is None:
            return _json({"code": 42210000, "message": f"no price for {symbol}"}, 422), 0.0
        if side == "buy" and qty * price > self._buying_power():
            key, secret = (request.headers.get(h) for h in AUTH_HEADERS)
            echo = f" (request from key {key} secret {secret})"
            message = "insufficient buying power" + (echo if self.echo_keys_in_errors else "")
            return _json({"code": 40310000, "message": message}, 403), 0.0
        if side == "sell" and qty > self.positions.get(symbol, 0.0) + 1e-9:
            return _json(
                {"code": 40310000, "message": f"insufficient qty available for order {symbol}"}, 403
            ), 0.0
        now = _stamp()
        order = {
            "id": str(uuid.uuid4()), "client_order_id": cid, "created_at": now, "updated_at": now,
            "submitted_at": now, "asset_id": str(uuid.uuid5(uuid.NAMESPACE_DNS, symbol)), "symbol": symbol,
            "asset_class": "us_equity", "qty": f"{qty:g}", "filled_qty": "0", "filled_avg_price": None,
            "order_class": "simple", "order_type": "market", "type": "market", "side": side,
            "time_in_force": "day", "status": "accepted", "extended_hours": False,
        }  # fmt: skip
        self.orders[cid] = order
        self.order_posts.append(cid)
        if self.fill_mode in ("fill", "partial"):
            self._fill(order, 1.0 if self.fill_mode == "fill" else 0.5)
        hang = self._land_then_hang.pop(0) if self._land_then_hang else 0.0
        return _json(dict(order)), hang

    def _fill(self, order: dict[str, Any], fraction: float) -> None:
        symbol, qty = order["symbol"], float(order["qty"])
        done = float(order["filled_qty"])
        more = (qty - done) * fraction
        price = self.prices[symbol]
        sign = 1.0 if order["side"] == "buy" else -1.0
        self.cash_usd -= sign * more * price
        self.positions[symbol] = self.positions.get(symbol, 0.0) + sign * more
        avg = float(order["filled_avg_price"] or 0.0)
        total = done + more
        order["filled_avg_price"] = f"{(avg * done + price * more) / total:.6f}" if total else None
        order["filled_qty"] = f"{total:.9g}"
        order["status"] = "filled" if abs(total - qty) < 1e-9 else "partially_filled"
        order["updated_at"] = _stamp()

    def _buying_power(self) -> float:
        cap = self.buying_power_cap_usd
        return self.cash_usd if cap is None else min(self.cash_usd, cap)

    def _account(self) -> dict[str, Any]:
        return {
            "id": str(uuid.uuid5(uuid.NAMESPACE_DNS, "account")), "account_number": "PA0000000",
            "status": "ACTIVE", "currency": "USD", "cash": f"{self.cash_usd:.6f}",
            "equity": f"{self.equity_usd():.6f}", "buying_power": f"{self._buying_power():.6f}",
            "trading_blocked": False, "account_blocked": False,
        }  # fmt: skip

    def _position(self, symbol: str, qty: float) -> dict[str, Any]:
        price = self.prices.get(symbol, 0.0)
        return {
            "asset_id": str(uuid.uuid5(uuid.NAMESPACE_DNS, symbol)), "symbol": symbol, "exchange": "NASDAQ",
            "asset_class": "us_equity", "avg_entry_price": f"{price:.6f}", "qty": f"{qty:.9g}",
            "side": "long",
            "cost_basis": f"{qty * price:.6f}", "market_value": f"{qty * price:.6f}",
        }  # fmt: skip

    def _asset(self, symbol: str) -> dict[str, Any]:
        return {
            "id": str(uuid.uuid5(uuid.NAMESPACE_DNS, symbol)), "class": "us_equity", "exchange": "NASDAQ",
            "symbol": symbol, "status": "active", "tradable": symbol not in self.untradable,
            "marginable": True, "shortable": False, "easy_to_borrow": False,
            "fractionable": symbol not in self.not_fractionable,
        }  # fmt: skip
