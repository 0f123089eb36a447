"""What a pod worker in another process holds and does: a pod's agent and env kept between its
rounds, and the agent state that travels as tensors.

Shared by the Ray actor (:mod:`podracer.backends.ray_worker`) and the process pool's worker
(:mod:`podracer.backends.process_worker`); imports neither Ray nor any transport.

Agent states travel as one flat buffer of the tensors' bytes and a header of plain values
(:func:`pack_state`, :func:`unpack_state`: :mod:`podracer.state_codec`), so an arbitrary pickled
object is refused on either side, and a state crosses in about a tenth of ``torch.save`` and
``torch.load(weights_only=True)``'s time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from podracer.errors import TournamentError
from podracer.pod import AgentFactory, EnvFactory, Evaluate, Pod, run_round
from podracer.state_codec import decode_state, encode_state

Code = tuple[AgentFactory, EnvFactory, Evaluate]
"""The application's code a worker runs: ``(agent_factory, env_factory, evaluate)``."""


class WorkerLostError(TournamentError):
    """A pod worker died mid-round (node lost, out of memory, killed); the round's work is lost."""


def pack_state(state: Mapping[str, Any]) -> bytes:
    """An agent ``state_dict`` (tensors and plain values) as one flat buffer (:mod:`podracer.state_codec`).

    Raises:
        SnapshotError: the state holds an object that is neither.
    """
    return encode_state(state)


def unpack_state(data: bytes) -> dict[str, Any]:
    """Read :func:`pack_state` bytes: CPU tensors and plain values, never a pickled object.

    Raises:
        SnapshotError: the bytes are not an encoded state, or name any class or function.
    """
    return decode_state(data)


def round_arguments(task: Any, incarnation: int, state: bytes | None) -> tuple[Any, ...]:
    """What :meth:`PodHost.run_round` takes after ``code`` for ``task`` (a
    :class:`~podracer.backends.base.RoundTask`): one order for every transport."""
    pod = task.pod
    return (
        incarnation,
        pod.pod_id,
        pod.agent_config,
        pod.seed,
        task.train_rounds,
        state,
        task.budget_spent,
    )


class PodHost:
    """One pod's agent and env, kept between that pod's rounds in a worker process.

    The driver numbers every pod object it sends a worker (an *incarnation*); a new number builds a
    new agent and env from the factories and the state sent along, the same number continues with
    what the host holds (and its env's episode), as the orchestrator's own process would.
    """

    def __init__(self) -> None:
        """An empty host (no pod yet)."""
        self._incarnation: int | None = None
        self._pod: Pod | None = None

    def run_round(
        self,
        code: Code,
        incarnation: int,
        pod_id: int,
        agent_config: Any,
        seed: int,
        train_rounds: int,
        state: bytes | None,
        budget_spent: float = 0.0,
    ) -> tuple[dict[str, Any], bytes]:
        """Run one round of pod ``incarnation``; returns the :class:`RoundResult` fields and the new state.

        Args:
            code: the application's factories and ``evaluate``.
            incarnation: the driver's id of this pod object; a new one builds a new agent and env.
            pod_id: the pod's id (for messages).
            agent_config: the pod's hyper-parameters.
            seed: the pod's seed (its agent's and env's).
            train_rounds: agent rounds before the evaluation.
            state: :func:`pack_state` bytes of the agent to start from; ``None`` to continue with the
                agent this host holds (only for the incarnation it holds).
            budget_spent: the tournament's budget spent when the round was submitted (``RoundTask``).

        Raises:
            TournamentError: a new incarnation came without a state.
        """
        agent_factory, env_factory, evaluate = code
        if incarnation != self._incarnation or self._pod is None:
            if state is None:
                raise TournamentError(
                    f"pod worker holds no agent for pod {pod_id}; the backend must send one"
                )
            self._incarnation, self._pod = None, None
            agent = agent_factory(agent_config, seed)
            agent.load_state_dict(unpack_state(state))
            self._pod = Pod(
                pod_id=pod_id,
                parent_id=None,
                lineage_id=pod_id,
                generation=0,
                seed=seed,
                agent_config=agent_config,
                agent=agent,
                env=env_factory(seed),
                policy_version=0,
                env_steps=0,
            )
            self._incarnation = incarnation
        elif state is not None:
            self._pod.agent.load_state_dict(unpack_state(state))
        pod = self._pod
        try:
            result = run_round(pod, train_rounds, evaluate, budget_spent)
        except BaseException:
            self._incarnation, self._pod = None, None  # half-trained: rebuild from the driver's state
            raise
        return asdict(result), pack_state(pod.agent.state_dict())
