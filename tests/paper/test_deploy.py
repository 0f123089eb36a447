"""The deploy/paper examples run the command this package has, with keys from the environment only."""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path

import yaml
from typer.testing import CliRunner

from finpod.cli import app

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "paper"


def _paper_args_accepted(args: list[str]) -> None:
    result = CliRunner().invoke(app, ["paper", *args, "--help"])
    assert result.exit_code == 0, result.output


def test_kubernetes_runs_one_trader_with_keys_from_a_secret() -> None:
    manifest = yaml.safe_load((DEPLOY / "kubernetes.yaml").read_text())
    spec = manifest["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"]["type"] == "Recreate"
    container = spec["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "alpaca-paper-keys"}}]
    assert "APCA" not in str(container.get("env", ""))
    _paper_args_accepted(container["args"])


def test_systemd_unit_reads_keys_from_a_root_only_file() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read_string((DEPLOY / "finpod-paper@.service").read_text())
    service = unit["Service"]
    assert service["EnvironmentFile"] == "/etc/finpod/alpaca.env"
    assert service["KillSignal"] == "SIGTERM"
    assert service["RestartPreventExitStatus"] == "2"  # the CLI's user-error status: no restart loop
    command = shlex.split(service["ExecStart"])
    assert command[0].endswith("/finpod")
    assert command[1] == "paper"
    _paper_args_accepted(command[2:])


def test_dockerfile_enters_finpod_paper_and_carries_no_key() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["finpod", "paper"]' in text
    assert "STOPSIGNAL SIGTERM" in text
    assert "APCA_API_SECRET_KEY=" not in text.replace(
        "# alpaca.env holds APCA_API_KEY_ID=... and APCA_API_SECRET_KEY=...", ""
    )
