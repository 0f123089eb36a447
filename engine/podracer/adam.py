"""Adam as one fused kernel call, with ``torch.optim.Adam``'s state dict, outside ``torch.optim``.

``torch.optim.Adam(..., fused=True)`` is what a pod trained with, and its arithmetic is kept: the
same moments, the same step counts and the same kernel (``torch._fused_adam_``, or
``torch._fused_adamw_`` with decoupled weight decay), so training is bit-identical
(``tests/engine/test_adam.py``). What is left out is what a pod never uses and pays for:
``torch.optim.Optimizer`` imports ``torch._dynamo`` (with sympy and the op registries, about
1.5-2.2 s) the first time any optimiser is built, inside the first pod's creation; and every
``step()`` walks hooks, profiler records and device grouping in the interpreter, where pod threads
take turns (BENCHMARKS.md "Less interpreter time per step").

:meth:`FusedAdam.state_dict` and :meth:`FusedAdam.load_state_dict` read and write
``torch.optim.Adam``'s format, so snapshots written by either load into the other.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Final

import torch

BETAS: Final[tuple[float, float]] = (0.9, 0.999)
"""Adam's moment decays (torch's defaults)."""


class FusedAdam:
    """Adam over one parameter group, stepped by torch's fused kernel.

    Args:
        params: the parameters (floating point, one device).
        lr: learning rate.
        eps: the denominator's epsilon.
        weight_decay: weight decay; decoupled from the gradient (AdamW) when
            ``decoupled_weight_decay``, else added to it (L2, ``torch.optim.Adam``'s default).
        decoupled_weight_decay: AdamW's decay.

    Attributes:
        param_groups: one group in ``torch.optim.Adam``'s layout (hyper-parameters a caller may
            rewrite between steps: ``lr``, ``eps``, ``weight_decay``, ``decoupled_weight_decay``).
        state: per parameter, its ``step`` (float32 0-d, on its device) and moments, created at
            its first step with a gradient.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        decoupled_weight_decay: bool = False,
    ) -> None:
        group_params = list(params)
        if not group_params:
            raise ValueError("FusedAdam got an empty parameter list")
        self.param_groups: list[dict[str, Any]] = [
            {
                "lr": lr,
                "betas": BETAS,
                "eps": eps,
                "weight_decay": weight_decay,
                "amsgrad": False,
                "maximize": False,
                "foreach": None,
                "capturable": False,
                "differentiable": False,
                "fused": True,
                "decoupled_weight_decay": decoupled_weight_decay,
                "params": group_params,
            }
        ]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    @property
    def params(self) -> list[torch.Tensor]:
        """The parameters, in order."""
        params: list[torch.Tensor] = self.param_groups[0]["params"]
        return params

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop the gradients (``set_to_none``) or zero them in place."""
        for param in self.params:
            if set_to_none:
                param.grad = None
            elif param.grad is not None:
                param.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step of every parameter that has a gradient (the others keep their moments)."""
        group = self.param_groups[0]
        params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
        for param in self.params:
            if param.grad is None:
                continue
            state = self.state.get(param)
            if state is None:
                state = self.state[param] = {
                    "step": torch.zeros((), dtype=torch.float32, device=param.device),
                    "exp_avg": torch.zeros_like(param, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(param, memory_format=torch.preserve_format),
                }
            params.append(param)
            grads.append(param.grad)
            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
            steps.append(state["step"])
        if not params:
            return
        beta1, beta2 = group["betas"]
        kernel = torch._fused_adamw_ if group["decoupled_weight_decay"] else torch._fused_adam_
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
            maximize=False,
            grad_scale=None,
            found_inf=None,
        )

    def state_dict(self) -> dict[str, Any]:
        """``torch.optim.Adam.state_dict()``'s layout: state by parameter index, the group's values
        with ``params`` as indices (tensors are the live ones, as torch's are)."""
        index = {id(param): number for number, param in enumerate(self.params)}
        group = {key: value for key, value in self.param_groups[0].items() if key != "params"}
        group["params"] = list(range(len(self.params)))
        return {
            "state": {index[id(param)]: dict(values) for param, values in self.state.items()},
            "param_groups": [group],
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load a state dict of this class or of ``torch.optim.Adam`` over the same parameters.

        As torch does: moments move to each parameter's device and dtype, step counts to float32
        on its device (the fused layout), and the saved group's values replace this one's.

        Raises:
            ValueError: the saved state has another number of groups or parameters.
        """
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            sizes = [len(group["params"]) for group in groups]
            raise ValueError(
                f"loaded optimiser state has parameter groups of sizes {sizes}, "
                f"this optimiser one group of {len(self.params)}"
            )
        saved = groups[0]
        by_index = dict(zip(saved["params"], self.params, strict=True))
        self.state = {}
        for number, values in state_dict["state"].items():
            param = by_index[number]
            loaded = {}
            for key, value in values.items():
                if key == "step":
                    loaded[key] = value.to(dtype=torch.float32, device=param.device)
                else:
                    loaded[key] = value.to(dtype=param.dtype, device=param.device)
            self.state[param] = loaded
        group = {key: copy.deepcopy(value) for key, value in saved.items() if key != "params"}
        group["params"] = self.params
        self.param_groups = [group]
