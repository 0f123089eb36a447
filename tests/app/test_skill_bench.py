"""``finpod bench skill``: its cases are valid specs, its medians are right, its flags fail in one line."""

from __future__ import annotations

import math

import pytest

from clirun import run_cli
from finpod.bench.skill_bench import CASES, ContenderResult, SeedResult, bench_spec, summarise


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
