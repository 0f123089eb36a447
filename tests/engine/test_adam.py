"""``FusedAdam`` trains as ``torch.optim.Adam(fused=True)`` bit for bit and shares its state dict."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from torch import nn

from podracer.adam import FusedAdam


def _model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))


def _loss(model: nn.Module, step: int, skip_last: bool = False) -> torch.Tensor:
    inputs = torch.randn(16, 5, generator=torch.Generator().manual_seed(step))
    body = model[:-1] if skip_last else model
    return body(inputs).square().mean()


def _torch_adam(model: nn.Module, weight_decay: float, decoupled: bool) -> torch.optim.Adam:
    return torch.optim.Adam(
        model.parameters(),
        lr=3e-3,
        eps=1e-6,
        weight_decay=weight_decay,
        decoupled_weight_decay=decoupled,
        fused=True,
    )


def _fused(model: nn.Module, weight_decay: float, decoupled: bool) -> FusedAdam:
    return FusedAdam(
        model.parameters(), lr=3e-3, eps=1e-6, weight_decay=weight_decay, decoupled_weight_decay=decoupled
    )


def _steps(model: nn.Module, optimizer: FusedAdam | torch.optim.Optimizer, first: int, count: int) -> None:
    for step in range(first, first + count):
        optimizer.zero_grad(set_to_none=True)
        _loss(model, step, skip_last=step % 3 == 2).backward()  # some steps leave the last layer out
        optimizer.step()


def _same(a: nn.Module, b: nn.Module) -> None:
    for x, y in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(x, y)


def _same_state(a: dict, b: dict) -> None:
    assert a["state"].keys() == b["state"].keys()
    for key, values in a["state"].items():
        assert values.keys() == b["state"][key].keys()
        for name, value in values.items():
            other = b["state"][key][name]
            assert value.dtype == other.dtype
            assert value.device == other.device
            assert torch.equal(value, other), name
    assert a["param_groups"] == b["param_groups"]


@pytest.mark.parametrize(("weight_decay", "decoupled"), [(0.0, True), (0.05, True), (0.05, False)])
def test_steps_and_state_match_torch_adam(weight_decay: float, decoupled: bool) -> None:
    ours_model, torch_model = _model(), _model()
    ours, theirs = (
        _fused(ours_model, weight_decay, decoupled),
        _torch_adam(torch_model, weight_decay, decoupled),
    )
    _steps(ours_model, ours, 0, 8)
    _steps(torch_model, theirs, 0, 8)
    _same(ours_model, torch_model)
    _same_state(ours.state_dict(), theirs.state_dict())


@pytest.mark.parametrize("direction", ["torch-to-ours", "ours-to-torch"])
def test_state_dicts_load_across(direction: str) -> None:
    """A snapshot written by either loads into the other, and training goes on bit for bit."""
    source_model, twin_model = _model(), _model()
    make_source: Callable = _torch_adam if direction == "torch-to-ours" else _fused
    make_target: Callable = _fused if direction == "torch-to-ours" else _torch_adam
    source = make_source(source_model, 0.01, True)
    _steps(source_model, source, 0, 5)
    twin_model.load_state_dict(source_model.state_dict())
    target = make_target(twin_model, 0.0, True)
    target.load_state_dict(copy.deepcopy(source.state_dict()))
    _same_state(target.state_dict(), source.state_dict())  # the saved group's values came with it
    _steps(source_model, source, 5, 4)
    _steps(twin_model, target, 5, 4)
    _same(source_model, twin_model)


def test_a_step_without_gradients_changes_nothing() -> None:
    model = _model()
    optimizer = FusedAdam(model.parameters(), lr=1e-2)
    before = [param.detach().clone() for param in model.parameters()]
    optimizer.step()
    assert optimizer.state == {}
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_zero_grad_in_place_keeps_the_tensors() -> None:
    model = _model()
    optimizer = FusedAdam(model.parameters(), lr=1e-2)
    _loss(model, 0).backward()
    grads = [param.grad for param in model.parameters()]
    optimizer.zero_grad(set_to_none=False)
    assert all(
        param.grad is grad and not grad.any() for param, grad in zip(model.parameters(), grads, strict=True)
    )
    optimizer.zero_grad()
    assert all(param.grad is None for param in model.parameters())


def test_loading_another_model_s_state_is_refused() -> None:
    small, large = nn.Linear(2, 2), _model()
    with pytest.raises(ValueError, match="parameter groups of sizes \\[2\\]"):
        FusedAdam(large.parameters(), lr=1e-3).load_state_dict(
            FusedAdam(small.parameters(), lr=1e-3).state_dict()
        )
    with pytest.raises(ValueError, match="empty parameter list"):
        FusedAdam([], lr=1e-3)


def test_building_one_does_not_import_dynamo() -> None:
    """torch.optim's optimisers import torch._dynamo (seconds) on first use; podracer's does not."""
    import subprocess
    import sys

    probe = (
        "import sys, torch; from podracer.adam import FusedAdam; "
        "m = torch.nn.Linear(3, 1); o = FusedAdam(m.parameters(), lr=1e-3); "
        "m(torch.ones(2, 3)).sum().backward(); o.step(); o.load_state_dict(o.state_dict()); "
        "print('torch._dynamo' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
