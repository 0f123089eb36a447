"""A finished run's trained trader as a plain callable, and its export to a self-contained file.

``run.policy("best")`` (the selected agent), ``run.policy("ensemble")`` (the distinct-lineage ensemble the
run backtested), ``run.policy("trajectory")`` (the average of the run's archived snapshots:
its 32 best-validated ones by default) or
``run.policy(2)`` (the leaderboard entry ranked 2, 1 = best) returns a
:class:`TraderPolicy`: observations ``(N, D)`` in, actions ``(N, A)`` out, deterministic. The
observation is the env's (:mod:`finpod.env.observation`), built with the run's own feature
normalisation (see :func:`finpod.backtest_run` to trade it on other data).

:meth:`TraderPolicy.export` writes a ``torch.export`` program (``.pt2``) that loads with torch
alone, no finpod or podracer::

    program = torch.export.load("trader.pt2").module()
    actions = program(observations)          # float32 (N, D) -> (N, A)
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from torch import nn

from finpod.backtest.ensemble import ensemble_policy
from finpod.errors import SpecError
from finpod.report.atomic import write_bytes_atomic, write_text_atomic
from finpod.rundir import RunDir
from podracer.api import (
    Agent,
    Policy,
    PPOAgent,
    archive_of,
    deterministic_policy,
    has_leaderboard,
    leaderboard_of,
)

TraderName = Literal["best", "ensemble", "trajectory"] | int
"""``"best"``, ``"ensemble"``, ``"trajectory"`` or a 1-based leaderboard rank (1 = best)."""
EXPORT_SUFFIX = ".pt2"
"""File suffix of an exported policy (``torch.export.save``)."""


@dataclass(frozen=True)
class TraderPolicy:
    """A trained trader: deterministic observations ``(N, D)`` -> actions ``(N, A)``.

    Attributes:
        name: ``"best"``, ``"ensemble_top<k>"`` or ``"rank<r>"``.
        obs_dim: ``D``, the observation width it expects.
        action_dim: ``A``: ``M + 1`` target weights over ``[cash, asset_1 .. asset_M]`` in
            ``weights`` mode, ``M`` share deltas in ``share_delta`` mode.
        action_mode: the env's action mode the trader was trained for.
        device: where it runs (observations are moved there).
        agents: the leaderboard agents it is made of (one, or the ensemble's k).
        fully_invested: the env it was trained for ignores the cash score (``env.fully_invested``);
            the actions' cash score is then 0, so ``a / sum(a)`` is the fully invested book.
    """

    name: str
    obs_dim: int
    action_dim: int
    action_mode: str
    device: torch.device
    agents: tuple[Agent, ...]
    act: Policy
    fully_invested: bool = False

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """Actions ``(N, A)`` float32 for observations ``(N, D)`` (any array torch can read)."""
        batch = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        if batch.ndim != 2 or batch.shape[1] != self.obs_dim:
            raise SpecError(
                f"{self.name}: observations must have shape (N, {self.obs_dim}), got {tuple(batch.shape)}; "
                "fix: pass a batch of env observations (finpod.make_env or finpod.backtest_run builds them)"
            )
        with torch.no_grad():
            return self.act(batch)

    def export(self, path: str | Path) -> Path:
        """Write the trader as a ``torch.export`` program that needs only torch to load and run.

        The program maps float32 observations ``(N, D)`` (any ``N`` >= 1, on the CPU) to actions
        ``(N, A)``; a JSON sidecar ``<path>.json`` records names and sizes. Returns the path written.
        """
        target = Path(path).expanduser().resolve()
        if target.suffix != EXPORT_SUFFIX:
            target = target.with_suffix(target.suffix + EXPORT_SUFFIX)
        target.parent.mkdir(parents=True, exist_ok=True)
        module = _Exportable(self)
        example = torch.zeros((2, self.obs_dim), dtype=torch.float32, device=self.device)
        program = torch.export.export(
            module, (example,), dynamic_shapes={"obs": {0: torch.export.Dim("batch", min=1)}}
        )
        buffer = io.BytesIO()
        torch.export.save(program, buffer)
        write_bytes_atomic(target, buffer.getvalue())  # a reader never loads half a program
        sidecar = {"name": self.name, "obs_dim": self.obs_dim, "action_dim": self.action_dim}
        sidecar |= {"action_mode": self.action_mode, "fully_invested": self.fully_invested}
        sidecar |= {"device": str(self.device)}
        write_text_atomic(target.with_suffix(target.suffix + ".json"), json.dumps(sidecar, indent=2))
        return target


class _Exportable(nn.Module):
    """The trader as one ``nn.Module``: its agents' modules registered so export lifts their weights."""

    def __init__(self, trader: TraderPolicy) -> None:
        super().__init__()
        self.parts = nn.ModuleList(
            [
                value
                for agent in trader.agents
                for value in vars(agent).values()
                if isinstance(value, nn.Module)
            ]
        )
        self._act = trader.act

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self._act(obs)


def trader_device(device: str) -> torch.device:
    """``device`` (``"cpu"``, ``"cuda"`` or ``"cuda:<index>"``) as a torch device a trader can run on.

    Raises:
        SpecError: not a device name, or a CUDA device torch does not see.
    """
    try:
        where = torch.device(device)
    except (RuntimeError, TypeError):
        raise SpecError(f"device {device!r}: unknown; fix: use 'cpu' or 'cuda'") from None
    if where.type not in ("cpu", "cuda"):
        raise SpecError(f"device {device!r}: finpod runs on 'cpu' or 'cuda'; fix: use one of them")
    if where.type == "cuda" and (
        not torch.cuda.is_available() or (where.index or 0) >= torch.cuda.device_count()
    ):
        raise SpecError(f"device {device!r}: torch sees no such GPU; fix: use 'cpu'")
    return where


def load_policy(
    run_dir: str | Path,
    which: TraderName = "best",
    *,
    ensemble_k: int,
    action_mode: str,
    fully_invested: bool = False,
    device: str = "cpu",
) -> TraderPolicy:
    """The trader ``which`` of the run in ``run_dir``, rebuilt from its leaderboard snapshots.

    Args:
        run_dir: the run's folder.
        which: ``"best"``, ``"ensemble"`` (the best entries of the ``ensemble_k`` best distinct
            lineages, as the run traded them), ``"trajectory"`` (the run's archived snapshots, their
            target weights averaged: its 32 best-validated judged rounds by default, or with
            ``tournament.archive_rule = "even"`` rounds evenly spaced over the run) or a 1-based leaderboard
            rank.
        ensemble_k: the spec's ``tournament.ensemble_k``.
        action_mode: the spec's ``env.action_mode``.
        fully_invested: the spec's ``env.fully_invested`` (an ensemble drops each member's cash
            score before it averages their weights, as the run traded it).
        device: where the trader runs (``"cpu"`` or ``"cuda"``).

    Raises:
        SpecError: no leaderboard in the folder, an unknown name, a rank that does not exist, or a
            device torch does not have.
    """
    where = trader_device(device)
    tournament = RunDir(Path(run_dir).expanduser().resolve()).tournament
    if not has_leaderboard(tournament):
        raise SpecError(f"{run_dir}: no leaderboard; fix: pass a run folder whose tournament has scored pods")
    board = leaderboard_of(tournament)
    size = len(board.entries)
    if which == "best":
        ranks, name = [0], "best"
    elif which == "ensemble":
        ranks = board.top_lineage_ranks(ensemble_k)
        if len(ranks) < 2:
            raise SpecError(
                f"{run_dir}: the leaderboard holds {len(ranks)} lineage (and ensemble_k is {ensemble_k}), "
                "an ensemble needs 2; fix: use policy('best')"
            )
        name = f"ensemble_top{len(ranks)}"
    elif which == "trajectory":
        archive = archive_of(tournament)
        if archive is None or len(archive.entries) < 2:
            raise SpecError(
                f"{run_dir}: the run kept no trajectory archive of 2 snapshots or more "
                "(tournament.archive_size is 0, or the run was shorter); fix: use policy('best') "
                "(--trader best), or train with --set tournament.archive_size=32"
            )
        members = tuple(
            PPOAgent.from_state_dict(archive.load_state(i), where) for i in range(len(archive.entries))
        )
        return _trader(f"trajectory{len(members)}", members, action_mode, fully_invested, where)
    elif isinstance(which, int) and not isinstance(which, bool) and 1 <= which <= size:
        ranks, name = [which - 1], f"rank{which}"
    else:
        raise SpecError(
            f"policy {which!r}: unknown trader; fix: use 'best', 'ensemble', 'trajectory' or a rank "
            f"from 1 to {size}"
        )
    agents = tuple(PPOAgent.from_state_dict(board.load_state(rank), where) for rank in ranks)
    return _trader(name, agents, action_mode, fully_invested, where)


def _without_cash(policy: Policy) -> Policy:
    """``policy`` with its cash score ``(N, 0)`` set to 0: what a fully invested env trades, so a
    caller that normalises ``a / sum(a)`` holds no cash (the ensemble drops it per member)."""

    def act(obs: torch.Tensor) -> torch.Tensor:
        actions = policy(obs)
        return torch.cat([torch.zeros_like(actions[:, :1]), actions[:, 1:]], dim=1)

    return act


def _trader(
    name: str, agents: tuple[PPOAgent, ...], action_mode: str, fully_invested: bool, where: torch.device
) -> TraderPolicy:
    """The :class:`TraderPolicy` of one agent, or of the ensemble of several (their target weights
    averaged)."""
    if len(agents) == 1:
        act = deterministic_policy(agents[0])
        if fully_invested and action_mode == "weights":
            act = _without_cash(act)
    else:
        act = ensemble_policy(list(agents), action_mode, fully_invested)
    first = agents[0]
    return TraderPolicy(
        name=name,
        obs_dim=first.obs_dim,
        action_dim=first.action_dim,
        action_mode=action_mode,
        device=where,
        agents=agents,
        act=act,
        fully_invested=fully_invested,
    )
