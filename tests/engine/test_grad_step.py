"""``ClippedStep`` equals torch's ``zero_grad`` + ``clip_grad_norm_`` + ``optimizer.step()`` bit for bit."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from torch import nn

from podracer.grad_step import ClippedStep, clip_gradients_, fused_adam_step

MAX_NORM = 0.2


def _model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))


def _loss(model: nn.Module, step: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(step)
    inputs = torch.randn(32, 6, generator=generator)
    return (1 + 9 * (step % 2)) * model(inputs).square().mean()  # gradient norms above and below MAX_NORM


def _train(
    model: nn.Module, optimizer: torch.optim.Optimizer, steps: int, fast: bool, loss_fn: Callable = _loss
) -> list[float]:
    step = ClippedStep(optimizer, MAX_NORM)
    norms = []
    for index in range(steps):
        if fast:
            step.zero_grad()
            loss_fn(model, index).backward()
            norms.append(float(step.clip_and_step()))
        else:
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model, index).backward()
            norms.append(float(nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)))
            optimizer.step()
    return norms


def _pair(
    make_optimizer: Callable[[nn.Module], torch.optim.Optimizer], steps: int = 6, **kwargs: object
) -> None:
    fast_model, slow_model = _model(), _model()
    fast_optimizer, slow_optimizer = make_optimizer(fast_model), make_optimizer(slow_model)
    fast_norms = _train(fast_model, fast_optimizer, steps, fast=True, **kwargs)  # type: ignore[arg-type]
    slow_norms = _train(slow_model, slow_optimizer, steps, fast=False, **kwargs)  # type: ignore[arg-type]
    assert fast_norms == slow_norms
    assert max(fast_norms) > MAX_NORM > min(fast_norms)  # both branches of the clip ran
    for fast, slow in zip(fast_model.parameters(), slow_model.parameters(), strict=True):
        assert torch.equal(fast, slow)
    fast_state, slow_state = fast_optimizer.state_dict()["state"], slow_optimizer.state_dict()["state"]
    for key, moments in fast_state.items():
        for name, value in moments.items():
            assert torch.equal(value, slow_state[key][name]), name


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_fused_adam_matches_torch_bit_for_bit(weight_decay: float) -> None:
    _pair(
        lambda model: torch.optim.Adam(
            model.parameters(), lr=1e-2, weight_decay=weight_decay, decoupled_weight_decay=True, fused=True
        )
    )


@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda model: torch.optim.Adam(model.parameters(), lr=1e-2),  # not fused
        lambda model: torch.optim.Adam(model.parameters(), lr=1e-2, fused=True, amsgrad=True),
        lambda model: torch.optim.Adam(
            model.parameters(), lr=1e-2, fused=True, weight_decay=0.1
        ),  # L2 in the grad
        lambda model: torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9),
    ],
    ids=["adam", "amsgrad", "coupled-decay", "sgd"],  # coupled decay: the fast path's kernel has it too
)
def test_other_optimisers_and_settings_match_torch(make_optimizer: Callable) -> None:
    _pair(make_optimizer)


def test_fast_path_runs_once_the_moments_exist() -> None:
    model = _model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, fused=True)
    _loss(model, 0).backward()
    assert not fused_adam_step(optimizer)  # no moments yet: Adam.step creates them
    optimizer.step()
    before = [param.detach().clone() for param in model.parameters()]
    _loss(model, 1).backward()
    assert fused_adam_step(optimizer)
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert all(float(state["step"]) == 2.0 for state in optimizer.state.values())


def test_a_parameter_without_gradient_falls_back() -> None:
    """An H-term step trains the policy only: a parameter without a gradient keeps its moments."""

    def loss_without_last(model: nn.Module, step: int) -> torch.Tensor:
        if step < 2:
            return _loss(model, step)
        inputs = torch.randn(8, 6, generator=torch.Generator().manual_seed(step)) * step
        return model[:-1](inputs).square().mean()

    _pair(lambda model: torch.optim.Adam(model.parameters(), lr=1e-2, fused=True), loss_fn=loss_without_last)
    model = _model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, fused=True)
    for step in range(2):
        optimizer.zero_grad(set_to_none=True)
        loss_without_last(model, step).backward()
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    loss_without_last(model, 2).backward()
    assert not fused_adam_step(optimizer)


def test_a_reloaded_optimiser_state_is_used() -> None:
    """A snapshot restore replaces the moments (``load_state_dict``): the next step reads the new ones."""
    fast_model, slow_model = _model(), _model()
    fast = torch.optim.Adam(fast_model.parameters(), lr=1e-2, fused=True)
    slow = torch.optim.Adam(slow_model.parameters(), lr=1e-2, fused=True)
    _train(fast_model, fast, 3, fast=True)
    _train(slow_model, slow, 3, fast=False)
    other_model = _model(seed=7)
    other = torch.optim.Adam(other_model.parameters(), lr=1e-2, fused=True)
    _train(other_model, other, 2, fast=False)
    for optimizer, model in ((fast, fast_model), (slow, slow_model)):
        optimizer.load_state_dict(copy.deepcopy(other.state_dict()))
        model.load_state_dict(other_model.state_dict())
    assert _train(fast_model, fast, 2, fast=True) == _train(slow_model, slow, 2, fast=False)
    for a, b in zip(fast_model.parameters(), slow_model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_clip_of_nothing_is_zero() -> None:
    assert float(clip_gradients_([], MAX_NORM)) == 0.0
