"""The main job: spec -> tournament (train, rank on validation) -> selection -> backtest -> report.

Order of events, and what each step can see:

1. the spec's bars are loaded; the SELECTION panel is built from the bars before the backtest
   segment only (:func:`finpod.pipeline.inputs.selection_panel`);
2. the tournament trains pods on its ``train`` segment and ranks them on its ``validation`` segment;
3. selection: the best leaderboard entry and the ensemble of the top-k distinct lineages (ranked on
   validation);
4. only now is the BACKTEST panel built, and each trader and baseline passes over it once;
5. the report is written into the run folder.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import platform
import resource
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch
from rich.console import Console

from finpod.backtest.ensemble import ensemble_policy
from finpod.backtest.ensemble import (
    target_weights as target_weights,  # re-exported: finpod.paper reads it here
)
from finpod.backtest.result import BacktestResult
from finpod.backtest.runner import run_backtest
from finpod.backtest.threads import threads_for
from finpod.consoles import text_console
from finpod.cpu_kernels import machine_record
from finpod.data.calendar import align_workers
from finpod.data.panel import Panel
from finpod.data.store import read_manifest
from finpod.env.trading_env import TradingEnv
from finpod.errors import SpecError
from finpod.linear_baseline import linear_baseline
from finpod.matmul_precision import cuda_matmul_precision
from finpod.paths import default_data_root
from finpod.pipeline.backend import pod_backend, population_workers, resolved_backend, training_threads
from finpod.pipeline.context import RunContext
from finpod.pipeline.inputs import (
    adjustment_warning,
    backtest_panel,
    dataset_for,
    late_symbols,
    load_bars,
    selection_panel,
    universe_symbols,
)
from finpod.pipeline.phases import PhaseClock, peak_rss_bytes
from finpod.pipeline.progress import TrainingMonitor
from finpod.pipeline.summary import print_summary
from finpod.pipeline.trader_inputs import TRADER_INPUTS_FILE, save_trader_inputs, trader_inputs
from finpod.pipeline.training import (
    AgentFactory,
    ValidationScore,
    check_horizon,
    deterministic_policy,
    precision_agent_factory,
)
from finpod.report import metrics_table, write_report
from finpod.report.verdict import PickVerdict, pick_verdict
from finpod.rundir import DATASET_HASH_KEY, RunDir, create_run_dir, find_resumable, reports_root
from finpod.spec import Spec
from finpod.version import __version__
from podracer.api import (
    Leaderboard,
    Policy,
    Tournament,
    TrajectoryArchive,
    archive_of,
    fused_agent_factory,
    tournament_exists,
)

if TYPE_CHECKING:
    from finpod.trader import TraderName, TraderPolicy


@dataclass(frozen=True)
class RunResult:
    """A finished run.

    Attributes:
        run_dir: ``reports/<run_id>/``.
        spec: the spec that ran.
        validation: traders and baselines over the validation segment (what selection saw).
        backtest: traders and baselines over the held-out backtest segment.
        leaderboard: final leaderboard entries, best first (rank, pod, lineage, validation score).
        report_html: the self-contained HTML report.
    """

    run_dir: Path
    spec: Spec
    validation: BacktestResult
    backtest: BacktestResult
    leaderboard: list[dict[str, Any]]
    report_html: Path

    @property
    def metrics(self) -> pd.DataFrame:
        """Backtest metrics, one row per trader and baseline (Sharpe, drawdown, Calmar, ...)."""
        return metrics_table(self.backtest)

    @property
    def validation_metrics(self) -> pd.DataFrame:
        """The same figures over the validation segment."""
        return metrics_table(self.validation)

    @property
    def pick(self) -> PickVerdict | None:
        """The run's pick (:func:`~finpod.report.verdict.pick_verdict`): ``best`` when its validation
        Sharpe beat equal weight's, else equal weight, with the edge and its standard error."""
        return pick_verdict(self.validation)

    def policy(self, which: TraderName = "best", *, device: str = "cpu") -> TraderPolicy:
        """A trained trader as a callable on env observations ``(N, D)`` -> actions ``(N, A)``.

        Args:
            which: ``"best"``, ``"ensemble"`` (the top-k the run backtested), ``"trajectory"``
                (the run's archived snapshots, when it keeps an archive) or a 1-based rank.
            device: where it runs.
        """
        from finpod.trader import load_policy

        return load_policy(
            self.run_dir,
            which,
            ensemble_k=self.spec.tournament.ensemble_k,
            action_mode=self.spec.env.action_mode,
            fully_invested=self.spec.env.fully_invested,
            device=device,
        )


