"""One optimiser step with global gradient-norm clipping, without torch's per-call Python overhead.

A PPO round on a CPU runs dozens of minibatch steps of a small network, and ``optimizer.zero_grad``,
``nn.utils.clip_grad_norm_(model.parameters(), ...)`` and ``optimizer.step()`` walk the module
tree, group tensors by device and dtype, and enter profiler and no-grad contexts on every call:
interpreter time that pod threads take turns holding (the GIL), so two pods on two cores do not
train twice as fast. :class:`ClippedStep` lists the parameters once and does the same arithmetic
with the same kernels, in the same order, so its results are bit-identical to the generic helpers
(``tests/engine/test_grad_step.py``).
"""

from __future__ import annotations

import torch
from torch import nn


class ClippedStep:
    """``zero_grad``, clip by global L2 norm, then the optimiser's step, over one parameter list.

    Args:
        optimizer: the optimiser; its parameter groups give the parameters, in their order (the
            order of ``model.parameters()`` when the optimiser was built from it).
        max_grad_norm: clip the gradients' global L2 norm to this (``nn.utils.clip_grad_norm_``).
    """

    def __init__(self, optimizer: torch.optim.Optimizer, max_grad_norm: float) -> None:
        self.optimizer = optimizer
        self.params: list[torch.Tensor] = [p for group in optimizer.param_groups for p in group["params"]]
        self.max_grad_norm = float(max_grad_norm)
        self._one_kind = len({(p.device, p.dtype) for p in self.params}) <= 1

    def zero_grad(self) -> None:
        """Drop every gradient (``optimizer.zero_grad(set_to_none=True)``)."""
        for param in self.params:
            param.grad = None

    def clip_and_step(self) -> torch.Tensor:
        """Clip the gradients' global norm in place, step the optimiser; returns the norm before clipping."""
        if not self._one_kind:  # parameters on several devices or dtypes: torch's grouping
            norm = nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
            self.optimizer.step()
            return norm
        grads = [param.grad for param in self.params if param.grad is not None]
        norm = clip_gradients_(grads, self.max_grad_norm)
        if not fused_adam_step(self.optimizer):
            self.optimizer.step()
        return norm


def fused_adam_step(optimizer: torch.optim.Optimizer) -> bool:
    """``optimizer.step()`` of a fused ``torch.optim.Adam`` as its one kernel call, without the wrapper.

    ``Adam.step`` with ``fused=True`` gathers each parameter's moments, adds 1 to its step count
    and calls ``torch._fused_adam_`` (``_fused_adamw_`` with decoupled weight decay) once per device
    and dtype; this makes that call itself, on the same tensors, so the update is bit-identical.

    Returns:
        ``False`` with nothing done where the fast path does not apply (another optimiser, several
        groups, AMSGrad, a gradient scaler, a step before the moments exist, a parameter without a
        gradient): the caller then runs ``optimizer.step()``.
    """
    if type(optimizer) is not torch.optim.Adam or len(optimizer.param_groups) != 1:
        return False
    group = optimizer.param_groups[0]
    if not group["fused"] or group["amsgrad"] or group["differentiable"] or group["capturable"]:
        return False
    if any(getattr(optimizer, name, None) is not None for name in ("grad_scale", "found_inf")):
        return False
    params: list[torch.Tensor] = group["params"]
    grads, exp_avgs, exp_avg_sqs, steps = [], [], [], []
    for param in params:
        state = optimizer.state.get(param)
        if param.grad is None or not state:
            return False
        grads.append(param.grad)
        exp_avgs.append(state["exp_avg"])
        exp_avg_sqs.append(state["exp_avg_sq"])
        steps.append(state["step"])
    beta1, beta2 = group["betas"]
    kernel = torch._fused_adamw_ if group["decoupled_weight_decay"] else torch._fused_adam_
    with torch.no_grad():
        torch._foreach_add_(steps, 1)
        kernel(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            [],
            steps,
            amsgrad=False,
            lr=group["lr"],
            beta1=float(beta1),
            beta2=float(beta2),
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            maximize=group["maximize"],
            grad_scale=None,
            found_inf=None,
        )
    return True


def clip_gradients_(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """``nn.utils.clip_grad_norm_`` on a list of gradients of one device and dtype, bit for bit.

    The total norm is the L2 norm of the per-tensor L2 norms (``torch._foreach_norm``), and every
    gradient is scaled by ``min(max_norm / (norm + 1e-6), 1)`` with no host sync, as torch does.

    Returns:
        The total norm before clipping (0-d); ``0.`` for an empty list.
    """
    if not grads:
        return torch.zeros(())
    with torch.no_grad():
        norms = torch._foreach_norm(grads, 2.0)
        total = torch.linalg.vector_norm(torch.stack(norms), 2.0)
        # torch's ``max_norm / (norm + 1e-6)``, which ``Tensor.__rdiv__`` computes as a reciprocal times
        scale = torch.add(total, 1e-6).reciprocal_().mul_(max_norm).clamp_(max=1.0)
        torch._foreach_mul_(grads, scale)
    return total
