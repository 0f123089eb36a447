"""The pool ledger: which pods live, where they come from, which retire, which wait to come back.

The tournament loop (:mod:`podracer.orchestrator`) keeps its pool here and changes it only through
the ledger, which records each change in the run directory (``state.json``, ``events.jsonl``):

* **live** pods (:attr:`PoolLedger.pods`, by id): built, training or ready to train; each carries its
  lineage (parent, lineage, generation), step counts and smoothed score (:class:`~podracer.pod.Pod`);
* **retiring** pods: live, but retired when their rounds end (the pool is too big);
* **parked** pods: retired with a snapshot, as records (:func:`~podracer.runfiles.pod_record`), the
  first to restart when the pool grows again (or on resume).

Births: a new pod comes from the generator (from scratch, or a child of a donor's latest state,
:mod:`podracer.generator`) and is built by :mod:`podracer.spawn`; a parked or crashed pod is rebuilt
from its last snapshot. Sizing: :meth:`PoolLedger.resize` follows the target the schedule and the
backend give (:func:`~podracer.schedule.pool_target`); :meth:`PoolLedger.mark_retirees` marks the
worst live pods while the pool is too big (:func:`~podracer.schedule.retirees`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from podracer.generator import Donor, Generator
from podracer.judge import smooth
from podracer.leaderboard import Candidate, encode_agent_state
from podracer.pod import AgentFactory, EnvFactory, Pod, RoundResult, config_to_record
from podracer.rundir import RunDirectory
from podracer.runfiles import LEADERBOARD_DIR, pod_record
from podracer.schedule import fresh_probability, retirees
from podracer.snapshot import EncodedSnapshot
from podracer.spawn import leaderboard_donors, live_donors, restore_pod, spawn_pod


class PoolLedger:
    """The tournament's pool; see the module docstring.

    Args:
        run: the open run directory (its counters hand out pod ids; the ledger saves its state and
            records events there); its parked pods are the ledger's to start with.
        generator: proposes where each new pod comes from.
        agent_factory: ``(agent_config, seed) -> agent``.
        env_factory: ``seed -> TensorVectorEnv``.
    """

    def __init__(
        self, run: RunDirectory, generator: Generator, agent_factory: AgentFactory, env_factory: EnvFactory
    ) -> None:
        """See the class docstring."""
        self.pods: dict[int, Pod] = {}
        self.retiring: set[int] = set()
        self.parked: list[dict[str, Any]] = list(run.parked)
        self.target: int | None = None
        self._run = run
        self._generator = generator
        self._agent_factory = agent_factory
        self._env_factory = env_factory

    # ------------------------------------------------------------------ who lives

    def active(self) -> list[Pod]:
        """Live pods that are not retiring, in order of entry."""
        return [pod for pod in self.pods.values() if pod.pod_id not in self.retiring]

    def others(self, pod: Pod) -> list[Pod]:
        """Live pods other than ``pod`` that are not retiring."""
        return [other for other in self.active() if other is not pod]

    def running(self, pod_ids: Iterable[int]) -> int:
        """How many of ``pod_ids`` (the rounds in flight) are not retiring."""
        return sum(1 for pod_id in pod_ids if pod_id not in self.retiring)

    # ------------------------------------------------------------------ births

    def donors(self, pods: Iterable[Pod], *, fallback: bool) -> list[Donor]:
        """Donors from ``pods``' latest snapshots (retiring pods excluded), best first; with
        ``fallback``, the leaderboard's best-ever snapshots when none of them can donate."""
        donors = live_donors(pods, self._run.pods_dir, self.retiring)
        return leaderboard_donors(self._run.leaderboard) if fallback and not donors else donors

    def new_pod(self, donors: list[Donor]) -> Pod:
        """A pod from the generator: from scratch, or a child of a donor's state (perturbed).

        Its id is made durable (``state.json`` written) before the pod can write anything, so no
        kill can hand the same id to two agents.
        """
        run = self._run
        pod_id = run.progress.next_pod_id
        fresh = fresh_probability(run.config, run.budget.fraction())
        origin = self._generator.propose(donors, fresh, run.rng, first=pod_id == 0)
        run.progress.next_pod_id += 1
        self.save()
        run.flush_writes()  # the id on disk before the pod's first event, and the donor's snapshot
        pod = spawn_pod(pod_id, origin, self._agent_factory, self._env_factory)
        self.pods[pod_id] = pod
        parent = origin.parent
        from_leaderboard = parent is not None and parent.snapshot.parent.name == LEADERBOARD_DIR
        self._started(
            pod, origin="scratch" if parent is None else ("leaderboard" if from_leaderboard else "pod")
        )
        return pod

    def restore(self, record: Mapping[str, Any], reason: str) -> Pod:
        """Rebuild a pod from its record and last snapshot (same id, config, seed and lineage)."""
        self._run.flush_writes()  # that snapshot may still be queued
        pod = restore_pod(record, self._run.pods_dir, self._agent_factory, self._env_factory)
        self.pods[pod.pod_id] = pod
        self._started(pod, origin="snapshot", reason=reason)
        return pod

    def unpark(self, reason: str) -> Pod | None:
        """Restore the first parked pod, if any."""
        return self.restore(self.parked.pop(0), reason) if self.parked else None

    def _started(self, pod: Pod, **data: Any) -> None:
        self._run.emit(
            "pod_started",
            pod.pod_id,
            **data,
            parent_id=pod.parent_id,
            lineage_id=pod.lineage_id,
            generation=pod.generation,
            env_steps=pod.env_steps,
            seed=pod.seed,
            agent_config=config_to_record(pod.agent_config)["fields"],
        )

    # ------------------------------------------------------------------ departures

    def drop(self, pod: Pod) -> None:
        """Remove ``pod`` from the pool (crashed or replaced); nothing of it is kept."""
        del self.pods[pod.pod_id]
        self.retiring.discard(pod.pod_id)

    def park(self, pod: Pod) -> None:
        """Keep ``pod``'s record to restart it later, if it has a snapshot."""
        if pod.snapshot_name is not None:
            self.parked.append(pod_record(pod))

    def retire(self, pod: Pod, reason: str) -> None:
        """Remove ``pod`` from the pool and park it."""
        self.drop(pod)
        self.park(pod)
        self._run.emit("pod_retired", pod.pod_id, reason=reason)

    # ------------------------------------------------------------------ sizing

    def resize(self, target: int) -> None:
        """Record the pool's target size (an event when it changes)."""
        previous, self.target = self.target, target
        if previous is not None and previous != target:
            self._run.emit("pool_resized", None, old=previous, new=target)

    def mark_retirees(self, target: int) -> None:
        """Mark the worst live pods for retirement (at the end of their rounds) beyond ``target``."""
        active = self.active()
        for pod in retirees(active, len(active) - target):
            self.retiring.add(pod.pod_id)

    # ------------------------------------------------------------------ rounds

    def record_round(self, pod: Pod, result: RoundResult) -> tuple[dict[str, Any], EncodedSnapshot]:
        """Count a finished round into ``pod`` and save its snapshot; returns the agent's state and
        its encoding (:func:`~podracer.leaderboard.encode_agent_state`, made once for every store
        the round's state goes to)."""
        config = self._run.config
        pod.policy_version += config.eval_every_rounds
        pod.env_steps += result.env_steps
        pod.rounds_since_start += 1
        pod.last_score = result.score
        pod.smoothed_score = smooth(pod.smoothed_score, result.score, config.score_smoothing)
        pod.restored_after_crash = False
        state = pod.agent.state_dict()
        encoded = encode_agent_state(state)
        pod.snapshot_name = self._run.save_pod_snapshot(pod.pod_id, pod.policy_version, state, encoded)
        return state, encoded

    @staticmethod
    def candidate(pod: Pod, score: float) -> Candidate:
        """What ``pod`` offers the leaderboard after a round that scored ``score``."""
        return Candidate(
            pod_id=pod.pod_id,
            parent_id=pod.parent_id,
            lineage_id=pod.lineage_id,
            generation=pod.generation,
            policy_version=pod.policy_version,
            score=score,
            env_steps=pod.env_steps,
            seed=pod.seed,
            agent_config=config_to_record(pod.agent_config),
        )

    # ------------------------------------------------------------------ what state.json stores

    def records(self) -> list[dict[str, Any]]:
        """Pods to restart on resume: the live pool (with a snapshot), by id, then the parked ones."""
        live = [pod_record(pod) for _, pod in sorted(self.pods.items()) if pod.snapshot_name is not None]
        return live + self.parked

    def save(self) -> None:
        """Write ``state.json`` with the pool as it is now."""
        self._run.save_state(self.records())

    def remove_stale_files(self) -> None:
        """Delete pod snapshots the pool no longer needs (call only after :meth:`save`)."""
        used = {record["snapshot_name"] for record in self.records()}
        used |= {pod.snapshot_name for pod in self.pods.values() if pod.snapshot_name is not None}
        self._run.remove_stale_pod_files(used)
