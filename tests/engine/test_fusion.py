"""Learner fusion over torch.distributed: after every epoch the learners hold identical parameters.

A real :class:`FusedAgent` pod: the lead learner in this process, a helper learner in a spawned
process, one gloo process group bound to 127.0.0.1 that meets through a file store.
"""

from __future__ import annotations

import dataclasses
import os
import time

import torch

from engine._tournament_kit import ROUND_ENV_STEPS, TINY_PPO, Validation, make_agent, make_env
from podracer.fusion import FusedAgent, fused_agent_factory, learner_vector, parameters_of
from podracer.pod import pod_policy


def test_after_fusion_the_learners_hold_identical_parameters_moments_and_statistics() -> None:
    config = dataclasses.replace(TINY_PPO, target_kl=0.002)  # a KL stop must end every learner's same epoch
    agent = FusedAgent(make_agent, make_env, config, 5, learners=2)
    start = parameters_of(agent.lead)
    stats = agent.train_round(make_env(5))
    assert stats.env_steps == 2 * ROUND_ENV_STEPS
    assert stats.metrics["learners"] == 2.0
    agent.train_round(make_env(5))
    helpers = agent.helper_pids()
    assert len(helpers) == 1
    lead, helper = agent.learner_vectors()
    assert torch.equal(lead, learner_vector(agent.lead))
    assert torch.equal(lead, helper)  # parameters, Adam moments and observation statistics
    assert not torch.equal(parameters_of(agent.lead), start)  # and it learned

    other = make_agent(config, 99)  # a snapshot load reaches the helper before its next round
    agent.load_weights_from(other.state_dict(), keep_optimizer=True)
    _, helper = agent.learner_vectors()
    assert torch.equal(helper[: start.numel()].float(), parameters_of(other))
    assert isinstance(Validation()(pod_policy(agent)), float)
    restored = make_agent(config, 5)
    restored.load_state_dict(agent.state_dict())  # a fused pod's snapshot is a plain PPO snapshot
    assert torch.equal(parameters_of(restored), parameters_of(agent.lead))

    del agent  # the helper learner stops with its pod
    deadline = time.monotonic() + 20
    while os.path.exists(f"/proc/{helpers[0]}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{helpers[0]}")


def test_one_learner_builds_no_process_group() -> None:
    assert fused_agent_factory(make_agent, make_env, 1) is make_agent
    assert make_agent(TINY_PPO, 0).epoch_hook is None


def test_a_child_fused_pod_continues_its_parents_step_count() -> None:
    """spawn_pod sets a child's env_steps to its parent's (its learning-rate schedule continues); a
    fused pod's count is its lead's, and the helpers take the lead's state before the next round."""
    agent = FusedAgent(make_agent, make_env, TINY_PPO, 5, learners=2)
    agent._sync = False
    agent.env_steps = 4096
    assert agent.lead.env_steps == agent.env_steps == 4096
    assert agent._sync  # the next round sends the lead's state, count included
    assert agent.helper_pids() == []  # no helper started by it
