"""``finpod bench skill``: its cases are valid specs, its medians are right, its flags fail in one line."""

from __future__ import annotations

import math

import pytest

from clirun import run_cli
from finpod.bench.skill_bench import (
    CASES,
    ContenderResult,
    SeedResult,
    agent_changes_for,
    bench_spec,
    summarise,
    with_overrides,
)
from finpod.errors import SpecError


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("hyper", ["good", "poor"])
def test_every_case_is_a_valid_spec(name: str, hyper: str) -> None:
    spec = bench_spec(CASES[name], seed=3, hyper=hyper)
    assert spec.data.synthetic.signal == CASES[name].signal.kind
    assert spec.data.synthetic.alpha_annual == 0.0
    assert spec.env.reward == "excess_log_return"
    assert spec.agent["policy"] == "cross_sectional"
    assert spec.agent["learning_rate"] == (3e-2 if hyper == "poor" else 3e-3)


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
        SeedResult("daily20", seed, 3.0 + seed, 1.0, {"good/single": _result(1.0 + seed, share)})
        for seed, share in enumerate([0.2, 0.8, math.nan])
    ]
    summary = summarise(results)["daily20"]
    assert summary["oracle_sharpe"] == 4.0
    row = summary["contenders"]["good/single"]
    assert row["sharpe"]["best"] == 2.0
    assert row["share"]["best"] == pytest.approx(0.5)
    assert row["dsr_max"]["best"] == 0.5
    assert row["share_quartiles"]["best"] == pytest.approx([0.35, 0.65])  # of the two finite shares


def test_share_quartiles_and_range_over_five_seeds() -> None:
    results = [
        SeedResult("daily20", seed, 3.0, 1.0, {"good/single": _result(1.0, share)})
        for seed, share in enumerate([0.1, 0.9, 0.5, 1.3, 0.7])
    ]
    row = summarise(results)["daily20"]["contenders"]["good/single"]
    assert row["share_quartiles"]["best"] == pytest.approx([0.5, 0.9])
    assert row["share_min_max"]["best"] == [0.1, 1.3]


def test_overrides_change_the_signal_budget_and_agent() -> None:
    case = with_overrides(CASES["daily20"], signal_strength=0.05, budget_env_steps=4096)
    assert (case.signal.kind, case.signal.strength, case.budget_env_steps) == ("reversal", 0.05, 4096)
    assert with_overrides(CASES["daily20"], None, None) == CASES["daily20"]
    spec = bench_spec(case, seed=1, hyper="poor", agent_changes=agent_changes_for(0.125))
    assert spec.data.synthetic.signal_strength == 0.05
    assert spec.tournament.budget_env_steps == 4096
    assert (spec.agent["h_term_coef"], spec.agent["learning_rate"]) == (0.125, 3e-2)
    assert agent_changes_for(None) == {}
    with pytest.raises(SpecError, match="no signal"):
        with_overrides(CASES["daily20-none"], 0.05, None)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--case", "weekly"), "--case 'weekly'"),
        (("--contender", "swarm"), "--contender 'swarm'"),
        (("--hyper", "great"), "--hyper 'great'"),
        (("--seeds", "0"), "--seeds must be >= 1"),
        (("--h-term-coef", "-0.5"), "--h-term-coef -0.5: must be >= 0"),
        (("--signal-strength", "2"), "--signal-strength 2.0: must be in [0, 0.9]"),
        (("--budget-env-steps", "0"), "--budget-env-steps must be >= 1"),
        (("--case", "daily20-none", "--signal-strength", "0.05"), "case 'daily20-none' has no signal"),
    ],
)
def test_bad_flags_are_one_line_errors(args: tuple[str, ...], message: str) -> None:
    result = run_cli("bench", "skill", *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
