"""One optimiser step with global gradient-norm clipping, without torch's per-call Python overhead.

A PPO round on a CPU runs dozens of minibatch steps of a small network, and ``optimizer.zero_grad``,
``nn.utils.clip_grad_norm_(model.parameters(), ...)`` and ``optimizer.step()`` walk the module
tree, group tensors by device and dtype, and enter profiler and no-grad contexts on every call:
interpreter time that pod threads take turns holding (the GIL), so two pods on two cores do not
train twice as fast. :class:`ClippedStep` lists the parameters once and clips with the same kernels
in the same order, so its results are bit-identical to the generic helpers
(``tests/engine/test_grad_step.py``); podracer's own optimiser, :class:`~podracer.adam.FusedAdam`,
steps in one kernel call.
"""

from __future__ import annotations

import torch
from torch import nn

from podracer.adam import FusedAdam


class ClippedStep:
    """``zero_grad``, clip by global L2 norm, then the optimiser's step, over one parameter list.

    Args:
        optimizer: the optimiser (a pod's :class:`~podracer.adam.FusedAdam`, or any torch
            optimiser); its parameter groups give the parameters, in their order (the order of
            ``model.parameters()`` when the optimiser was built from it).
        max_grad_norm: clip the gradients' global L2 norm to this (``nn.utils.clip_grad_norm_``).
    """

    def __init__(self, optimizer: FusedAdam | torch.optim.Optimizer, max_grad_norm: float) -> None:
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
        self.optimizer.step()
        return norm


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
