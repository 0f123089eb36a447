"""The verdict: did each trader beat equal weight on the backtest, by how much, and how sure is that.

For every learned trader against the equal-weight buy-and-hold baseline, on daily returns:

- **Sharpe difference** (annualised) with a **95 % confidence interval** from a stationary bootstrap
  (Politis and Romano, 1994) of the PAIRED daily returns: whole days are resampled in blocks of
  geometric length (mean :func:`mean_block_length`), so the two series keep their correlation
  and some of their serial dependence; seeded, so a report is reproducible.
- **Excess return**: the trader's cumulative return minus equal weight's; the **excess return
  curve** is the trader's wealth over equal weight's, minus 1, after each session.
- **Tracking error** (annualised standard deviation of the daily active return ``r - r_ew``) and
  **information ratio** (annualised mean active return over its standard deviation).
- **Probabilistic Sharpe ratio** (Bailey and López de Prado, 2012) of the active returns: the
  probability that the true information ratio is above 0, given the sample's length, skewness and
  kurtosis.
- **Deflated Sharpe ratio** (Bailey and López de Prado, 2014) of the active returns: the same
  probability against the expected maximum of ``N`` skill-less trials instead of 0, where ``N`` is
  the number of validation scores the tournament produced (every snapshot it evaluated) and the
  spread is their variance. A trader picked as the best of many lucky tries gets a low DSR.

The statistic is the ACTIVE return over equal weight, not the trader's own Sharpe: a long-only
trader in a rising market has a positive Sharpe without any skill, and a deflated Sharpe of that
would call luck skill. The trials' variance is that of their validation Sharpe ratios; subtracting
equal weight's validation Sharpe (one number for every trial) does not change it.

Sharpe ratios in the PSR and DSR formulas are per session (not annualised); the report shows
annualised Sharpe differences, information ratios and tracking errors (``x sqrt(252)``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from finpod.backtest.result import BacktestResult

SESSIONS_PER_YEAR = 252
"""Annualisation of daily figures (as :mod:`finpod.report.metrics`)."""
BENCHMARK_NAME = "equal_weight"
"""The baseline every trader is judged against."""
LINEAR_NAME = "linear"
"""The linear baseline (:mod:`finpod.linear_baseline`): every trader's second verdict is against it."""
CONFIDENCE = 0.95
"""Two-sided level of the bootstrap interval."""
BOOTSTRAP_SAMPLES = 2000
"""Resamples of the stationary bootstrap."""
BOOTSTRAP_SEED = 0
"""Seed of the bootstrap's generator (same returns, same interval)."""
MIN_SESSIONS = 3
"""Fewer paired sessions than this: no statistics (``None`` everywhere)."""
MIN_INTERVAL_SESSIONS = 20
"""Fewer paired sessions than this: no bootstrap interval (``n/a``). Resamples of a handful of days
are nearly flat, and their Sharpe ratios run to hundreds (an interval of [-498, +3.5] at 3 days)."""
EVENTS_FILE = Path("tournament") / "events.jsonl"
"""Where a run folder keeps the tournament's event log (one JSON event per line)."""


def sharpe_per_session(returns: np.ndarray) -> float:
    """Mean over standard deviation (``ddof=1``) of ``returns`` ``(n,)``; NaN when flat or ``n < 2``."""
    if returns.shape[0] < 2:
        return math.nan
    std = float(np.std(returns, ddof=1))
    return float(np.mean(returns)) / std if std > 0.0 else math.nan


def probabilistic_sharpe_ratio(
    sharpe: float, benchmark_sharpe: float, num_obs: int, skewness: float, kurtosis: float
) -> float:
    """PSR: the probability that the true Sharpe ratio exceeds ``benchmark_sharpe``.

    ``PSR = Phi((SR - SR*) sqrt(T - 1) / sqrt(1 - g3 SR + (g4 - 1) / 4 SR^2))`` (Bailey and López
    de Prado, 2012, "The Sharpe Ratio Efficient Frontier", eq. 11).

    Args:
        sharpe: the estimated Sharpe ratio ``SR``, per observation (not annualised).
        benchmark_sharpe: ``SR*``, per observation.
        num_obs: ``T``, the observations the estimate used.
        skewness: ``g3`` of the returns.
        kurtosis: ``g4`` of the returns (Pearson's: 3 for a normal, not the excess).

    Returns:
        A probability in ``[0, 1]``; NaN when an input is not finite or ``T < 2``.
    """
    values = (sharpe, benchmark_sharpe, skewness, kurtosis)
    if num_obs < 2 or not all(math.isfinite(v) for v in values):
        return math.nan
    variance_term = 1.0 - skewness * sharpe + (kurtosis - 1.0) / 4.0 * sharpe**2
    if variance_term <= 0.0:
        return math.nan
    z = (sharpe - benchmark_sharpe) * math.sqrt(num_obs - 1) / math.sqrt(variance_term)
    return float(stats.norm.cdf(z))


