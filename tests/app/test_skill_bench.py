"""``finpod bench skill``: its cases are valid specs, its medians are right, its flags fail in one line."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from clirun import run_cli
from finpod.bench.skill_bench import (
    CASES,
    ContenderResult,
    SeedResult,
    bench_spec,
    probe_problem,
    run_seed,
    snapshot_summary,
    summarise,
)
from finpod.bench.skill_names import CASE_NAMES
from finpod.bench.skill_plot import plot_curves
from finpod.errors import SpecError
from finpod.oracle import equal_weight_policy, returns_sharpe
from finpod.spec import TournamentSpec


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("hyper", ["good", "poor"])
def test_every_case_is_a_valid_spec(name: str, hyper: str) -> None:
    spec = bench_spec(CASES[name], seed=3, hyper=hyper)
    assert spec.data.synthetic.signal == CASES[name].signal.kind
    assert spec.data.synthetic.signal_strength == CASES[name].signal.strength
    assert spec.data.synthetic.alpha_annual == 0.0
    assert spec.env.reward == "excess_log_return"
    assert spec.env.fee_rate == CASES[name].fee_rate
    assert spec.agent["policy"] == "cross_sectional"
    assert spec.agent["learning_rate"] == (3e-2 if hyper == "poor" else 3e-3)


def test_the_case_grid_covers_kinds_strengths_fees_nulls_and_the_minute_case() -> None:
    assert tuple(CASES) == CASE_NAMES
    daily = [case for case in CASES.values() if case.frequency == "1d" and case.signal.strength < 0.1]
    assert {case.signal.kind for case in daily} >= {"reversal", "reversal_5", "volume", "nonlinear", "none"}
    assert {case.signal.strength for case in daily} == {0.0, 0.02, 0.05}
    assert {case.fee_rate for case in daily} == {0.0005, 0.002}
    assert {case.n_symbols for case in daily} == {20, 100}
    minute = CASES["minute20"]
    assert (minute.signal.strength, minute.fee_rate, minute.rebalance_band) == (0.02, 0.002, 0.01)
    assert CASES["daily20-nonlinear-ic05-20bp"].signal.kind == "nonlinear"


def test_defaults_leave_training_to_finpod_and_set_overrides_every_spec() -> None:
    case = CASES["daily20-reversal-ic05-5bp"]
    defaults = bench_spec(case, seed=0, hyper="defaults")
    assert not defaults.agent  # finpod's PPO defaults, as a silent [agent] gets
    assert defaults.tournament.pool_size == TournamentSpec().pool_size
    assert defaults.tournament.budget_env_steps == case.budget_env_steps
    changed = bench_spec(case, seed=0, hyper="good", overrides=["agent.learning_rate=1e-3"])
    assert changed.agent["learning_rate"] == 1e-3
    with pytest.raises(SpecError, match="--set"):
        bench_spec(case, seed=0, hyper="good", overrides=["tournament.pool_size=0"])
    table = bench_spec(case, 0, "good", overrides=["tournament.perturb_bounds={gamma = [0.9, 0.999]}"])
    assert table.tournament.perturb_bounds["gamma"] == (0.9, 0.999)  # merged into the table's others
    with pytest.raises(SpecError, match=r"not a TOML table or array; fix: write TOML"):
        bench_spec(case, 0, "good", overrides=['tournament.perturb_bounds={"gamma": [0.9, 0.999]}'])


def test_a_seed_records_oracle_fit_linear_share_and_a_learning_curve() -> None:
    """A tiny budget end to end: the references and the curve are filled in (not a skill figure)."""
    case = CASES["daily20-smoke"]
    found = run_seed(
        case, 0, ["single"], ["good"], overrides=["tournament.budget_env_steps=1024"], snapshots=True
    )
    assert found.oracle["fit_segment"] == "train"
    assert set(found.oracle["params"]) == {"tilt", "top_fraction", "band"}
    assert found.oracle_sharpe > found.equal_weight_sharpe
    assert math.isfinite(found.linear_share)
    assert set(found.linear) == {"ridge", "trading"}
    single = found.contenders["good/single"]
    assert single.env_steps >= 1024
    assert single.curve
    steps = [point[0] for point in single.curve]
    assert steps == sorted(steps)
    assert all(math.isfinite(point[2]) for point in single.curve)
    equal = found.equal_weight_sharpe
    assert single.curve[-1][3] == pytest.approx(single.curve[-1][2] * (found.oracle_sharpe - equal))
    summary = summarise([found])[case.name]
    assert summary["linear_share"] == pytest.approx(found.linear_share)
    # every validated policy traded on the held-out bars: the best on validation is the curve's last
    assert [row[0] for row in single.snapshots] == list(range(1, single.num_trials + 1))
    best = max(single.snapshots, key=lambda row: row[2])
    assert best[4] == pytest.approx(single.curve[-1][2])
    assert "validated policies" in snapshot_summary(single.snapshots)
    assert all(-1.0 <= row[5] <= 1.0 and -1.0 <= row[6] <= 1.0 for row in single.snapshots)  # score ICs
    # the continuous validation pass against equal weight's: Sharpe, shrunk Sharpe, tracking error
    assert all(len(row) == 13 and math.isfinite(row[7]) and math.isfinite(row[8]) for row in single.snapshots)
    assert all(row[9] >= 0.0 and row[11] >= 0.0 for row in single.snapshots)
    best_row = max(single.snapshots, key=lambda row: row[2])
    assert best_row[12] == pytest.approx(single.curve[-1][3])  # held-out Sharpe - EW of the pick
    assert "best on shrunk validation Sharpe" in snapshot_summary(single.snapshots)
    assert found.oracle_edge_se > 0.0
    assert found.informative  # the smoke market's strong signal: the ceiling is far above equal weight
    # the run's pick: best's held-out figures, or equal weight's when best did not show its edge
    assert single.sharpe["pick"] in (single.sharpe["best"], found.equal_weight_sharpe)
    assert single.pick["selected"] == "best"
    assert (single.sharpe["pick"] == single.sharpe["best"]) == (single.pick["trader"] == "best")
    # what costs took, beside equal weight's: a trader's Sharpe before costs is above its Sharpe
    assert set(single.cost_pct_year) == set(single.sharpe) == set(single.gross_sharpe)
    assert all(cost >= 0.0 for cost in single.cost_pct_year.values())
    assert all(single.gross_sharpe[t] >= single.sharpe[t] for t in single.sharpe)
    assert single.cost_pct_year["best"] > 0.0
    assert 0.0 <= found.equal_weight_cost_pct_year < single.cost_pct_year["best"]
    assert found.equal_weight_gross_sharpe >= found.equal_weight_sharpe


def test_with_a_leaderboard_window_the_curve_picks_only_what_the_board_could_rank() -> None:
    """``tournament.leaderboard_after``: the curve (what selection would pick so far) has no point
    before the window, as the tournament's board has no entry then."""
    case = CASES["daily20-smoke"]
    budget = 4096
    found = run_seed(
        case,
        0,
        ["tournament"],
        ["good"],
        overrides=[f"tournament.budget_env_steps={budget}", "tournament.leaderboard_after=0.5"],
    )
    tournament = found.contenders["good/tournament"]
    assert tournament.curve
    assert min(point[0] for point in tournament.curve) >= 0.5 * budget
    assert tournament.num_trials > len(tournament.curve)
    # the trajectory behind the pick's gate (a measurement): its held-out figures or equal weight's
    assert tournament.sharpe["pick_trajectory"] in (
        tournament.sharpe["trajectory"],
        found.equal_weight_sharpe,
    )


