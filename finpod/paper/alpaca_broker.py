"""The :class:`~finpod.paper.broker.Broker` over alpaca-py's ``TradingClient(paper=True)``.

Every HTTP request carries a timeout (a requests adapter mounted on the client's session), and
alpaca-py's own retries are switched off: a retry of an order POST is the caller's decision
(:mod:`finpod.paper.orders` looks the order up first). Errors become the broker module's three
exceptions with the server's message redacted of the keys.
"""

from __future__ import annotations

import json
from typing import Any, Final

import pydantic
import requests
from alpaca.common.exceptions import APIError
from alpaca.trading.client import TradingClient
from alpaca.trading.enums import OrderSide, TimeInForce
from alpaca.trading.models import Asset as AlpacaAsset
from alpaca.trading.models import Order, Position, TradeAccount
from alpaca.trading.requests import MarketOrderRequest

from finpod.net import Timeouts, install_timeouts
from finpod.paper.broker import (
    HTTP_NOT_FOUND,
    Account,
    AssetInfo,
    BrokerBusy,
    BrokerOrder,
    BrokerUnreachable,
    OrderIntent,
    OrderRejected,
    Side,
)
from finpod.paper.keys import AlpacaKeys, Redactor

HTTP_UNAUTHORIZED: Final[int] = 401
HTTP_FORBIDDEN: Final[int] = 403
HTTP_UNPROCESSABLE: Final[int] = 422
HTTP_TOO_MANY: Final[int] = 429
HTTP_SERVER_ERROR: Final[int] = 500
DEFAULT_RETRY_AFTER_S: Final[float] = 1.0
_MAX_MESSAGE_CHARS: Final[int] = 300


_URL_FIX: Final[str] = (
    "fix: check that APCA_API_BASE_URL (if set) is Alpaca's paper trading API root, "
    "https://paper-api.alpaca.markets"
)


SUBMIT: Final[str] = "submit"
"""How an order's POST names itself in an error line (the hints of :data:`_REFUSED_ORDER_FIX`)."""
_REFUSED_ORDER_FIX: Final[dict[int, str]] = {
    HTTP_FORBIDDEN: (
        "; the account refused this order (buying power, the quantity held, or a pattern-day-trader "
        "or wash-trade rule); the trader skips it and decides again at the next bar; fix: check the "
        "paper account's buying power and restrictions on Alpaca's dashboard"
    ),
    HTTP_UNPROCESSABLE: (
        "; Alpaca cannot take this order as sent (e.g. the symbol is not tradable or not fractionable "
        "now, or the quantity is refused); the trader skips it and decides again at the next bar; "
        "fix: check the symbol's status on Alpaca"
    ),
}


def _why_malformed(err: Exception) -> str:
    """What is wrong with a reply, without the reply's values (they may echo anything)."""
    if isinstance(err, pydantic.ValidationError):
        first = err.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "the reply"
        return f"{err.error_count()} problem(s), first: {where}: {first.get('msg', 'invalid')}"
    if isinstance(err, KeyError):
        return f"no {err.args[0]!r} field" if err.args else "a field is missing"
    return "an empty or unexpected reply"


def request_timeouts(timeout_s: float) -> Timeouts:
    """Connect and read timeouts of ``timeout_s`` each, no transport retry (the caller decides)."""
    return Timeouts(connect_s=timeout_s, read_s=timeout_s, retries=0)


def _float(value: Any) -> float:
    return 0.0 if value is None or value == "" else float(value)


def _side(value: Any) -> Side:
    text = str(getattr(value, "value", value)).lower()
    return "sell" if text == "sell" else "buy"


def _order(order: Order) -> BrokerOrder:
    return BrokerOrder(
        client_order_id=order.client_order_id,
        broker_id=str(order.id),
        symbol=str(order.symbol),
        side=_side(order.side),
        qty=_float(order.qty),
        status=str(getattr(order.status, "value", order.status)),
        filled_qty=_float(order.filled_qty),
        filled_avg_price_usd=_float(order.filled_avg_price),
    )


