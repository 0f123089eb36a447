"""``tournament.budget_passes``: a budget in passes over the train segment's bars, resolved to env steps
by the run (the smaller of it and ``budget_env_steps``), recorded in the tournament's config."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from tiny import SEGMENTS, tiny_bars, tiny_spec, write_tiny_dataset

import finpod
from finpod.data.calendar import bar_starts
from finpod.errors import SpecError
from finpod.spec import Spec
from finpod.spec.overrides import apply_overrides
from finpod.spec.sections import DEFAULT_BUDGET_PASSES
from repo import REPO_ROOT

DEMO = REPO_ROOT / "strategies" / "demo.toml"

ROUND_ENV_STEPS = 32 * 4
"""One pod round of the tiny spec: rollout_steps 32 x num_envs 4."""


def _spec(passes: float | None, budget_env_steps: int = 100_000) -> Spec:
    return tiny_spec(Path("unused"), budget_env_steps=budget_env_steps).with_(
        tournament={"budget_passes": passes}
    )


def test_the_budget_is_the_smaller_of_the_steps_and_the_passes() -> None:
    assert _spec(None).env_step_budget(124) == 100_000
    assert _spec(8.0).env_step_budget(124) == 992
    assert _spec(2.5).env_step_budget(3) == 8  # rounded up: 7.5 env steps
    assert _spec(1_000.0, budget_env_steps=5_000).env_step_budget(124) == 5_000
    assert _spec(8.0).tournament_config(train_bars=124).budget_env_steps == 992
    assert _spec(8.0).tournament_config().budget_env_steps == 100_000  # no bars known: the steps alone


@pytest.mark.parametrize("passes", [0.0, -1.0, float("nan"), float("inf")])
def test_a_bad_pass_count_is_one_line_with_the_fix(passes: float) -> None:
    with pytest.raises(SpecError) as caught:
        _spec(passes)
    message = str(caught.value)
    assert message.startswith("tournament.budget_passes")
    assert "fix" in message
    assert "\n" not in message


def test_an_empty_train_segment_cannot_be_passed_over() -> None:
    with pytest.raises(SpecError, match=r"segments\.train: 0 bars.*fix: widen the train segment"):
        _spec(4.0).env_step_budget(0)


def test_a_run_stops_after_its_passes_and_records_the_budget(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", tiny_bars(seed=5))
    train_bars = len(bar_starts("1d", *SEGMENTS["train"]))
    passes = 8.0
    spec = tiny_spec(dataset, budget_env_steps=1_000_000).with_(tournament={"budget_passes": passes})
    result = finpod.run(spec, out=tmp_path / "reports", report=False)

    budget = math.ceil(passes * train_bars)
    config = json.loads((result.run_dir / "tournament" / "config.json").read_text(encoding="utf-8"))
    assert config["tournament"]["budget_env_steps"] == budget
    trained = json.loads((result.run_dir / "run.json").read_text(encoding="utf-8"))["tournament_env_steps"]
    assert budget <= trained < budget + spec.tournament.pool_size * ROUND_ENV_STEPS


def _silent_spec() -> Spec:
    """The demo's spec with no ``[tournament]`` table: every budget at finpod's defaults."""
    raw = Spec.from_toml(DEMO).model_dump(mode="json")
    del raw["tournament"]
    return Spec.from_dict(raw)


def test_a_spec_silent_on_the_budget_stops_after_the_default_passes() -> None:
    silent = _silent_spec()
    assert silent.tournament.budget_passes == DEFAULT_BUDGET_PASSES
    assert silent.env_step_budget(1_512) == math.ceil(DEFAULT_BUDGET_PASSES * 1_512)
    assert silent.env_step_budget(98_280) == silent.tournament.budget_env_steps  # minute bars: the cap
    assert Spec.from_dict(silent.model_dump(mode="json")) == silent  # the resolved spec keeps it


def test_a_stated_env_step_budget_is_taken_at_its_word() -> None:
    assert Spec.from_toml(DEMO).tournament.budget_passes is None  # the demo states its env steps
    silent = _silent_spec()
    in_code = silent.with_(tournament={"budget_env_steps": 5_000})
    assert (in_code.tournament.budget_passes, in_code.env_step_budget(1_512)) == (None, 5_000)
    by_set = apply_overrides(silent, ["tournament.budget_env_steps=7000"])
    assert (by_set.tournament.budget_passes, by_set.env_step_budget(1_512)) == (None, 7_000)
    both = apply_overrides(silent, ["tournament.budget_env_steps=7000", "tournament.budget_passes=2"])
    assert both.env_step_budget(1_512) == 3_024
    passes = apply_overrides(silent, ["tournament.budget_passes=16"])
    assert passes.env_step_budget(1_512) == 16 * 1_512