def test_the_snapshot_summary_averages_each_quarter_and_names_the_picks() -> None:
    rows = [
        [1, 10.0, 1.0, "pod_0", 0.1],
        [2, 20.0, 3.0, "pod_1", 0.3],  # the best on validation, early
        [3, 70.0, 2.0, "pod_0", 0.5],  # the best on validation in the second half
        [4, 100.0, 1.5, "pod_1", 0.7],
    ]
    line = snapshot_summary(rows)
    assert "4 validated policies" in line
    assert "by quarter of the run +0.20, -, +0.50, +0.70" in line
    assert "best on validation +0.30 (at 20 s)" in line
    assert "in the second half +0.50" in line
    assert "IC" not in line  # rows without the score ICs
    with_ics = [[*row, 0.01, 0.02 * row[0]] for row in rows]
    assert "(held-out score IC +0.030, -, +0.060, +0.080)" in snapshot_summary(with_ics)
    assert "shrunk" not in snapshot_summary(with_ics)
    shrunk = [[*row, 1.0, 1.0 + 0.1 * (row[0] == 4), 0.05] for row in with_ics]  # the last shrinks least
    assert "best on shrunk validation Sharpe +0.70" in snapshot_summary(shrunk)


def _result(sharpe: float, share: float) -> ContenderResult:
    return ContenderResult(
        sharpe={"best": sharpe},
        share={"best": share},
        dsr={"best": 0.5},
        num_trials=3,
        env_steps=100,
        seconds=2.0,
    )


def test_medians_over_seeds_ignore_missing_shares() -> None:
    results = [
        SeedResult("daily20-smoke", seed, 3.0 + seed, 1.0, {"good/single": _result(1.0 + seed, share)})
        for seed, share in enumerate([0.2, 0.8, math.nan])
    ]
    summary = summarise(results)["daily20-smoke"]
    assert summary["oracle_sharpe"] == 4.0
    row = summary["contenders"]["good/single"]
    assert row["sharpe"]["best"] == 2.0
    assert row["share"]["best"] == pytest.approx(0.5)
    assert row["dsr_max"]["best"] == 0.5
    assert row["share_per_seed"]["best"][:2] == [0.2, 0.8]
    assert summary["informative_seeds"] == []  # no standard error known: no seed is informative
    assert math.isnan(row["share_informative"]["best"])