class AlpacaBroker:
    """Alpaca's paper trading API through alpaca-py.

    Args:
        keys: the API keys (from the environment).
        url: trading API base URL (:data:`PAPER_TRADING_URL`, or a local fake in tests).
        timeout_s: timeout of every request, seconds.
        redact: removes the keys from any text (server error bodies included).
    """

    def __init__(self, keys: AlpacaKeys, *, url: str, timeout_s: float, redact: Redactor) -> None:
        self._client = TradingClient(keys.key_id, keys.secret_key, paper=True, url_override=url)
        self._client._retry = 0  # an order POST is never retried blindly (see finpod.paper.orders)
        install_timeouts(self._client._session, request_timeouts(timeout_s))
        self._redact = redact

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except APIError as err:
            raise self._api_error(what, err) from None
        except requests.exceptions.JSONDecodeError:  # before RequestException, its base
            raise BrokerUnreachable(
                f"{what}: the broker's answer is not JSON (a proxy or a wrong URL?); {_URL_FIX}"
            ) from None
        except (pydantic.ValidationError, TypeError, KeyError) as err:
            raise BrokerUnreachable(
                f"{what}: the broker's answer is not what Alpaca sends ({_why_malformed(err)}); {_URL_FIX}"
            ) from None
        except requests.exceptions.RequestException as err:
            raise BrokerUnreachable(f"{what}: no answer from the broker ({type(err).__name__})") from None

    def _api_error(self, what: str, err: APIError) -> Exception:
        status = int(err.status_code or 0)
        try:
            message = str(json.loads(str(err)).get("message", err))
        except (ValueError, AttributeError):
            message = str(err)
        text = self._redact(" ".join(message.split()))[:_MAX_MESSAGE_CHARS]
        line = f"{what}: HTTP {status}: {text}"
        if status == HTTP_UNAUTHORIZED:
            line += (
                "; fix: set APCA_API_KEY_ID and APCA_API_SECRET_KEY to the keys of an Alpaca paper "
                "account (and APCA_API_BASE_URL to its trading API, if set)"
            )
        if status == HTTP_NOT_FOUND:
            line += (
                "; fix: if this is every call, set APCA_API_BASE_URL to the paper trading API root "
                "(https://paper-api.alpaca.markets, no /v2) or unset it"
            )
        if what.startswith(SUBMIT) and status in (HTTP_FORBIDDEN, HTTP_UNPROCESSABLE):
            line += _REFUSED_ORDER_FIX[status]
        if status == HTTP_TOO_MANY or status >= HTTP_SERVER_ERROR:
            response = err.response
            header = response.headers.get("Retry-After") if response is not None else None
            try:
                wait = float(header) if header is not None else DEFAULT_RETRY_AFTER_S
            except ValueError:
                wait = DEFAULT_RETRY_AFTER_S
            return BrokerBusy(line, wait)
        return OrderRejected(line, status)

    def submit(self, intent: OrderIntent) -> BrokerOrder:
        """POST one day market order with ``intent.client_order_id``."""
        request = MarketOrderRequest(
            symbol=intent.symbol,
            qty=intent.qty,
            side=OrderSide.BUY if intent.side == "buy" else OrderSide.SELL,
            time_in_force=TimeInForce.DAY,
            client_order_id=intent.client_order_id,
        )
        order = self._call(f"{SUBMIT} {intent.client_order_id}", self._client.submit_order, request)
        return _order(order)

    def order_by_client_id(self, client_order_id: str) -> BrokerOrder | None:
        """The order, or ``None`` on HTTP 404."""
        try:
            order = self._call(
                f"look up {client_order_id}", self._client.get_order_by_client_id, client_order_id
            )
        except OrderRejected as err:
            if err.status_code == HTTP_NOT_FOUND:
                return None
            raise
        return _order(order)

    def open_orders(self) -> list[BrokerOrder]:
        """Open orders (alpaca-py's default filter: status open)."""
        orders: list[Order] = self._call("list open orders", self._client.get_orders)
        return [_order(o) for o in orders]

    def cancel(self, broker_id: str) -> None:
        """DELETE the order."""
        self._call(f"cancel {broker_id}", self._client.cancel_order_by_id, broker_id)

    def positions(self) -> dict[str, float]:
        """Shares per symbol."""
        held: list[Position] = self._call("list positions", self._client.get_all_positions)
        return {p.symbol: _float(p.qty) for p in held if _float(p.qty) != 0.0}

    def account(self) -> Account:
        """The trade account's equity, cash and buying power."""
        acct: TradeAccount = self._call("read the account", self._client.get_account)
        return Account(
            equity_usd=_float(acct.equity),
            cash_usd=_float(acct.cash),
            buying_power_usd=_float(acct.buying_power),
            trading_blocked=bool(acct.trading_blocked) or bool(acct.account_blocked),
        )

    def asset(self, symbol: str) -> AssetInfo:
        """Tradable and fractionable flags of ``symbol``."""
        asset: AlpacaAsset = self._call(f"read asset {symbol}", self._client.get_asset, symbol)
        return AssetInfo(symbol, bool(asset.tradable), bool(asset.fractionable))
