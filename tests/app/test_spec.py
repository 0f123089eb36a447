"""Strategy specs: the shipped ones parse and resolve; every bad field is one line naming field and fix."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from finpod.errors import SpecError
from finpod.spec import Spec
from repo import REPO_ROOT

STRATEGIES = REPO_ROOT / "strategies"
DEMO = STRATEGIES / "demo.toml"


@pytest.mark.parametrize("name", ["demo", "nasdaq100_minute", "nasdaq100_daily_pooksoft"])
def test_shipped_specs_parse_resolve_and_round_trip(name: str, tmp_path: Path) -> None:
    spec = Spec.from_toml(STRATEGIES / f"{name}.toml")
    assert spec.name == name
    saved = tmp_path / "spec.toml"
    saved.write_text(spec.to_toml(), encoding="utf-8")
    again = Spec.from_toml(saved)
    assert again.resolved_dict() == spec.resolved_dict()
    assert again.spec_hash() == spec.spec_hash()


def test_reference_minute_spec_has_the_reference_setup() -> None:
    spec = Spec.from_toml(STRATEGIES / "nasdaq100_minute.toml")
    assert spec.frequency == "1min"
    assert spec.universe == "nasdaq100"
    assert spec.env.initial_cash_usd == 1_000_000.0
    assert spec.env.fee_rate == 0.002
    assert [str(d) for d in spec.segments.train] == ["2016-01-01", "2019-11-25"]
    assert [str(d) for d in spec.segments.validation] == ["2019-11-26", "2020-05-25"]
    assert [str(d) for d in spec.segments.backtest] == ["2020-05-26", "2021-05-26"]
    resolved = spec.resolved_dict()
    assert resolved["data"]["path"] == str(REPO_ROOT / "data" / "nasdaq100_1min")  # relative to the spec
    assert resolved["agent"]["hidden_sizes"] == [512, 512]
    assert spec.env.rebalance_band == 0.01
    assert (spec.tournament.validation_chunks, spec.tournament.validation_warmup_bars) == (64, 390)
    assert spec.tournament_config().pool_size == 4  # finpod's own fields stay out of podracer's config


def test_pooksoft_spec_backtest_ends_at_the_data_end() -> None:
    spec = Spec.from_toml(STRATEGIES / "nasdaq100_daily_pooksoft.toml")
    assert str(spec.segments.backtest[1]) == "2021-04-21"


def _demo_raw() -> dict[str, Any]:
    return tomllib.loads(DEMO.read_text(encoding="utf-8"))


BAD_FIELDS = [
    ({"env": {"fee_rate": -0.1}}, "env.fee_rate", "0.002"),
    ({"env": {"fee_rat": 0.1}}, "env.fee_rat", "fee_rate"),
    ({"env": {"max_participation": 0}}, "env.max_participation", "fix:"),
    ({"env": {"action_mode": "long_short"}}, "env.action_mode", "weights"),
    ({"env": {"num_envs": 0}}, "env.num_envs", "fix:"),
    ({"env": {"rebalance_band": 1.0}}, "env.rebalance_band", "0.03"),
    ({"env": {"rebalance_band": -0.01}}, "env.rebalance_band", "fix:"),
    ({"env": {"start_portfolio": "random"}}, "env.start_portfolio", "equal_weight"),
    (
        {"env": {"fully_invested": True}, "agent": {"pathwise_coef": 1.0}},
        "env.fully_invested",
        "pathwise_coef",
    ),
    ({"segments": {"validation": ["2017-06-01", "2018-06-29"]}}, "segments.validation", "order"),
    ({"segments": {"backtest": ["2018-12-31", "2018-07-02"]}}, "segments.backtest", "[first, last]"),
    ({"segments": {"train": ["2016-13-01", "2017-12-29"]}}, "segments.train", "fix:"),
    ({"universe": []}, "universe", "tickers"),
    ({"universe": "sp500"}, "universe", "nasdaq100"),
    ({"universe": ["aapl"]}, "universe", "upper-case"),
    ({"frequency": "5min"}, "frequency", "1d"),
    ({"device": "tpu"}, "device", "auto"),
    ({"name": "my demo"}, "name", "fix:"),
    ({"agent": {"lr": 0.1}}, "agent", "learning_rate"),
    ({"agent": {"gamma": 2.0}}, "agent", "gamma"),
    ({"tournament": {"ensemble_k": 9}}, "tournament.ensemble_k", "leaderboard_size"),
    ({"tournament": {"budget_env_steps": 0}}, "tournament.budget_env_steps", "fix:"),
    ({"tournament": {"perturb_bounds": {"hidden_sizes": [1, 2]}}}, "tournament.perturb_bounds", "gamma"),
    ({"tournament": {"perturb_bounds": {"gamma": [0.99, 0.9]}}}, "tournament.perturb_bounds.gamma", "min"),
    ({"tournament": {"pool_schedule": "thirds"}}, "tournament.pool_schedule", "halving"),
    ({"tournament": {"torch_threads_per_pod": 0}}, "tournament.torch_threads_per_pod", "fix:"),
    ({"tournament": {"halving_floor": 0}}, "tournament.halving_floor", "fix:"),
    ({"tournament": {"leaderboard_after": 1.0}}, "tournament.leaderboard_after", "fix:"),
    ({"tournament": {"backend": "threads"}}, "tournament.backend", "population"),
    ({"agent": {"forecast_coef": -1.0}}, "agent.forecast_coef", "fix:"),
    ({"agent": {"weight_decay": -1.0}}, "agent.weight_decay", "plain Adam"),
    ({"tournament": {"backend": "population", "learners": 2}}, "tournament.learners", "learners = 1"),
    (
        {"agent": {"lr_schedule": "budget"}, "tournament": {"learners": 2}},
        "agent.lr_schedule",
        "learners = 1",
    ),
    ({"agent": {"lr_schedule": "cosine"}}, "agent", "'budget'"),
    ({"data": {"source": "dataset"}}, "data.path", "data.source"),
    ({"data": {"synthetic": {"n_symbols": 0}}}, "data.synthetic.n_symbols", "fix:"),
    ({"data": {"synthetic": {"signal": "wave"}}}, "data.synthetic.signal", "reversal"),
    ({"data": {"synthetic": {"signal_strength": 1.5}}}, "data.synthetic.signal_strength", "fix:"),
    ({"seed": -1}, "seed", "fix:"),
    ({"env": {"risk_penalty": float("inf")}}, "env.risk_penalty", "finite"),
    ({"env": {"initial_cash_usd": float("inf")}}, "env.initial_cash_usd", "finite"),
    ({"agent": {"max_grad_norm": float("inf")}}, "agent.max_grad_norm", "finite"),
    ({"agent": {"rollout_steps": 1, "num_minibatches": 2}, "env": {"num_envs": 1}}, "agent", "env.num_envs"),
]


def _merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and key in out else value
    return out


@pytest.mark.parametrize(("update", "field", "hint"), BAD_FIELDS)
def test_bad_field_is_one_line_naming_field_and_fix(
    update: dict[str, Any], field: str, hint: str, tmp_path: Path
) -> None:
    import tomli_w

    path = tmp_path / "bad.toml"
    path.write_text(tomli_w.dumps(_merge(_demo_raw(), update)), encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        Spec.from_toml(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: {field}")
    assert "fix" in message
    assert hint in message
    assert "<= 0" not in message  # no fix that cannot work


def test_missing_required_field_and_bad_toml(tmp_path: Path) -> None:
    raw = _demo_raw()
    del raw["frequency"]
    import tomli_w

    missing = tmp_path / "missing.toml"
    missing.write_text(tomli_w.dumps(raw), encoding="utf-8")
    with pytest.raises(SpecError, match=r"frequency: required field missing; fix: set frequency"):
        Spec.from_toml(missing)
    broken = tmp_path / "broken.toml"
    broken.write_text("name = [", encoding="utf-8")
    with pytest.raises(SpecError, match="not valid TOML"):
        Spec.from_toml(broken)
    with pytest.raises(SpecError, match="spec file not found"):
        Spec.from_toml(tmp_path / "nope.toml")


def test_dataset_path_is_relative_to_the_spec_file_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tomli_w

    (tmp_path / "specs" / "mydata").mkdir(parents=True)
    raw = _merge(_demo_raw(), {"data": {"source": "dataset", "path": "mydata"}})
    spec_file = tmp_path / "specs" / "s.toml"
    spec_file.write_text(tomli_w.dumps(raw), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert Spec.from_toml(spec_file).dataset_path() == (tmp_path / "specs" / "mydata").resolve()
    missing = Spec.from_toml(spec_file).with_(data={"path": "elsewhere"})
    with pytest.raises(SpecError, match=r"data\.path: dataset folder not found"):
        missing.dataset_path()
    (tmp_path / "specs" / "bars.csv").write_text("timestamp\n")
    a_file = Spec.from_toml(spec_file).with_(data={"path": "bars.csv"})
    with pytest.raises(SpecError) as caught:
        a_file.dataset_path()
    assert str(caught.value) == (
        f"{spec_file.resolve()}: data.path: {(tmp_path / 'specs' / 'bars.csv').resolve()} ('bars.csv' from "
        f"{spec_file.resolve().parent}) is a file, not a dataset folder; fix: point data.path at the folder "
        "`finpod data import|fetch|synth` wrote (it holds manifest.json and bars.parquet)"
    )


def test_with_merges_sections_and_revalidates() -> None:
    spec = Spec.from_toml(DEMO)
    changed = spec.with_(tournament={"budget_env_steps": 1234}, seed=5)
    assert changed.tournament.budget_env_steps == 1234
    assert changed.tournament.pool_size == spec.tournament.pool_size
    assert changed.seed == 5
    assert changed.spec_hash() != spec.spec_hash()
    with pytest.raises(SpecError, match=r"env\.fee_rate"):
        spec.with_(env={"fee_rate": -1})


def test_rebalance_band_reaches_the_env_config() -> None:
    spec = Spec.from_toml(DEMO).with_(env={"rebalance_band": 0.04})
    assert spec.env_config(random_start=True).rebalance_band == 0.04
    assert spec.with_(env={"rebalance_band": 0.0}).env_config(random_start=False).rebalance_band == 0.0


def test_tournament_settings_reach_the_engine() -> None:

    spec = Spec.from_toml(DEMO).with_(
        tournament={
            "pool_schedule": "fixed",
            "torch_threads_per_pod": 2,
            "perturb_bounds": {"gamma": [0.98, 0.995]},
            "leaderboard_after": 0.5,
        }
    )
    config = spec.tournament_config()
    assert config.leaderboard_after == 0.5
    assert config.pool_schedule == "fixed"
    assert config.torch_threads_per_pod == 2
    assert config.perturb_bounds["gamma"] == (0.98, 0.995)
    assert config.seed == spec.seed


def test_validation_chunks_default_by_bar_size_and_a_stated_value_is_kept() -> None:
    segments = {
        "train": ["2016-01-04", "2017-12-29"],
        "validation": ["2018-01-02", "2018-06-29"],
        "backtest": ["2018-07-02", "2018-12-31"],
    }

    def chunks(frequency: str, **tournament: int) -> tuple[int, int]:
        spec = Spec.from_dict(
            {"name": "c", "frequency": frequency, "segments": segments, "tournament": tournament}
        )
        return spec.tournament.validation_chunks, spec.tournament.validation_warmup_bars

    assert chunks("1d") == (16, 5)
    assert chunks("1min") == (1, 390)
    assert chunks("1d", validation_chunks=1) == (1, 5)
    assert chunks("1min", validation_chunks=64) == (64, 390)


def test_a_new_bar_size_chooses_its_own_default_validation_chunks_but_keeps_stated_ones() -> None:
    segments = {
        "train": ["2016-01-04", "2017-12-29"],
        "validation": ["2018-01-02", "2018-06-29"],
        "backtest": ["2018-07-02", "2018-12-31"],
    }
    daily = Spec.from_dict({"name": "c", "frequency": "1d", "segments": segments})
    minute = daily.with_(frequency="1min")
    assert (minute.tournament.validation_chunks, minute.tournament.validation_warmup_bars) == (1, 390)
    back = minute.with_(frequency="1d")
    assert (back.tournament.validation_chunks, back.tournament.validation_warmup_bars) == (16, 5)
    stated = daily.with_(tournament={"validation_chunks": 4}).with_(frequency="1min")
    assert (stated.tournament.validation_chunks, stated.tournament.validation_warmup_bars) == (4, 5)


def test_the_learning_rate_is_constant_unless_a_spec_asks_and_fusion_keeps_it_constant() -> None:
    segments = {
        "train": ["2016-01-04", "2017-12-29"],
        "validation": ["2018-01-02", "2018-06-29"],
        "backtest": ["2018-07-02", "2018-12-31"],
    }

    def schedule(frequency: str, agent: dict[str, Any] | None = None, learners: int = 1) -> str:
        spec = Spec.from_dict(
            {
                "name": "s",
                "frequency": frequency,
                "segments": segments,
                "agent": agent or {},
                "tournament": {"learners": learners},
            }
        )
        assert spec.resolved_dict()["agent"]["lr_schedule"] == spec.agent_config().lr_schedule
        return spec.agent_config().lr_schedule

    assert schedule("1d") == "constant"
    assert schedule("1min") == "constant"
    assert schedule("1d", {"lr_schedule": "budget"}) == "budget"
    assert schedule("1min", {"lr_schedule": "budget"}) == "budget"
    assert schedule("1d", learners=2) == "constant"


def test_an_invested_start_is_for_training_episodes_only_and_cash_hashes_as_before(tmp_path: Path) -> None:
    import tomli_w

    spec = Spec.from_toml(DEMO)
    assert spec.env.start_portfolio == "cash"
    path = tmp_path / "invested.toml"
    path.write_text(
        tomli_w.dumps(_merge(_demo_raw(), {"env": {"start_portfolio": "equal_weight"}})), encoding="utf-8"
    )
    invested = Spec.from_toml(path)
    assert invested.env_config(random_start=True).start_portfolio == "equal_weight"
    assert invested.env_config(random_start=False).start_portfolio == "cash", "a backtest starts in cash"
    assert invested.spec_hash() != spec.spec_hash()
    stated = tmp_path / "cash.toml"
    stated.write_text(
        tomli_w.dumps(_merge(_demo_raw(), {"env": {"start_portfolio": "cash"}})), encoding="utf-8"
    )
    assert Spec.from_toml(stated).spec_hash() == spec.spec_hash()


def test_fully_invested_hashes_as_before_when_off(tmp_path: Path) -> None:
    import tomli_w

    spec = Spec.from_toml(DEMO)
    assert spec.env.fully_invested is False
    path = tmp_path / "mandate.toml"
    raw = _merge(_demo_raw(), {"env": {"fully_invested": True}, "agent": {"pathwise_coef": 0.0}})
    path.write_text(tomli_w.dumps(raw), encoding="utf-8")
    mandated = Spec.from_toml(path)
    assert mandated.env_config(random_start=False).fully_invested, "backtests keep the mandate"
    assert mandated.spec_hash() != spec.spec_hash()
    off = tmp_path / "off.toml"
    off.write_text(tomli_w.dumps(_merge(_demo_raw(), {"env": {"fully_invested": False}})), encoding="utf-8")
    assert Spec.from_toml(off).spec_hash() == spec.spec_hash()


def test_the_rotation_aversion_reaches_the_agent_and_hashes_as_before_at_one(tmp_path: Path) -> None:
    """``agent.pathwise_cost`` (podracer's rotation aversion) is a PPO setting like any other; at its
    default of 1 a spec hashes as it did before the setting existed, so its unfinished runs resume."""
    import tomli_w

    spec = Spec.from_toml(DEMO)
    assert spec.agent_config().pathwise_cost == 1.0
    for value, same in ((1, True), (1.0, True), (3.0, False)):
        path = tmp_path / f"cost{value}.toml"
        path.write_text(
            tomli_w.dumps(_merge(_demo_raw(), {"agent": {"pathwise_cost": value}})), encoding="utf-8"
        )
        stated = Spec.from_toml(path)
        assert stated.agent_config().pathwise_cost == float(value)
        assert (stated.spec_hash() == spec.spec_hash()) is same
    bad = tmp_path / "bad.toml"
    bad.write_text(tomli_w.dumps(_merge(_demo_raw(), {"agent": {"pathwise_cost": -1.0}})), encoding="utf-8")
    with pytest.raises(
        SpecError, match=r"agent.pathwise_cost: must be in >= 0.0, got -1.0; fix: set agent.pathwise_cost"
    ):
        Spec.from_toml(bad)