def test_the_informative_median_counts_only_seeds_whose_ceiling_beats_equal_weight() -> None:
    """A share is a ratio to the oracle's held-out edge: seeds where that edge is within two
    standard errors of 0 are left out of ``share_informative`` (and listed in neither median's
    favour: ``share`` keeps them all)."""
    edges = [(2.0, 0.25, 0.6), (1.1, 0.25, -5.2), (1.9, 0.3, 0.9)]  # (oracle Sharpe, SE, share)
    results = [
        SeedResult(
            "daily20-smoke", seed, oracle, 1.0, {"good/single": _result(1.0, share)}, oracle_edge_se=se
        )
        for seed, (oracle, se, share) in enumerate(edges)
    ]
    assert [r.informative for r in results] == [True, False, True]
    assert results[1].oracle_edge_z == pytest.approx(0.4)
    summary = summarise(results)["daily20-smoke"]
    assert summary["informative_seeds"] == [0, 2]
    row = summary["contenders"]["good/single"]
    assert row["share_informative"]["best"] == pytest.approx(0.75)
    assert row["share"]["best"] == pytest.approx(0.6)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--case", "weekly"), "--case 'weekly'"),
        (("--contender", "swarm"), "--contender 'swarm'"),
        (("--hyper", "great"), "--hyper 'great'"),
        (("--seeds", "0"), "--seeds must be >= 1"),
    ],
)
def test_bad_flags_are_one_line_errors(args: tuple[str, ...], message: str) -> None:
    result = run_cli("bench", "skill", *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_learning_curves_plot_shares_and_a_null_case_s_excess_sharpe(tmp_path: Path) -> None:
    curve = [[512.0, 3.0, 0.2, 0.1], [1024.0, 6.0, 0.6, 0.3]]
    edge = ContenderResult(
        sharpe={"best": 1.3}, share={"best": 0.6}, dsr={"best": 0.9}, num_trials=2, env_steps=1024,
        seconds=6.0, curve=curve,
    )  # fmt: skip
    results = [
        SeedResult("daily20-reversal-ic05-5bp", 0, 1.5, 1.0, {"good/single": edge}, 1.2, 0.4),
        SeedResult("daily20-none-5bp", 0, 1.0, 1.0, {"good/single": edge}, 0.9, math.nan),
    ]
    written = plot_curves(results, tmp_path / "plots" / "curves.png")
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_overlapping_held_out_passes_leave_their_union_out_of_the_clock() -> None:
    """Pods validate in their own threads: two passes that overlap exclude the wall time they
    cover together, once (the sum would exclude more time than passed)."""
    from finpod.bench.skill_bench import ExcludedTime

    now = [0.0]
    told: list[float] = []
    excluded = ExcludedTime(clock=lambda: now[0])
    excluded.on_period = told.append
    excluded.begin()  # pass A: 0 s .. 14 s
    now[0] = 10.0
    excluded.begin()  # pass B: 10 s .. 13 s, inside A
    now[0] = 12.0
    assert excluded.so_far() == 12.0
    now[0] = 13.0
    excluded.end()
    assert told == []
    now[0] = 14.0
    excluded.end()
    assert told == [14.0]
    assert excluded.seconds == 14.0
    now[0] = 20.0
    excluded.begin()
    now[0] = 21.5
    excluded.end()
    assert told == [14.0, 1.5]
    assert excluded.so_far() == 15.5


def test_probe_problem_keeps_the_oracle_it_scored() -> None:
    """The probes trade the very oracle whose held-out Sharpe the shares are measured against."""
    _, problem = probe_problem("daily20-reversal_5-ic05-5bp", 0)
    assert problem.oracle_policy is not None
    assert returns_sharpe(problem.held_out(problem.oracle_policy)) == problem.oracle_sharpe
    assert problem.oracle_sharpe > problem.equal_weight_sharpe  # the planted edge is the ceiling's


def test_a_score_ic_ranks_the_oracle_above_equal_weight() -> None:
    """The snapshots' score IC: the oracle's target weights rank the next bar's returns on both
    segments; equal weight ranks nothing (its log weights are flat: IC 0)."""
    case, problem = probe_problem("daily20-reversal_5-ic05-5bp", 0)
    assert problem.oracle_policy is not None
    for segment in ("validation", "backtest"):
        assert 0.0 < problem.score_ic(problem.oracle_policy, segment) < 1.0
        assert problem.score_ic(equal_weight_policy(case.n_symbols), segment) == pytest.approx(0.0, abs=1e-12)