def run(
    spec: Spec,
    *,
    out: Path | None = None,
    resume: bool = False,
    data_root: Path | None = None,
    console: Console | None = None,
    report: bool = True,
) -> RunResult:
    """Run the main job for ``spec`` and write its report.

    Args:
        spec: the strategy.
        out: folder that receives ``<run_id>/`` (default: ``./reports``, or ``$FINPOD_HOME/reports``).
        resume: continue the newest unfinished run of this exact spec under ``out``.
        data_root: where a synthetic spec's generated dataset is cached (default: ``./data``, or
            ``$FINPOD_HOME/data``).
        console: where progress and the summary go (default: stdout).
        report: False skips the plots and ``report.html`` (metrics.json and the CSVs are still
            written; ``finpod report RUN_DIR`` renders the page later).

    Raises:
        SpecError, DataError: a bad spec, option or dataset (one line each).
    """
    console = console or text_console()
    clock = PhaseClock()
    device = torch.device(spec.resolve_device())
    root = reports_root(out)
    resumed = find_resumable(spec, root) if resume else None
    if resumed is not None and (resumed.root / TRADER_INPUTS_FILE).is_file():
        trader_inputs(resumed, spec)  # its pods learned on the saved features: refuses others, first
    dataset = (
        Path(resumed.read_info()["dataset"])
        if resumed
        else dataset_for(spec, data_root or default_data_root())
    )
    if resumed is not None:
        resumed.check_dataset(dataset, "resume")  # its pods must go on learning from the same bars
    bars = load_bars(dataset)
    symbols = universe_symbols(spec, bars)
    late = late_symbols(spec, bars)
    panel = selection_panel(spec, bars, symbols, str(device))
    check_horizon(spec, panel)
    context = RunContext.of(spec, panel, device)
    clock.lap("data")
    # every check that can refuse the spec ran above: only now is anything written
    if resumed is not None:
        run_dir = resumed
        console.print(f"resuming [bold]{run_dir.run_id}[/]")
    else:
        run_dir = create_run_dir(spec, root, _run_info(spec, dataset, device))
        console.print(f"run [bold]{run_dir.run_id}[/] on {device}")
    with run_dir.lock():  # one process per run folder: a second --resume is refused
        if resumed is not None:
            record_resume(run_dir, _run_info(spec, dataset, device))
        warning = adjustment_warning(dataset)
        if warning:
            console.print(warning, markup=False, soft_wrap=True)
        if late:
            console.print(
                f"note: not traded, no bar before the backtest segment: {', '.join(late)}",
                markup=False,
                soft_wrap=True,
            )
        if panel.feature_stats is not None:
            save_trader_inputs(run_dir.root, symbols, panel.feature_stats)
        try:
            leaderboard, history = train(context, panel, run_dir, resume=resume, console=console)
        except BaseException:
            if resumed is None and not tournament_exists(run_dir.tournament):
                shutil.rmtree(run_dir.root, ignore_errors=True)  # nothing trained: nothing to resume
            raise
        clock.lap("train")
        run_dir.set_status("backtesting")
        policies = select(spec, leaderboard, context.agent_factory, archive_of(run_dir.tournament))
        settings = context.eval_config
        linear, linear_fit, linear_note = linear_baseline(panel, settings, device)  # train + validation only
        validation = run_backtest(panel, "validation", settings, policies, device, baselines=linear)
        clock.lap("validate")
        del panel
        full = backtest_panel(spec, bars, symbols, str(device))
        backtest = run_backtest(full, "backtest", settings, policies, device, baselines=linear)
        if linear_note:
            validation.notes.append(linear_note)
            backtest.notes.append(linear_note)
        record_backtest_threads(run_dir, validation, backtest)
        clock.lap("backtest")
        if warning:
            validation.notes.append(warning.removeprefix("warning: ").capitalize())
            backtest.notes.append(warning.removeprefix("warning: ").capitalize())
        entries = leaderboard_records(leaderboard)
        paths = write_report(
            run_dir.root,
            backtest=backtest,
            validation=validation,
            spec=spec.resolved_dict(),
            leaderboard_history=history,
            leaderboard_entries=entries,
            run_info={**run_dir.read_info(), "status": "done"},  # what the page describes: a finished run
            render=report,
            linear_baseline=linear_fit,
        )
        clock.lap("report")
        record_phases(run_dir, clock, history[-1]["env_steps"] if history else 0)
        run_dir.record_integrity()
        run_dir.set_status("done")
        print_summary(console, backtest, validation, paths.html if report else None, run_dir.root)
        return RunResult(run_dir.root, spec, validation, backtest, entries, paths.html)


