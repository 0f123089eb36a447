"""deploy/kuberay: the RayJob manifest and its image definition, checked structurally (no cluster here).

No Kubernetes API server or kubectl is reachable from the tests, so the manifest is parsed with PyYAML
and checked against what KubeRay needs and what finpod needs: a ``ray.io/v1`` RayJob whose head runs
``finpod run`` on the Ray backend, worker groups with resources, one image built by the Dockerfile
on the Ray version constraints.txt pins, and the reports volume claimed by the other manifest.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from finpod.spec import Spec

REPO = Path(__file__).resolve().parents[2]
KUBERAY = REPO / "deploy" / "kuberay"


def _load(name: str) -> dict[str, Any]:
    documents = list(yaml.safe_load_all((KUBERAY / name).read_text(encoding="utf-8")))
    assert len(documents) == 1, name
    document: dict[str, Any] = documents[0]
    return document


def _ray_pin() -> str:
    match = re.search(r"^ray==(\S+)$", (REPO / "constraints.txt").read_text(), re.MULTILINE)
    assert match is not None, "constraints.txt pins no ray"
    return match.group(1)


def _containers(job: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = job["spec"]["rayClusterSpec"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    return [c for group in groups for c in group["template"]["spec"]["containers"]]


def test_the_rayjob_runs_finpod_on_the_ray_backend() -> None:
    job = _load("rayjob.yaml")
    assert job["apiVersion"] == "ray.io/v1"
    assert job["kind"] == "RayJob"
    assert job["metadata"]["name"]
    command = shlex.split(job["spec"]["entrypoint"])
    assert command[:2] == ["finpod", "run"]
    assert command[command.index("--backend") + 1] == "ray"
    assert command[command.index("--address") + 1] == "auto"
    spec_in_image = Path(command[2])
    assert spec_in_image.parts[:4] == ("/", "home", "ray", "finpod")
    Spec.from_toml(REPO / Path(*spec_in_image.parts[4:]))  # the spec the image copies exists and is valid
    assert job["spec"]["shutdownAfterJobFinishes"] is True


def test_the_cluster_has_a_head_and_workers_with_resources_on_one_image() -> None:
    job = _load("rayjob.yaml")
    cluster = job["spec"]["rayClusterSpec"]
    assert cluster["rayVersion"] == _ray_pin()
    assert cluster["authOptions"]["mode"] == "token"
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"  # no pods on the orchestrator's node
    workers = cluster["workerGroupSpecs"]
    assert workers
    for group in workers:
        assert group["groupName"]
        assert 1 <= group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    containers = _containers(job)
    assert len({c["image"] for c in containers}) == 1
    for container in containers:
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(container["resources"][kind]), container["name"]
        env = {item["name"]: item.get("value") for item in container.get("env", [])}
        assert env.get("RAY_USAGE_STATS_ENABLED") == "0"
    head = cluster["headGroupSpec"]["template"]["spec"]
    (mount,) = head["containers"][0]["volumeMounts"]
    (volume,) = head["volumes"]
    assert mount["name"] == volume["name"]
    assert volume["persistentVolumeClaim"]["claimName"] == _load("reports-pvc.yaml")["metadata"]["name"]


def test_the_image_is_rays_own_at_the_pinned_version_with_finpod_installed() -> None:
    dockerfile = (KUBERAY / "Dockerfile").read_text(encoding="utf-8")
    base = re.search(r"^ARG RAY_IMAGE=rayproject/ray:(\S+?)-py311-cpu$", dockerfile, re.MULTILINE)
    assert base is not None
    assert base.group(1) == _ray_pin()
    assert re.search(r"^FROM \$\{RAY_IMAGE\}$", dockerfile, re.MULTILINE)
    copied = re.findall(r"^COPY \S+ (.+) \S+$", dockerfile, re.MULTILINE)
    sources = {name for line in copied for name in line.split()}
    assert {"pyproject.toml", "constraints.txt", "finpod", "engine", "strategies"} <= sources
    assert all((REPO / name).exists() for name in sources)
    assert '-c constraints.txt ".[ray]"' in dockerfile
    home = re.search(r"FINPOD_HOME=(\S+)", dockerfile)
    assert home is not None
    job = _load("rayjob.yaml")
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head["volumeMounts"][0]["mountPath"] == home.group(1)  # run folders land on the volume
