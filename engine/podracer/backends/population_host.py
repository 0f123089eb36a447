"""What a population worker in another process holds and does: several pods' agents and envs, kept
between their rounds, trained in lockstep as one population (:mod:`podracer.population`).

The Ray actor :class:`~podracer.backends.ray_worker.PopulationWorker` wraps it; this module imports
no transport. It is :class:`~podracer.backends.pod_host.PodHost` for ``P`` pods at once: the driver
numbers every pod object it sends (an *incarnation*); a new number builds the pod's agent and env
from the factories and the state sent along, the same number continues with what the host holds.
The rounds then run through a :class:`~podracer.backends.population.PopulationBackend` in this
process, so a pod trains here exactly as it would in the driver's own population.
"""

from __future__ import annotations

import pickle
from concurrent.futures import Future
from dataclasses import asdict
from typing import Any, NamedTuple

from podracer.backends.base import RoundTask
from podracer.backends.pod_host import Code, pack_state, unpack_state
from podracer.backends.population import PopulationBackend
from podracer.errors import TournamentError
from podracer.pod import Pod, RoundResult


class PodRound(NamedTuple):
    """One pod's part of a population round, as the driver sends it (plain values and bytes).

    Attributes:
        incarnation: the driver's id of this pod object; a new one builds a new agent and env.
        pod_id: the pod's id.
        agent_config: the pod's hyper-parameters.
        seed: the pod's seed (its agent's and env's).
        train_rounds: agent rounds before the evaluation.
        state: :func:`~podracer.backends.pod_host.pack_state` bytes of the agent to start from;
            ``None`` to continue with the agent the host holds (only for the incarnation it holds).
        budget_spent: the tournament's budget spent when the round was submitted.
    """

    incarnation: int
    pod_id: int
    agent_config: Any
    seed: int
    train_rounds: int
    state: bytes | None
    budget_spent: float


def pod_round(task: RoundTask, incarnation: int, state: bytes | None) -> PodRound:
    """The :class:`PodRound` of ``task`` (what a population worker needs of it)."""
    pod = task.pod
    return PodRound(
        incarnation, pod.pod_id, pod.agent_config, pod.seed, task.train_rounds, state, task.budget_spent
    )


RoundOutcome = tuple[dict[str, Any], bytes] | BaseException
"""A pod's round as the host returns it: the :class:`RoundResult` fields and the trained state, or
the exception the round ended in (the driver counts it as that pod's crashed round)."""


class PopulationHost:
    """The pods one population worker trains (see the module docstring).

    Args:
        torch_threads: torch intra-op threads of the population's computation.
    """

    def __init__(self, torch_threads: int) -> None:
        """See the class docstring."""
        self._torch_threads = torch_threads
        self._pods: dict[int, tuple[int, Pod]] = {}

    def held(self) -> dict[int, int]:
        """The pods this host holds: pod id -> incarnation."""
        return {pod_id: incarnation for pod_id, (incarnation, _) in self._pods.items()}

    def run_rounds(self, code: Code, rounds: list[PodRound]) -> list[RoundOutcome]:
        """Run one round of every pod in ``rounds`` as one population; one outcome per pod, in order.

        A pod this host held that is not in ``rounds`` is dropped (it moved to another worker or
        retired). A pod whose round raised is dropped too: its next round starts from the driver's
        state.
        """
        agent_factory, env_factory, evaluate = code
        kept: dict[int, tuple[int, Pod]] = {}
        outcomes: list[RoundOutcome | None] = [None] * len(rounds)
        tasks: list[tuple[int, RoundTask]] = []
        for index, part in enumerate(rounds):
            try:
                pod = self._pod(part, agent_factory, env_factory)
            except BaseException as error:  # a state that does not load: that pod's round crashed
                outcomes[index] = error
                continue
            kept[part.pod_id] = (part.incarnation, pod)
            task = RoundTask(pod, part.train_rounds, evaluate, agent_factory, env_factory, part.budget_spent)
            tasks.append((index, task))
        self._pods = kept
        population = PopulationBackend(max(1, len(tasks)), self._torch_threads, workers=1)
        futures: list[tuple[int, Future[RoundResult]]] = [(i, population.submit(task)) for i, task in tasks]
        try:
            population.run_submitted()
        finally:
            population.shutdown()
        for (index, future), (_, task) in zip(futures, tasks, strict=True):
            raised = future.exception()
            if raised is None:
                try:
                    outcomes[index] = (asdict(future.result()), pack_state(task.pod.agent.state_dict()))
                    continue
                except BaseException as error:  # a state that does not encode: this pod's round crashed
                    raised = error
            self._pods.pop(task.pod.pod_id, None)  # half-trained: rebuild from the driver's state
            outcomes[index] = raised
        portable: dict[int, BaseException] = {}
        return [
            portable_error(outcome, portable) if isinstance(outcome, BaseException) else outcome
            for outcome in outcomes
            if outcome is not None
        ]

    def _pod(self, part: PodRound, agent_factory: Any, env_factory: Any) -> Pod:
        """The host's pod for ``part``: built anew for a new incarnation, else the one it holds."""
        held = self._pods.get(part.pod_id)
        if held is None or held[0] != part.incarnation:
            if part.state is None:
                raise TournamentError(
                    f"population worker holds no agent for pod {part.pod_id}; the backend must send one"
                )
            agent = agent_factory(part.agent_config, part.seed)
            agent.load_state_dict(unpack_state(part.state))
            return Pod(
                pod_id=part.pod_id,
                parent_id=None,
                lineage_id=part.pod_id,
                generation=0,
                seed=part.seed,
                agent_config=part.agent_config,
                agent=agent,
                env=env_factory(part.seed),
                policy_version=0,
                env_steps=0,
            )
        pod = held[1]
        if part.state is not None:
            pod.agent.load_state_dict(unpack_state(part.state))
        return pod


def portable_error(error: BaseException, made: dict[int, BaseException]) -> BaseException:
    """``error`` if it survives a pickle round trip as itself, else a :class:`TournamentError`
    naming it (an exception whose ``__init__`` takes other arguments, or that holds an unpicklable
    object, would fail the whole reply). The same object maps to the same result (``made``, by
    ``id``), so pods that failed of one failure still share one exception on the driver."""
    key = id(error)
    if key not in made:
        try:
            back = pickle.loads(pickle.dumps(error))
            made[key] = error if type(back) is type(error) else _named(error)
        except Exception:
            made[key] = _named(error)
    return made[key]


def _named(error: BaseException) -> TournamentError:
    return TournamentError(f"{type(error).__name__}: {error}")


__all__ = ["PodRound", "PopulationHost", "RoundOutcome", "pod_round", "portable_error"]
