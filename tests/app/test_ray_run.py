"""Ray placement settings of ``finpod run`` that are wrong fail in one line with exit 2 (no cluster needed).

The run on a real Ray cluster is in ``test_cli.py``, beside the local run it is compared with.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny import tiny_bars, tiny_spec, write_tiny_dataset

from clirun import run_cli


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    """The tiny spec, written as TOML."""
    dataset = write_tiny_dataset(tmp_path / "data", tiny_bars(seed=7))
    path = tmp_path / "tiny.toml"
    path.write_text(tiny_spec(dataset).to_toml(), encoding="utf-8")
    return path


def test_an_unreachable_cluster_is_one_line_and_exit_2(spec_file: Path, tmp_path: Path) -> None:
    result = run_cli(
        "run", str(spec_file), "--out", str(tmp_path / "r"), "--backend", "ray", "--address", "127.0.0.1:1"
    )
    assert result.exit_code == 2
    assert (
        "tournament.backend = 'ray': cannot start or join the Ray cluster at '127.0.0.1:1'" in result.stderr
    )
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_address_without_the_ray_backend_names_the_fix(spec_file: Path, tmp_path: Path) -> None:
    result = run_cli("run", str(spec_file), "--out", str(tmp_path / "r"), "--address", "auto")
    assert result.exit_code == 2
    assert 'fix: set backend = "ray"' in result.stderr


def test_learners_change_the_run_but_stay_out_of_the_tournament_config(spec_file: Path) -> None:
    from finpod.spec import Spec

    spec = Spec.from_toml(spec_file)
    fused = spec.with_(tournament={"learners": 2})
    assert fused.spec_hash() != spec.spec_hash()  # more data per round: another run
    assert fused.tournament_config() == spec.tournament_config()
    placed = spec.with_(tournament={"backend": "ray", "cpus_per_pod": 2.0})
    assert placed.spec_hash() == spec.spec_hash()  # where pods run: the same run


def test_populations_on_ray_need_the_ray_backend_and_fit_a_gpu(spec_file: Path, tmp_path: Path) -> None:
    result = run_cli(
        "run", str(spec_file), "--out", str(tmp_path / "r"), "--set", "tournament.pods_per_worker=4"
    )
    assert result.exit_code == 2
    assert "pods_per_worker: 4 pods a Ray actor is set but backend is" in result.stderr
    assert 'fix: set backend = "ray"' in result.stderr
    result = run_cli(
        "run",
        str(spec_file),
        "--out",
        str(tmp_path / "r"),
        "--backend",
        "ray",
        "--set",
        "tournament.pods_per_worker=4",
        "--set",
        "tournament.gpus_per_pod=0.5",
    )
    assert result.exit_code == 2
    assert "fix: set gpus_per_pod <= 0.25 (1 / pods_per_worker: one population a GPU)" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    from finpod.spec import Spec

    spec = Spec.from_toml(spec_file)
    placed = spec.with_(tournament={"backend": "ray", "pods_per_worker": 8, "gpus_per_pod": 0.125})
    assert placed.spec_hash() == spec.spec_hash()  # where pods run: the same run


def test_a_flag_wins_over_a_set_of_the_same_field_and_errors_name_both(spec_file: Path) -> None:
    from finpod.errors import SpecError
    from finpod.spec import Spec
    from finpod.spec.overrides import apply_overrides

    spec = Spec.from_toml(spec_file)
    flag = {"--backend": ("tournament", "backend", "ray")}
    resolved = apply_overrides(spec, ['tournament.backend="local"', "tournament.pods_per_worker=2"], flag)
    assert resolved.tournament.backend == "ray"
    assert resolved.tournament.pods_per_worker == 2
    local = {"--backend": ("tournament", "backend", "local")}
    with pytest.raises(SpecError, match=r"^--set tournament.pods_per_worker=2 --backend local: "):
        apply_overrides(spec, ["tournament.pods_per_worker=2"], local)