def train(
    context: RunContext, panel: Panel, run_dir: RunDir, *, resume: bool, console: Console
) -> tuple[Leaderboard, list[dict[str, Any]]]:
    """Run (or resume) the tournament of ``context``'s spec on ``panel``'s train segment, ranked on
    its validation segment.

    ``panel`` must be the selection panel: it holds no backtest bar.

    Returns:
        The final leaderboard and its history (one record per pod round).
    """
    if "backtest" in panel.segments:
        raise SpecError("internal: the tournament was handed a panel with backtest bars")
    spec, device = context.spec, context.device

    def make_env(seed: int) -> TradingEnv:
        return context.train_env(panel, seed)

    evaluate = ValidationScore(
        panel,
        context.eval_config,
        device,
        chunks=spec.tournament.validation_chunks,
        warmup_bars=spec.tournament.validation_warmup_bars,
    )

    base = spec.agent_config()
    train_start, train_stop = panel.segment("train")
    config = spec.tournament_config(train_bars=train_stop - train_start)
    budget_env_steps = spec.env_step_budget(train_stop - train_start)
    precision = spec.tournament.cuda_matmul_precision
    factory = precision_agent_factory(context.agent_factory, device, precision)
    factory = fused_agent_factory(factory, make_env, spec.tournament.learners)
    with cuda_matmul_precision(device, precision), pod_backend(spec, device) as backend:
        if resume and tournament_exists(run_dir.tournament):
            tournament = Tournament.resume(run_dir.tournament, factory, base, make_env, evaluate, backend)
        else:
            tournament = Tournament(config, run_dir.tournament, factory, base, make_env, evaluate, backend)
        scores = lambda: tournament.leaderboard.scores()  # noqa: E731
        with (
            tournament,
            TrainingMonitor(
                console,
                run_dir.tensorboard,
                budget_env_steps,
                scores,
                budget_seconds=spec.tournament.budget_seconds,
            ) as monitor,
        ):
            result = tournament.run(on_event=monitor)
    if not result.leaderboard.entries:
        raise SpecError(
            "the tournament finished without scoring any pod; fix: raise tournament.budget_env_steps "
            "or tournament.budget_seconds"
        )
    return result.leaderboard, [dataclasses.asdict(record) for record in result.history]


TRAJECTORY_PREFIX = "trajectory"
"""Name of the trajectory trader, followed by its member count (``trajectory24``)."""


def select(
    spec: Spec, leaderboard: Leaderboard, factory: AgentFactory, archive: TrajectoryArchive | None = None
) -> dict[str, Policy]:
    """The traders: the best leaderboard entry; the ensemble of the best entries of the top-k
    DISTINCT lineages (never a pod and its own descendants) when the board holds >= 2 lineages; and
    the trajectory ensemble, the average target weights of the run's archived snapshots (by default
    its 32 best-validated judged rounds; with ``archive_rule = "even"`` rounds evenly spaced over the
    whole run, whatever they scored; ``archive`` with >= 2 entries)."""
    policies: dict[str, Policy] = {"best": deterministic_policy(leaderboard.load_agent(0, factory))}
    ranks = leaderboard.top_lineage_ranks(spec.tournament.ensemble_k)
    if len(ranks) >= 2:
        agents = [leaderboard.load_agent(rank, factory) for rank in ranks]
        policies[f"ensemble_top{len(ranks)}"] = ensemble_policy(
            agents, spec.env.action_mode, spec.env.fully_invested
        )
    if archive is not None and len(archive.entries) >= 2:
        members = [archive.load_agent(position, factory) for position in range(len(archive.entries))]
        policies[f"{TRAJECTORY_PREFIX}{len(members)}"] = ensemble_policy(
            members, spec.env.action_mode, spec.env.fully_invested
        )
    return policies


