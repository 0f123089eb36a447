"""Learner fusion: a pod with ``K`` PPO learners whose parameters are averaged after every epoch.

Each learner has its own envs (``env_factory`` of its own seed) and collects its own rollout; after
every update epoch the learners average, over a ``torch.distributed`` process group (gloo on CPU,
NCCL when every learner has its own GPU), their network parameters, their Adam moments
(``exp_avg``, ``exp_avg_sq``), their observation statistics (mean and second moment), and the
epoch's approximate KL (so that ``target_kl`` stops every learner after the same epoch). After the
fusion all learners hold identical parameters: the pod is one agent trained on ``K`` times the data
per round.

Why the moments too (the reference's "model fusion" does it): averaging the parameters alone leaves
each learner's Adam moments pointing along its own past gradients, so the learners drift apart again
from the first step of the next epoch; averaged moments keep the next steps consistent. The extra
cost is two more tensors of the parameters' size per fusion (see BENCHMARKS.md).

Layout: learner 0 (the *lead*) is the pod's agent in the pod's own process and thread, training on
the pod's env; learners ``1 .. K-1`` run in helper processes (spawned on the first round, stopped
when the agent is garbage-collected). The lead drives them over the same process group: a broadcast
command per round (train, sync, stop) and, after a ``load_state_dict`` or ``load_weights_from``,
the lead's full state as ``torch.save`` bytes, read back with ``weights_only=True``. Each fused pod
has its own group (a ``ProcessGroupGloo`` object bound to 127.0.0.1, meeting through its own file
store in a temporary folder: no listening port beyond gloo's loopback pairs), so any number of pods
fuse side by side. ``K = 1`` never builds any of this: use the plain agent.

The pieces: :mod:`podracer.fusion.agent` (:class:`FusedAgent`, :func:`fused_agent_factory`),
:mod:`podracer.fusion.spawn` (the helper processes and their loop), :mod:`podracer.fusion.collectives`
(the process group, commands, state bytes and the averaging).
"""

from podracer.fusion.agent import FusedAgent, fused_agent_factory
from podracer.fusion.collectives import (
    FUSION_TIMEOUT,
    EpochFusion,
    average_,
    learner_vector,
    parameters_of,
)
from podracer.fusion.spawn import HELPER_SEED_STRIDE, learner_seed

__all__ = [
    "FUSION_TIMEOUT",
    "HELPER_SEED_STRIDE",
    "EpochFusion",
    "FusedAgent",
    "average_",
    "fused_agent_factory",
    "learner_seed",
    "learner_vector",
    "parameters_of",
]