def expected_maximum_sharpe(num_trials: int, trial_variance: float) -> float:
    """``E[max]`` of ``N`` skill-less trials' Sharpe estimates (Bailey and López de Prado, 2014).

    ``sqrt(V) ((1 - gamma) Phi^-1(1 - 1/N) + gamma Phi^-1(1 - 1/(N e)))`` with ``gamma`` the
    Euler-Mascheroni constant; 0 for a single trial (nothing was selected).
    """
    if num_trials < 1:
        raise ValueError(f"num_trials must be >= 1, got {num_trials}")
    if num_trials == 1:
        return 0.0
    gamma = float(np.euler_gamma)
    z = (1.0 - gamma) * stats.norm.ppf(1.0 - 1.0 / num_trials) + gamma * stats.norm.ppf(
        1.0 - 1.0 / (num_trials * math.e)
    )
    return math.sqrt(trial_variance) * float(z)


def deflated_sharpe_ratio(
    sharpe: float, num_obs: int, skewness: float, kurtosis: float, num_trials: int, trial_variance: float
) -> float:
    """DSR: :func:`probabilistic_sharpe_ratio` against :func:`expected_maximum_sharpe`.

    Args:
        sharpe: the selected strategy's Sharpe ratio per observation.
        num_obs: observations behind ``sharpe``.
        skewness: of the selected strategy's returns.
        kurtosis: Pearson kurtosis of the selected strategy's returns.
        num_trials: ``N``, the strategies tried (here: validation scores the tournament produced).
        trial_variance: variance of the trials' Sharpe ratios, per observation squared.
    """
    threshold = expected_maximum_sharpe(num_trials, trial_variance)
    return probabilistic_sharpe_ratio(sharpe, threshold, num_obs, skewness, kurtosis)


def mean_block_length(num_obs: int) -> float:
    """Mean block length of the bootstrap: ``n^(1/3)`` sessions, at least 1 (the usual rate)."""
    return max(1.0, num_obs ** (1.0 / 3.0))


def stationary_bootstrap_indices(
    num_obs: int, num_samples: int, block_length: float, rng: np.random.Generator
) -> np.ndarray:
    """Row indices ``(num_samples, num_obs)`` of a stationary bootstrap (circular, geometric blocks).

    Each position starts a new block with probability ``1 / block_length`` (always at position 0)
    at a uniform start; otherwise it takes the next row (wrapping at the end).
    """
    starts = rng.integers(0, num_obs, size=(num_samples, num_obs))
    new_block = rng.random((num_samples, num_obs)) < 1.0 / block_length
    new_block[:, 0] = True
    position = np.arange(num_obs)
    block_begin = np.maximum.accumulate(np.where(new_block, position, 0), axis=1)
    first = np.take_along_axis(starts, block_begin, axis=1)
    return (first + position - block_begin) % num_obs