def leaderboard_records(leaderboard: Leaderboard) -> list[dict[str, Any]]:
    """The leaderboard's entries as plain dicts with a 1-based ``rank`` (best first)."""
    records = []
    for rank, entry in enumerate(leaderboard.entries, start=1):
        record = entry.to_record()
        records.append({"rank": rank, **record})
    return records


PROCESS_KEYS = (
    "device",
    "backend",
    "torch_threads",
    "torch_threads_per_pod",
    "cuda_matmul_precision",
    "machine",
    "alignment_threads",
    "finpod_version",
    "torch_version",
    "python_version",
)
"""``run.json`` keys that describe the process working on the run (where and how it trains)."""
EARLIER_PROCESSES_KEY = "earlier_processes"
"""``run.json`` key: the :data:`PROCESS_KEYS` of the processes a resumed run ran in before this one."""


def record_resume(run_dir: RunDir, fresh: dict[str, Any]) -> None:
    """Record in ``run.json`` that this process resumes the run: its own :data:`PROCESS_KEYS`
    (backend, torch threads, machine, ...; a resume may run on another backend or machine) replace
    the earlier process's, which move to ``earlier_processes`` with the time it started."""
    info = run_dir.read_info()
    earlier = {key: info[key] for key in PROCESS_KEYS if key in info}
    earlier["started_at"] = info.get("resumed_at", info.get("started_at"))
    info.setdefault(EARLIER_PROCESSES_KEY, []).append(earlier)
    info.update({key: fresh[key] for key in PROCESS_KEYS})
    info["resumed_at"] = fresh["started_at"]
    run_dir.write_info(info)


def record_backtest_threads(run_dir: RunDir, *results: BacktestResult) -> None:
    """Record in ``run.json`` the traders' env steps at each torch thread count of every segment's
    pass (``torch_threads.backtest_steps``; the numbers do not depend on it)."""
    info = run_dir.read_info()
    threads = info.setdefault("torch_threads", {})
    threads["backtest_steps"] = {
        result.segment: {str(count): steps for count, steps in result.steps_by_threads.items()}
        for result in results
    }
    run_dir.write_info(info)


def record_phases(run_dir: RunDir, clock: PhaseClock, env_steps: int) -> None:
    """Record in ``run.json`` the wall seconds of each phase of this process's run (``phase_seconds``),
    its peak resident memory (``peak_rss_bytes``; a resumed run's earlier processes not counted), the
    largest of its pod worker processes' (``peak_worker_rss_bytes``, 0 without any) and the env steps
    the tournament trained in all (``tournament_env_steps``)."""
    info = run_dir.read_info()
    info["tournament_env_steps"] = int(env_steps)
    info["phase_seconds"] = {name: round(seconds, 3) for name, seconds in clock.seconds.items()}
    info["peak_rss_bytes"] = peak_rss_bytes()
    info["peak_worker_rss_bytes"] = peak_rss_bytes(resource.RUSAGE_CHILDREN)
    run_dir.write_info(info)


def _run_info(spec: Spec, dataset: Path, device: torch.device) -> dict[str, Any]:
    backend = resolved_backend(spec, device)
    return {
        "spec_name": spec.name,
        "dataset": str(dataset),
        DATASET_HASH_KEY: read_manifest(dataset).sha256,  # a resume or rerun on other bars is refused
        "device": str(device),
        "backend": backend,
        "finpod_version": __version__,
        "torch_version": torch.__version__,
        "torch_threads_per_pod": spec.tournament.torch_threads_per_pod,
        "cuda_matmul_precision": spec.tournament.cuda_matmul_precision,  # applied on a CUDA device only
        "python_version": platform.python_version(),
        "machine": machine_record(),  # what CPU figures depend on (finpod.cpu_kernels)
        "alignment_threads": align_workers(),  # the calendar alignment's threads (same arrays at any count)
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "torch_threads": {
            "training": training_threads(spec, device),
            "training_workers": population_workers(spec, device) if backend == "population" else None,
            "evaluation": threads_for(1),
            "validation": threads_for(spec.tournament.validation_chunks),
        },
    }
