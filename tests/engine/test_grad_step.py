"""``ClippedStep`` (over podracer's ``FusedAdam`` or a torch optimiser) equals torch's ``zero_grad`` +
``clip_grad_norm_`` + ``optimizer.step()`` with ``torch.optim`` bit for bit."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from torch import nn

from podracer.adam import FusedAdam
from podracer.grad_step import ClippedStep, clip_gradients_

MAX_NORM = 0.2


def _model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))


def _loss(model: nn.Module, step: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(step)
    inputs = torch.randn(32, 6, generator=generator)
    return (1 + 9 * (step % 2)) * model(inputs).square().mean()  # gradient norms above and below MAX_NORM


Optimizer = FusedAdam | torch.optim.Optimizer
MakeOptimizer = Callable[[nn.Module], Optimizer]


def _torch_adam(**settings: object) -> MakeOptimizer:
    return lambda model: torch.optim.Adam(model.parameters(), lr=1e-2, fused=True, **settings)  # type: ignore[arg-type]


def _fused_adam(**settings: object) -> MakeOptimizer:
    return lambda model: FusedAdam(model.parameters(), lr=1e-2, **settings)  # type: ignore[arg-type]


def _train(
    model: nn.Module, optimizer: Optimizer, steps: int, fast: bool, loss_fn: Callable = _loss
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


def _pair(make_fast: MakeOptimizer, make_slow: MakeOptimizer, steps: int = 6, **kwargs: object) -> None:
    """``ClippedStep`` over ``make_fast``'s optimiser against torch's helpers over ``make_slow``'s."""
    fast_model, slow_model = _model(), _model()
    fast_optimizer, slow_optimizer = make_fast(fast_model), make_slow(slow_model)
    fast_norms = _train(fast_model, fast_optimizer, steps, fast=True, **kwargs)  # type: ignore[arg-type]
    slow_norms = _train(slow_model, slow_optimizer, steps, fast=False, **kwargs)  # type: ignore[arg-type]
    assert fast_norms == slow_norms
    assert max(fast_norms) > MAX_NORM > min(fast_norms)  # both branches of the clip ran
    for fast, slow in zip(fast_model.parameters(), slow_model.parameters(), strict=True):
        assert torch.equal(fast, slow)
    fast_state, slow_state = fast_optimizer.state_dict()["state"], slow_optimizer.state_dict()["state"]
    assert fast_state.keys() == slow_state.keys()
    for key, moments in fast_state.items():
        for name, value in moments.items():
            assert torch.equal(value, slow_state[key][name]), name


@pytest.mark.parametrize(
    "settings",
    [
        {"weight_decay": 0.0, "decoupled_weight_decay": True},  # podracer's pods
        {"weight_decay": 0.01, "decoupled_weight_decay": True},
        {"weight_decay": 0.1},  # L2 in the gradient
    ],
    ids=["adam", "adamw", "l2"],
)
def test_podracer_s_adam_matches_torch_s_bit_for_bit(settings: dict[str, object]) -> None:
    _pair(_fused_adam(**settings), _torch_adam(**settings))


@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda model: torch.optim.Adam(model.parameters(), lr=1e-2),  # not fused
        lambda model: torch.optim.Adam(model.parameters(), lr=1e-2, fused=True, amsgrad=True),
        lambda model: torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9),
    ],
    ids=["adam", "amsgrad", "sgd"],
)
def test_torch_optimisers_step_as_with_torch_s_helpers(make_optimizer: MakeOptimizer) -> None:
    _pair(make_optimizer, make_optimizer)


def test_a_parameter_without_gradient_keeps_its_moments() -> None:
    """An H-term step trains the policy only: a parameter without a gradient is not stepped."""

    def loss_without_last(model: nn.Module, step: int) -> torch.Tensor:
        if step < 2:
            return _loss(model, step)
        inputs = torch.randn(8, 6, generator=torch.Generator().manual_seed(step)) * step
        return model[:-1](inputs).square().mean()

    _pair(_fused_adam(), _torch_adam(), loss_fn=loss_without_last)


def test_a_reloaded_optimiser_state_is_used() -> None:
    """A snapshot restore replaces the moments (``load_state_dict``): the next step reads the new ones."""
    fast_model, slow_model = _model(), _model()
    fast, slow = _fused_adam()(fast_model), _torch_adam()(slow_model)
    _train(fast_model, fast, 3, fast=True)
    _train(slow_model, slow, 3, fast=False)
    other_model = _model(seed=7)
    other = _torch_adam()(other_model)
    _train(other_model, other, 2, fast=False)
    for optimizer, model in ((fast, fast_model), (slow, slow_model)):
        optimizer.load_state_dict(copy.deepcopy(other.state_dict()))
        model.load_state_dict(other_model.state_dict())
    assert _train(fast_model, fast, 2, fast=True) == _train(slow_model, slow, 2, fast=False)
    for a, b in zip(fast_model.parameters(), slow_model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_clip_of_nothing_is_zero() -> None:
    assert float(clip_gradients_([], MAX_NORM)) == 0.0
