"""The env's settings: costs, limits, action and reward modes, episode length. Validated on creation."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

from finpod.errors import SpecError

ActionMode = Literal["weights", "share_delta"]
FillMode = Literal["next_open", "next_close"]
RewardMode = Literal["log_return", "pnl", "risk_penalised", "excess_log_return"]
StartPortfolio = Literal["cash", "equal_weight"]

ACTION_MODES: tuple[str, ...] = ("weights", "share_delta")
FILL_MODES: tuple[str, ...] = ("next_open", "next_close")
REWARD_MODES: tuple[str, ...] = ("log_return", "pnl", "risk_penalised", "excess_log_return")
START_PORTFOLIOS: tuple[str, ...] = ("cash", "equal_weight")


@dataclass(frozen=True)
class EnvConfig:
    """Static settings of the batched trading env (every field has a unit; nothing is implied).

    Attributes:
        initial_cash_usd: what every portfolio is worth at the start of an episode (USD): all cash, or
            invested (``start_portfolio``).
        fee_rate: proportional fee, a fraction of the traded notional at the executed price
            (0.002 = 0.2% per trade, the reference setting), charged in cash on buys and sells.
        half_spread_bps: half-spread slippage in basis points, applied against the trader on every fill:
            buys execute at ``price x (1 + bps/1e4)``, sells at ``price x (1 - bps/1e4)``.
        max_participation: the most shares of one asset traded per step, as a fraction of that asset's
            volume in the fill bar (1.0 = at most the bar's whole volume; ``math.inf`` = no cap). A
            bar with zero volume therefore allows no trade; with the cap off, a filled bar (not
            tradable and zero volume: no trade happened) still allows no sell, as it has no price.
        action_mode: ``"weights"``: actions in ``[0, 1]`` of size ``M + 1`` over ``[cash, asset_1 ..
            asset_M]``, normalised to target portfolio weights (all zero = all cash);
            ``"share_delta"``: actions in ``[-1, 1]`` of size ``M``, shares to trade = action x
            ``max_shares`` (ElegantRL compatibility), sells first, then buys scaled to the cash.
        max_shares: shares traded per asset by an action of 1.0 in ``"share_delta"`` mode (shares);
            unused in ``"weights"`` mode.
        fill: ``"next_open"``: orders decided at bar t's close fill at bar t+1's open;
            ``"next_close"``: at bar t+1's close.
        reward: ``"log_return"``: ``log(E_{t+1} / E_t)``; ``"pnl"``: ``(E_{t+1} - E_t) /
            initial_cash_usd``; ``"risk_penalised"``: ``r - risk_penalty x r**2`` with ``r`` the
            log return (a per-step mean-variance penalty); ``"excess_log_return"``: ``log(E_{t+1} /
            E_t)`` minus the equal-weight basket's close-to-close log return of the same bar (an
            action-independent baseline: the same optimal policy, far less reward noise from the
            market's moves). ``E`` is equity at a bar's close (USD).
        reward_scale: dimensionless multiplier applied to the reward above (e.g. 100 turns a log
            return into percent).
        risk_penalty: weight of the squared log return in ``"risk_penalised"``, and of the squared
            excess log return in ``"excess_log_return"`` (a tracking-error penalty against equal
            weight: ``x - risk_penalty x x**2``); a risk aversion (dimensionless, >= 0; 0 = none),
            the same per bar as per year. Unused by ``"log_return"`` and ``"pnl"``.
        horizon_bars: episode length in steps (bars); an episode truncates after this many steps or
            at the segment's last bar, whichever comes first.
        random_start: each env starts its episodes at a random bar of the segment (leaving room for
            the horizon); ``False``: every env starts at the segment's first bar (backtest mode).
        whole_shares: trade whole shares only (orders rounded toward zero); ``False``: fractional.
        rebalance_band: no-trade band in ``"weights"`` mode, a fraction of equity in ``[0, 1)``: an
            asset whose ``|target weight - current weight|`` (both at the fill prices) is below the
            band is not traded that step; cash absorbs the difference. ``0.0`` trades every asset
            every step. Unused in ``"share_delta"`` mode.
        start_portfolio: the book an episode starts with, worth ``initial_cash_usd`` at its first
            bar's close: ``"cash"`` (all cash, no holdings), or ``"equal_weight"`` (the cash spread
            equally over the assets tradable at that bar, bought at its close without cost or
            volume cap; whole shares rounded down when ``whole_shares``, the remainder kept as
            cash). An invested start shows a learner the state it trades from after a backtest's
            first bar: holding is free and every trade pays, where a start in cash charges the
            whole entry in the episode's first reward (at minute bars and a 0.2 % fee, more than a
            390-bar episode's expected excess return: learners with the pathwise term stayed in
            cash).
        fully_invested: ``"weights"`` mode: the action's cash score is ignored, so a target spreads
            the whole book over the assets (``w_i = a_i / sum_j a_j``; a row whose asset scores are
            all 0 is all cash). The oracle's and the linear baseline's family; the tournament then
            ranks books that all carry the market's moves, not cash against a falling validation
            window. Unused in ``"share_delta"`` mode.
    """

    COST_FIELDS: ClassVar[tuple[str, ...]] = ("fee_rate", "half_spread_bps", "max_participation")
    """The settings of the cost model (fee, slippage, volume cap): what a replay of a trained trader
    may change (``finpod.backtest_run(costs=...)``) without retraining it."""

    initial_cash_usd: float = 1_000_000.0
    fee_rate: float = 0.002
    half_spread_bps: float = 0.0
    max_participation: float = 1.0
    action_mode: ActionMode = "weights"
    max_shares: float = 100.0
    fill: FillMode = "next_open"
    reward: RewardMode = "log_return"
    reward_scale: float = 100.0
    risk_penalty: float = 0.0
    horizon_bars: int = 250
    random_start: bool = True
    whole_shares: bool = False
    rebalance_band: float = 0.0
    start_portfolio: StartPortfolio = "cash"
    fully_invested: bool = False

    def __post_init__(self) -> None:
        """Reject settings that cannot describe a market (one line naming the field and the fix)."""
        _positive_finite("initial_cash_usd", self.initial_cash_usd)
        if not (math.isfinite(self.fee_rate) and 0.0 <= self.fee_rate < 1.0):
            raise SpecError(f"env fee_rate must be in [0, 1) (a fraction of notional), got {self.fee_rate}")
        if not (math.isfinite(self.half_spread_bps) and 0.0 <= self.half_spread_bps < 10_000.0):
            raise SpecError(f"env half_spread_bps must be in [0, 10000) bps, got {self.half_spread_bps}")
        if math.isnan(self.max_participation) or self.max_participation <= 0.0:
            raise SpecError(
                f"env max_participation must be > 0 (1.0 = the bar's volume, inf = no cap), "
                f"got {self.max_participation}"
            )
        _one_of("action_mode", self.action_mode, ACTION_MODES)
        _one_of("fill", self.fill, FILL_MODES)
        _one_of("reward", self.reward, REWARD_MODES)
        _one_of("start_portfolio", self.start_portfolio, START_PORTFOLIOS)
        _positive_finite("max_shares", self.max_shares)
        _positive_finite("reward_scale", self.reward_scale)
        if not (math.isfinite(self.risk_penalty) and self.risk_penalty >= 0.0):
            raise SpecError(f"env risk_penalty must be a finite number >= 0, got {self.risk_penalty}")
        if not (math.isfinite(self.rebalance_band) and 0.0 <= self.rebalance_band < 1.0):
            raise SpecError(
                f"env rebalance_band must be in [0, 1) (a fraction of equity, 0 = no band), "
                f"got {self.rebalance_band}"
            )
        if isinstance(self.horizon_bars, bool) or not isinstance(self.horizon_bars, int):
            raise SpecError(f"env horizon_bars must be a whole number of bars, got {self.horizon_bars!r}")
        if self.horizon_bars < 1:
            raise SpecError(f"env horizon_bars must be >= 1 bar, got {self.horizon_bars}")

    @property
    def half_spread_fraction(self) -> float:
        """The half-spread as a fraction of price (``half_spread_bps / 1e4``)."""
        return self.half_spread_bps / 10_000.0

    @property
    def volume_capped(self) -> bool:
        """Whether trades are limited by the fill bar's volume (``max_participation`` is finite)."""
        return math.isfinite(self.max_participation)


def _positive_finite(name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0.0):
        raise SpecError(f"env {name} must be a finite number > 0, got {value}")


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise SpecError(f"env {name} must be one of {', '.join(allowed)}; got {value!r}")