def sharpe_difference_interval(
    returns: np.ndarray, benchmark: np.ndarray, *, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    """Bootstrap interval of the annualised Sharpe difference ``SR(returns) - SR(benchmark)``.

    Args:
        returns: ``(n,)`` daily returns of the trader.
        benchmark: ``(n,)`` daily returns of the benchmark on the same sessions.
        seed: the bootstrap generator's seed.

    Returns:
        ``(low, high)``: the :data:`CONFIDENCE` percentile interval; NaN where a resample is flat.
    """
    n = returns.shape[0]
    rng = np.random.default_rng(seed)
    rows = stationary_bootstrap_indices(n, BOOTSTRAP_SAMPLES, mean_block_length(n), rng)
    differences = _sharpe_rows(returns[rows]) - _sharpe_rows(benchmark[rows])
    tail = (1.0 - CONFIDENCE) / 2.0 * 100.0
    low, high = np.nanpercentile(differences, [tail, 100.0 - tail]) * math.sqrt(SESSIONS_PER_YEAR)
    return float(low), float(high)


def sharpe_difference_variance(returns: np.ndarray, benchmark: np.ndarray) -> float:
    """Sampling variance of the annualised Sharpe difference ``SR(returns) - SR(benchmark)``.

    Jobson and Korkie's asymptotic variance of the difference of two Sharpe ratios of paired
    returns, as Memmel (2003) corrected it: ``(2 (1 - rho) + (a**2 + b**2 - 2 a b rho**2) / 2) / n``
    per session squared (``a``, ``b`` the per-session Sharpe ratios, ``rho`` the returns'
    correlation), times 252. Two traders that hold nearly the same book (``rho`` near 1) differ by
    a well-measured amount; a concentrated bet beside a diversified one has a standard error of
    about 0.64 Sharpe over one year at ``rho`` 0.8 (``sqrt(2 (1 - rho))``) and 0.9 at ``rho`` 0.6,
    whatever its mean.

    Args:
        returns: ``(n,)`` daily returns of the trader.
        benchmark: ``(n,)`` daily returns of the benchmark on the same sessions.

    Returns:
        The variance (annualised Sharpe squared); NaN when ``n < 2`` or either series is flat.
    """
    n = returns.shape[0]
    a, b = sharpe_per_session(returns), sharpe_per_session(benchmark)
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.nan
    rho = float(np.corrcoef(returns, benchmark)[0, 1])
    per_session = (2.0 * (1.0 - rho) + 0.5 * (a * a + b * b - 2.0 * a * b * rho * rho)) / n
    return max(per_session, 0.0) * SESSIONS_PER_YEAR


def shrunk_sharpe(returns: np.ndarray, benchmark: np.ndarray, prior_edge_sharpe: float) -> float:
    """The annualised Sharpe of ``returns`` with its edge over ``benchmark`` shrunk by its noise.

    Empirical-Bayes (normal-normal) posterior mean of the trader's true Sharpe when its true edge
    over the benchmark is drawn with standard deviation ``prior_edge_sharpe`` around 0 and measured
    with the variance :func:`sharpe_difference_variance`: ``SR_b + (SR - SR_b) t**2 / (t**2 +
    var)``. Among traders with the same measured Sharpe, the one whose edge is better measured
    (a book closer to the benchmark's) ranks higher; with ``prior_edge_sharpe`` infinite this is
    the plain Sharpe. Annualised throughout.

    Args:
        returns: ``(n,)`` daily returns of the trader.
        benchmark: ``(n,)`` daily returns of the benchmark on the same sessions.
        prior_edge_sharpe: ``t`` > 0, the spread of true edges one expects (annualised Sharpe).

    Returns:
        The shrunk Sharpe; the benchmark's Sharpe when the difference's variance is undefined.
    """
    sharpe = sharpe_per_session(returns) * math.sqrt(SESSIONS_PER_YEAR)
    base = sharpe_per_session(benchmark) * math.sqrt(SESSIONS_PER_YEAR)
    return shrink_edge(sharpe, base, sharpe_difference_variance(returns, benchmark), prior_edge_sharpe)


def shrink_edge(sharpe: float, base: float, variance: float, prior_edge_sharpe: float) -> float:
    """``base + (sharpe - base) t**2 / (t**2 + variance)``: :func:`shrunk_sharpe` from its parts
    (annualised Sharpe ratios, the difference's variance, the prior spread ``t``); ``base`` where
    a part is not finite (NaN without a finite ``base``)."""
    if not (math.isfinite(sharpe) and math.isfinite(base) and math.isfinite(variance)):
        return base if math.isfinite(base) else math.nan
    prior = prior_edge_sharpe * prior_edge_sharpe
    return base + (sharpe - base) * prior / (prior + variance)


def _sharpe_rows(samples: np.ndarray) -> np.ndarray:
    std = samples.std(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(std > 0.0, samples.mean(axis=1) / std, np.nan)


def excess_return_curve(returns: pd.Series, benchmark: pd.Series) -> pd.Series:
    """The trader's wealth over the benchmark's, minus 1, after each session (0.02 = 2 % ahead)."""
    aligned = benchmark.reindex(returns.index).astype(float)
    return (1.0 + returns.astype(float)).cumprod() / (1.0 + aligned).cumprod() - 1.0


def validation_trial_scores(run_dir: Path) -> list[float]:
    """Every validation score the tournament produced: the ``score`` of each ``round_finished`` event.

    Reads ``run_dir/tournament/events.jsonl`` (the engine's public log, not its private state); a
    last line cut by a kill is skipped. No log: an empty list.
    """
    path = run_dir / EVENTS_FILE
    if not path.is_file():
        return []
    scores = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("kind") == "round_finished":
            score = event.get("data", {}).get("score")
            if isinstance(score, int | float) and math.isfinite(score):
                scores.append(float(score))
    return scores


@dataclass(frozen=True)
class Verdict:
    """One trader against equal weight or the linear baseline on one segment (annualised unless said).

    Attributes:
        trader: the trader's name.
        benchmark: the baseline it is judged against (:data:`BENCHMARK_NAME` or :data:`LINEAR_NAME`).
        beat: the trader's Sharpe ratio is above the benchmark's.
        sharpe: the trader's annualised Sharpe ratio.
        benchmark_sharpe: the benchmark's.
        sharpe_difference: ``sharpe - benchmark_sharpe``.
        sharpe_difference_ci: the bootstrap interval of the difference, ``[low, high]``.
        significant: the interval lies wholly above 0 (or wholly below: a significant loss).
        excess_return: trader's cumulative return minus the benchmark's (fraction).
        information_ratio: annualised mean active return over its standard deviation.
        tracking_error: annualised standard deviation of the daily active return (fraction).
        psr: probability that the true information ratio is above 0.
        dsr: probability that it is above the expected best of ``num_trials`` skill-less trials;
            ``None`` when the run's tournament log is missing.
        num_trials: validation scores behind the DSR (0 without a log).
        trial_sharpe_std: standard deviation of the trials' annualised validation Sharpe ratios.
        num_sessions: paired sessions.
        sentence: the verdict in one line.
    """

    trader: str
    benchmark: str
    beat: bool | None
    sharpe: float | None
    benchmark_sharpe: float | None
    sharpe_difference: float | None
    sharpe_difference_ci: tuple[float | None, float | None]
    significant: bool | None
    excess_return: float | None
    information_ratio: float | None
    tracking_error: float | None
    psr: float | None
    dsr: float | None
    num_trials: int
    trial_sharpe_std: float | None
    num_sessions: int
    sentence: str

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (the interval as a two-item list)."""
        payload = asdict(self)
        payload["sharpe_difference_ci"] = list(self.sharpe_difference_ci)
        return payload


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _signed(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:+.{digits}f}"


def _sentence(
    trader: str,
    difference: float | None,
    ci: tuple[float | None, float | None],
    dsr: float | None,
    benchmark: str = BENCHMARK_NAME,
) -> str:
    """``best beat equal weight by +x Sharpe [CI], DSR d``, or ``best vs linear: +x Sharpe [CI]``."""
    if difference is None:
        against = "equal weight" if benchmark == BENCHMARK_NAME else benchmark
        return f"{trader}: no verdict against {against} (too few sessions or a flat series)"
    interval = (
        f"[{int(CONFIDENCE * 100)}% CI n/a: under {MIN_INTERVAL_SESSIONS} sessions]"
        if ci == (None, None)
        else f"[{int(CONFIDENCE * 100)}% CI {_signed(ci[0])}, {_signed(ci[1])}]"
    )
    if benchmark != BENCHMARK_NAME:
        return f"{trader} vs {benchmark}: {difference:+.2f} Sharpe {interval}"
    dsr_text = "" if dsr is None else f", DSR {dsr:.2f}"
    if round(difference, 2) == 0.0:  # printed as +0.00 or -0.00: neither a win nor a loss
        return f"{trader} matched equal weight ({difference:+.2f} Sharpe) {interval}{dsr_text}"
    verb = "beat" if difference > 0 else "trailed"
    return f"{trader} {verb} equal weight by {difference:+.2f} Sharpe {interval}{dsr_text}"


def judge(
    name: str,
    returns: pd.Series,
    benchmark: pd.Series,
    trial_scores: Sequence[float],
    *,
    seed: int = BOOTSTRAP_SEED,
    benchmark_name: str = BENCHMARK_NAME,
) -> Verdict:
    """The :class:`Verdict` of trader ``name`` against ``benchmark`` (daily returns, same sessions).

    Args:
        name: the trader's name.
        returns: its daily simple returns.
        benchmark: the benchmark's daily simple returns (aligned on ``returns``' sessions).
        trial_scores: every validation score of the tournament (annualised Sharpe ratios).
        seed: the bootstrap's seed.
        benchmark_name: :data:`BENCHMARK_NAME` (equal weight) or :data:`LINEAR_NAME` (its sentence
            reads ``best vs linear: +x.xx Sharpe [95% CI ...]``).
    """
    paired = pd.concat([returns.astype(float), benchmark.astype(float)], axis=1, join="inner").dropna()
    ours, theirs = paired.iloc[:, 0].to_numpy(), paired.iloc[:, 1].to_numpy()
    n = ours.shape[0]
    scale = math.sqrt(SESSIONS_PER_YEAR)
    trials = np.asarray(list(trial_scores), dtype=float)
    trial_std = float(np.std(trials, ddof=1)) if trials.shape[0] >= 2 else math.nan
    if n < MIN_SESSIONS:
        return Verdict(
            trader=name,
            benchmark=benchmark_name,
            beat=None,
            sharpe=None,
            benchmark_sharpe=None,
            sharpe_difference=None,
            sharpe_difference_ci=(None, None),
            significant=None,
            excess_return=None,
            information_ratio=None,
            tracking_error=None,
            psr=None,
            dsr=None,
            num_trials=int(trials.shape[0]),
            trial_sharpe_std=_finite(trial_std),
            num_sessions=n,
            sentence=_sentence(name, None, (None, None), None, benchmark_name),
        )
    sharpe, benchmark_sharpe = sharpe_per_session(ours) * scale, sharpe_per_session(theirs) * scale
    difference = _finite(sharpe - benchmark_sharpe)
    ci: tuple[float | None, float | None] = (None, None)
    if difference is not None and n >= MIN_INTERVAL_SESSIONS:
        low, high = sharpe_difference_interval(ours, theirs, seed=seed)
        ci = (_finite(low), _finite(high))
    active = ours - theirs
    ir_per_session = sharpe_per_session(active)
    skewness = float(stats.skew(active, bias=False)) if n > 2 else math.nan
    kurtosis = float(stats.kurtosis(active, fisher=False, bias=False)) if n > 3 else math.nan
    psr = probabilistic_sharpe_ratio(ir_per_session, 0.0, n, skewness, kurtosis)
    dsr, num_trials = math.nan, int(trials.shape[0])
    if num_trials >= 1:
        trial_variance = (trial_std / scale) ** 2 if num_trials >= 2 else 0.0
        dsr = deflated_sharpe_ratio(ir_per_session, n, skewness, kurtosis, num_trials, trial_variance)
    significant = None if ci[0] is None or ci[1] is None else bool(ci[0] > 0.0 or ci[1] < 0.0)
    cumulative = float(np.prod(1.0 + ours) - np.prod(1.0 + theirs))
    return Verdict(
        trader=name,
        benchmark=benchmark_name,
        beat=None if difference is None else bool(difference > 0.0),
        sharpe=_finite(sharpe),
        benchmark_sharpe=_finite(benchmark_sharpe),
        sharpe_difference=difference,
        sharpe_difference_ci=ci,
        significant=significant,
        excess_return=_finite(cumulative),
        information_ratio=_finite(ir_per_session * scale),
        tracking_error=_finite(float(np.std(active, ddof=1)) * scale),
        psr=_finite(psr),
        dsr=_finite(dsr),
        num_trials=num_trials,
        trial_sharpe_std=_finite(trial_std),
        num_sessions=n,
        sentence=_sentence(name, difference, ci, _finite(dsr), benchmark_name),
    )


def segment_verdicts(
    backtest: BacktestResult, trial_scores: Iterable[float], benchmark_name: str = BENCHMARK_NAME
) -> dict[str, Verdict]:
    """The verdict of every learned trader (kind ``trader``) of a segment against ``benchmark_name``
    (equal weight, or :data:`LINEAR_NAME`); empty when the segment has no such baseline."""
    benchmark = backtest.traders.get(benchmark_name)
    if benchmark is None:
        return {}
    trials = list(trial_scores)
    return {
        name: judge(name, result.returns, benchmark.returns, trials, benchmark_name=benchmark_name)
        for name, result in backtest.traders.items()
        if result.kind == "trader"
    }


PICK_GATE_SE = 0.0
"""Standard errors by which the selected trader's validation Sharpe must exceed equal weight's for it
to be the run's pick (its edge must also be positive): 0, never deploy a trader that did not beat the
trivial book on the validation year. A gate at 1, chosen on 12 tuning runs of the skill bench where it
closed only on the null, cost real edges on the reported seeds (volume and nonlinear picks of +0.44
to +0.93 Sharpe held out had shown 0.5-1.0 standard errors on one validation year): BENCHMARKS.md,
"A gate on the pick"."""


@dataclass(frozen=True)
class PickVerdict:
    """Whether the selected trader showed its edge over equal weight on the validation segment.

    Attributes:
        trader: the run's pick: the selected trader's name, or :data:`BENCHMARK_NAME` when its
            validation edge is under the gate.
        selected: the trader the tournament selected (``best``).
        edge_sharpe: its validation Sharpe minus equal weight's (annualised; None when undefined).
        standard_error: the edge's standard error (:func:`sharpe_difference_variance`).
        edge_se: the edge in standard errors.
        gate_se: the standard errors the edge had to reach, :data:`PICK_GATE_SE`.
        sentence: one line for people.
    """

    trader: str
    selected: str
    edge_sharpe: float | None
    standard_error: float | None
    edge_se: float | None
    gate_se: float
    sentence: str

    def to_json(self) -> dict[str, Any]:
        """The verdict as plain values (``metrics.json``'s ``pick``)."""
        return asdict(self)


def pick_verdict(
    validation: BacktestResult, selected: str = "best", gate_se: float = PICK_GATE_SE
) -> PickVerdict | None:
    """The run's pick: ``selected`` when its validation Sharpe beats equal weight's (by at least
    ``gate_se`` standard errors of the paired difference), else equal weight.

    The tournament's pick is the best of many validated snapshots, ranked by chunked validation
    scores, so on a market without an edge it is the luckiest bet of the validation year: its
    held-out Sharpe trailed equal weight's by 0.26 on the median of the skill bench's null seeds,
    and on two of five its continuous validation Sharpe was below equal weight's. A trader that did
    not beat equal weight on validation is not one to deploy.

    Args:
        validation: the validation segment's result (the selected trader and equal weight in it).
        selected: the selected trader's name.
        gate_se: the standard errors the edge must reach.

    Returns:
        The verdict; None when the segment lacks either trader.
    """
    ours, theirs = validation.traders.get(selected), validation.traders.get(BENCHMARK_NAME)
    if ours is None or theirs is None:
        return None
    paired = pd.concat(
        [ours.returns.astype(float), theirs.returns.astype(float)], axis=1, join="inner"
    ).dropna()
    return gate_pick(paired.iloc[:, 0].to_numpy(), paired.iloc[:, 1].to_numpy(), selected, gate_se)


def gate_pick(
    mine: np.ndarray, benchmark: np.ndarray, selected: str = "best", gate_se: float = PICK_GATE_SE
) -> PickVerdict:
    """:func:`pick_verdict` from the paired daily validation returns ``(n,)`` of the selected trader
    and of equal weight."""
    scale = math.sqrt(SESSIONS_PER_YEAR)
    edge = _finite((sharpe_per_session(mine) - sharpe_per_session(benchmark)) * scale)
    variance = sharpe_difference_variance(mine, benchmark) if mine.shape[0] >= MIN_SESSIONS else math.nan
    error = _finite(math.sqrt(variance)) if math.isfinite(variance) and variance > 0.0 else None
    in_errors = None if edge is None or error is None else edge / error
    kept = edge is not None and edge > 0.0 and in_errors is not None and in_errors >= gate_se
    measured = (
        f"its validation edge over equal weight, {_signed(edge)} Sharpe, is "
        f"{'unmeasured' if in_errors is None else f'{in_errors:.1f} standard errors'}"
    )
    gate = "above 0" if gate_se == 0.0 else f"at least {gate_se:g}"
    if kept:
        sentence = f"pick: {selected} ({measured})"
    else:
        sentence = (
            f"pick: equal weight, not {selected} ({measured}; the pick needs {gate}): "
            "deploy equal weight, or give the tournament more data or env steps"
        )
    return PickVerdict(
        trader=selected if kept else BENCHMARK_NAME,
        selected=selected,
        edge_sharpe=edge,
        standard_error=error,
        edge_se=_finite(in_errors) if in_errors is not None else None,
        gate_se=gate_se,
        sentence=sentence,
    )
