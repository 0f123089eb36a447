"""What the trader needs from a broker, and the order types it speaks (no alpaca types here).

Two implementations: :class:`~finpod.paper.alpaca_broker.AlpacaBroker` (alpaca-py
``TradingClient(paper=True)``) and :class:`~finpod.paper.sim_broker.SimBroker` (fills like the env,
for the parity replay). Quantities are shares (fractional allowed), prices USD per share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, Protocol

from finpod.errors import BrokerError

Side = Literal["buy", "sell"]
HTTP_NOT_FOUND: Final[int] = 404
"""Status of :class:`OrderRejected` when the broker does not know the order or asset asked for."""
FINAL_STATUSES: Final[frozenset[str]] = frozenset(
    {"filled", "canceled", "expired", "rejected", "done_for_day", "replaced", "not_sent"}
)
"""Order statuses after which nothing more can fill (``not_sent``: the broker never had it)."""


@dataclass(frozen=True)
class OrderIntent:
    """One market order the trader wants, before the broker has it.

    Attributes:
        client_order_id: deterministic id (:func:`finpod.paper.ids.client_order_id`).
        bar_ns: start of the decision bar, UTC ns.
        symbol: ticker.
        side: ``"buy"`` or ``"sell"``.
        qty: shares, > 0.
        price_usd: the price the order was sized at (USD/share), for limits and the journal.
    """

    client_order_id: str
    bar_ns: int
    symbol: str
    side: Side
    qty: float
    price_usd: float

    @property
    def notional_usd(self) -> float:
        """``qty x price_usd``."""
        return self.qty * self.price_usd


@dataclass(frozen=True)
class BrokerOrder:
    """An order as the broker reports it.

    Attributes:
        client_order_id: our id.
        broker_id: the broker's id.
        symbol: ticker.
        side: ``"buy"`` or ``"sell"``.
        qty: shares ordered.
        status: the broker's status (``new``, ``accepted``, ``partially_filled``, ``filled``,
            ``canceled``, ``rejected``...).
        filled_qty: shares filled so far.
        filled_avg_price_usd: average fill price, or 0 before any fill.
    """

    client_order_id: str
    broker_id: str
    symbol: str
    side: Side
    qty: float
    status: str
    filled_qty: float
    filled_avg_price_usd: float

    @property
    def final(self) -> bool:
        """Nothing more can fill."""
        return self.status in FINAL_STATUSES


@dataclass(frozen=True)
class Account:
    """The account's money (USD).

    Attributes:
        equity_usd: cash plus positions at market.
        cash_usd: cash.
        buying_power_usd: what the broker lets the account buy now.
        trading_blocked: the broker refuses orders.
    """

    equity_usd: float
    cash_usd: float
    buying_power_usd: float
    trading_blocked: bool


@dataclass(frozen=True)
class AssetInfo:
    """Whether a symbol can be traded now."""

    symbol: str
    tradable: bool
    fractionable: bool


class BrokerUnreachable(BrokerError):
    """No answer (timeout, connection refused or reset): the request may or may not have landed."""


class BrokerBusy(BrokerError):
    """The broker answered 429 or 5xx: the request did not land; ``retry_after_s`` seconds to wait."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class OrderRejected(BrokerError):
    """The broker refused the order (4xx): not enough buying power, not tradable, a duplicate id..."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class Broker(Protocol):
    """The calls the paper trader makes; every one may raise :class:`BrokerUnreachable` or
    :class:`BrokerBusy`."""

    def submit(self, intent: OrderIntent) -> BrokerOrder:
        """Send a market order (day, ``client_order_id`` set). Raises :class:`OrderRejected`."""
        ...

    def order_by_client_id(self, client_order_id: str) -> BrokerOrder | None:
        """The order with that id, or ``None`` when the broker never had it."""
        ...

    def open_orders(self) -> list[BrokerOrder]:
        """Every order that can still fill."""
        ...

    def cancel(self, broker_id: str) -> None:
        """Ask the broker to cancel an order (it may fill before the cancel lands)."""
        ...

    def positions(self) -> dict[str, float]:
        """Shares held per symbol (non-zero only)."""
        ...

    def account(self) -> Account:
        """Equity, cash, buying power."""
        ...

    def asset(self, symbol: str) -> AssetInfo:
        """Whether ``symbol`` is tradable (and fractionable) now."""
        ...
