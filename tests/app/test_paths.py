"""Paths: spec-relative data paths, outputs under the current folder or FINPOD_HOME, `finpod init`."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest

from clirun import run_cli
from finpod.errors import SpecError
from finpod.paths import default_data_root, default_reports_root, example_specs
from finpod.spec import Spec
from repo import STRATEGIES


def test_relative_data_path_resolves_against_the_spec_files_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "data" / "bars").mkdir(parents=True)
    (project / "specs").mkdir()
    text = (STRATEGIES / "nasdaq100_daily_pooksoft.toml").read_text(encoding="utf-8")
    spec_file = project / "specs" / "mine.toml"
    spec_file.write_text(text.replace('"../data/pooksoft_daily"', '"../data/bars"'), encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    spec = Spec.from_toml(spec_file)
    assert spec.dataset_path() == (project / "data" / "bars").resolve()
    # a spec built in code has no file: its relative path is taken from the current folder
    in_code = Spec.from_dict(spec.model_dump(mode="json"))
    with pytest.raises(SpecError, match="dataset folder not found") as missing:
        in_code.dataset_path()
    assert str((tmp_path / "data" / "bars").resolve()) in str(missing.value)


def test_default_data_and_reports_roots_follow_cwd_and_finpod_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FINPOD_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_data_root() == tmp_path.resolve() / "data"
    assert default_reports_root() == tmp_path.resolve() / "reports"
    monkeypatch.setenv("FINPOD_HOME", str(tmp_path / "home"))
    assert default_data_root() == (tmp_path / "home" / "data").resolve()
    assert default_reports_root() == (tmp_path / "home" / "reports").resolve()


def test_example_specs_ship_in_the_package_and_match_the_checkout() -> None:
    shipped = {path.name: path for path in example_specs()}
    assert {"demo.toml", "nasdaq100_minute.toml", "nasdaq100_daily_pooksoft.toml", "README.md"} <= set(
        shipped
    )
    for name, path in shipped.items():
        assert filecmp.cmp(path, STRATEGIES / name, shallow=False), name


def test_init_copies_the_examples_refuses_to_overwrite_and_force_does(tmp_path: Path) -> None:
    target = tmp_path / "proj"
    first = run_cli("init", str(target))
    assert first.exit_code == 0, first.stderr
    demo = target / "strategies" / "demo.toml"
    assert Spec.from_toml(demo).name == "demo"
    assert "finpod run" in first.stderr
    demo.write_text("edited", encoding="utf-8")
    again = run_cli("init", str(target))
    assert again.exit_code == 2
    assert "already exists" in again.stderr
    assert "--force" in again.stderr
    assert demo.read_text(encoding="utf-8") == "edited"
    forced = run_cli("init", str(target), "--force")
    assert forced.exit_code == 0, forced.stderr
    assert Spec.from_toml(demo).name == "demo"


def test_version_and_verbosity_flags() -> None:
    import finpod

    version = run_cli("--version")
    assert version.exit_code == 0
    assert version.stdout.strip() == f"finpod {finpod.__version__}"
    both = run_cli("-q", "-v", "init", "--help")
    assert both.exit_code == 2
    assert "contradict" in both.stderr


def test_the_version_is_the_installed_distribution_s(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    import finpod
    from finpod import version

    assert finpod.__version__ == importlib.metadata.version("finpod")

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(version, "version", not_installed)
    assert version._installed_version() == version.UNKNOWN_VERSION
