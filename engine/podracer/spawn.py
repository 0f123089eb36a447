"""Building pods: donors to copy from, children of a donor's state, pods restored from their records.

The orchestrator decides WHEN a pod starts and which id it gets; this module builds it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from podracer.generator import Donor, Origin
from podracer.leaderboard import AGENT_STATE_KEY, Leaderboard
from podracer.pod import AgentFactory, EnvFactory, Pod, config_from_record
from podracer.snapshot import load_snapshot


def live_donors(pods: Iterable[Pod], pods_dir: Path, excluded: Collection[int] = ()) -> list[Donor]:
    """Donors from live pods' LATEST snapshots (those with one and a smoothed score), best first.

    Args:
        pods: candidate pods.
        pods_dir: the run's ``pods/`` folder, where their snapshots are.
        excluded: pod ids that may not donate (e.g. pods being retired).
    """
    live = [
        p
        for p in pods
        if p.snapshot_name is not None and p.smoothed_score is not None and p.pod_id not in excluded
    ]
    live.sort(key=lambda p: (-(p.smoothed_score or 0.0), p.pod_id))
    return [
        Donor(
            pod_id=p.pod_id,
            lineage_id=p.lineage_id,
            generation=p.generation,
            score=p.smoothed_score or 0.0,
            agent_config=p.agent_config,
            policy_version=p.policy_version,
            env_steps=p.env_steps,
            snapshot=pods_dir / str(p.snapshot_name),
        )
        for p in live
    ]


def leaderboard_donors(leaderboard: Leaderboard) -> list[Donor]:
    """Donors from the leaderboard's best-ever snapshots, best first (when no pod is live to copy)."""
    return [
        Donor(
            pod_id=e.pod_id,
            lineage_id=e.lineage_id,
            generation=e.generation,
            score=e.score,
            agent_config=config_from_record(e.agent_config),
            policy_version=e.policy_version,
            env_steps=e.env_steps,
            snapshot=e.snapshot,
        )
        for e in leaderboard.entries
    ]


def spawn_pod(pod_id: int, origin: Origin, agent_factory: AgentFactory, env_factory: EnvFactory) -> Pod:
    """A new pod: from scratch, or a child of ``origin.parent``'s state.

    A child gets the donor's weights, observation statistics and optimiser state, its lineage, step
    count (the agent's own ``env_steps`` too, so a learning-rate schedule continues) and smoothed
    score, and the perturbed hyper-parameters of ``origin``.
    """
    agent = agent_factory(origin.agent_config, origin.seed)
    parent = origin.parent
    if parent is not None:
        agent.load_weights_from(load_snapshot(parent.snapshot)[AGENT_STATE_KEY], keep_optimizer=True)
        agent.env_steps = parent.env_steps
    return Pod(
        pod_id=pod_id,
        parent_id=None if parent is None else parent.pod_id,
        lineage_id=pod_id if parent is None else parent.lineage_id,
        generation=0 if parent is None else parent.generation + 1,
        seed=origin.seed,
        agent_config=origin.agent_config,
        agent=agent,
        env=env_factory(origin.seed),
        policy_version=0 if parent is None else parent.policy_version,
        env_steps=0 if parent is None else parent.env_steps,
        smoothed_score=None if parent is None else parent.score,
    )


def restore_pod(
    record: Mapping[str, Any], pods_dir: Path, agent_factory: AgentFactory, env_factory: EnvFactory
) -> Pod:
    """Rebuild a pod from its record (:func:`podracer.runfiles.pod_record`) and last snapshot."""
    config = config_from_record(record["agent_config"])
    seed = int(record["seed"])
    agent = agent_factory(config, seed)
    agent.load_state_dict(load_snapshot(pods_dir / str(record["snapshot_name"]))[AGENT_STATE_KEY])
    return Pod(
        pod_id=int(record["pod_id"]),
        parent_id=record["parent_id"],
        lineage_id=int(record["lineage_id"]),
        generation=int(record["generation"]),
        seed=seed,
        agent_config=config,
        agent=agent,
        env=env_factory(seed),
        policy_version=int(record["policy_version"]),
        env_steps=int(record["env_steps"]),
        last_score=record["last_score"],
        smoothed_score=record["smoothed_score"],
        snapshot_name=str(record["snapshot_name"]),
    )
