"""A run's folder: ``reports/<run_id>/`` with the resolved spec, the tournament, TensorBoard and report.

``run_id`` = ``<UTC yyyymmdd-HHMMSS>-<spec name>-<8 hex of the resolved spec's hash>``. The status
file ``run.json`` says whether the run finished; ``--resume`` picks the newest unfinished run of the
same resolved spec.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import hashlib
import itertools
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from finpod.errors import SpecError
from finpod.paths import default_reports_root
from finpod.report.atomic import write_text_atomic
from finpod.spec import Spec

RUN_FILE = "run.json"
SPEC_TOML = "spec.toml"
SPEC_JSON = "spec.json"

LOCK_FILE = ".lock"
"""Held (``flock``) by the one process working in a run folder; holds that process's pid."""
INTEGRITY_KEY = "integrity"
"""``run.json`` key: ``{"run_id": ..., "sha256": {relative path: hex digest}}`` of the run's parts."""
PART_PATTERNS = (
    "*.csv",
    "validation/*.csv",
    "report_inputs.json",
    "tournament/leaderboard/index.json",
    "tournament/archive/index.json",
    "tournament/events.jsonl",
    "spec.toml",
    "spec.json",
    "trader_inputs.pt",
)
"""The parts a finished run records the sha256 of: returns, positions, ..., the leaderboard index
(and the trajectory archive's, when the run keeps one),
the tournament's event log (the verdict's trial count), the spec every rerun reads, and the feature
statistics a paper trader or replay reuses."""

DATASET_HASH_KEY = "dataset_sha256"
"""``run.json`` key: the sha256 of the bars the run trained on (its dataset manifest's ``sha256``)."""

RunStatus = Literal["training", "backtesting", "done"]


@dataclass(frozen=True)
class RunDir:
    """Paths inside one run folder."""

    root: Path

    @property
    def run_id(self) -> str:
        """The folder's name."""
        return self.root.name

    @property
    def spec_toml(self) -> Path:
        """The resolved spec, TOML (what ``finpod run`` can run again)."""
        return self.root / SPEC_TOML

    @property
    def spec_json(self) -> Path:
        """The resolved spec, JSON (for scripts)."""
        return self.root / SPEC_JSON

    @property
    def tournament(self) -> Path:
        """The podracer tournament's folder (leaderboard, pods, history)."""
        return self.root / "tournament"

    @property
    def tensorboard(self) -> Path:
        """TensorBoard event files (``tensorboard --logdir <this>``)."""
        return self.root / "tensorboard"

    @property
    def run_file(self) -> Path:
        """``run.json``: status, spec hash, device, dataset, times."""
        return self.root / RUN_FILE

    def read_info(self) -> dict[str, Any]:
        """``run.json`` as a dict.

        Raises:
            SpecError: the folder is not a finpod run, or its ``run.json`` is damaged.
        """
        if not self.run_file.is_file():
            raise SpecError(f"{self.root}: not a finpod run folder (no {RUN_FILE}); pass reports/<run_id>")
        try:
            info = json.loads(self.run_file.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise SpecError(
                f"{self.run_file}: not a valid run file ({err}); fix: restore it from a backup or "
                "start a new run (the folder cannot be resumed or rerun)"
            ) from None
        if not isinstance(info, dict) or not isinstance(info.get("run_id", ""), str):
            raise SpecError(
                f"{self.run_file}: not a finpod run file (expected a JSON object with run_id, status); "
                "fix: start a new run"
            )
        return info

    def write_info(self, info: dict[str, Any]) -> None:
        """Replace ``run.json`` atomically and durably (temp file, fsync, rename)."""
        write_text_atomic(self.run_file, json.dumps(info, indent=2, sort_keys=True))

    def set_status(self, status: RunStatus) -> None:
        """Record the run's progress in ``run.json``."""
        info = self.read_info()
        info["status"] = status
        info[f"{status}_at"] = _now().isoformat(timespec="seconds")
        self.write_info(info)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder's OS lock (``flock``) for the ``with`` block: one process per run folder.

        The kernel releases the lock when the process dies, even on SIGKILL.

        Raises:
            SpecError: another process holds it (the message names its pid).
        """
        path = self.root / LOCK_FILE
        handle = path.open("a+", encoding="utf-8")
        try:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                if err.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                raise SpecError(
                    f"{self.root}: another finpod process (pid {holder}) is working in this run folder; "
                    "fix: wait for it to finish (or stop it), then run the command again"
                ) from None
            handle.seek(0)
            handle.truncate()
            handle.write(str(os.getpid()))
            handle.flush()
            yield
        finally:
            handle.close()

    def record_integrity(self) -> None:
        """Record in ``run.json`` the run id and the sha256 of every part (:data:`PART_PATTERNS`)."""
        info = self.read_info()
        info[INTEGRITY_KEY] = {"run_id": self.run_id, "sha256": self._digests()}
        self.write_info(info)

    def verify_integrity(self) -> None:
        """Refuse a run folder whose parts are not the ones it wrote (truncated, edited, foreign).

        A run folder made before parts were recorded (no ``integrity`` in ``run.json``) passes.

        Raises:
            SpecError: a recorded part is missing or its sha256 differs (truncated, edited, or
                copied in from another run).
        """
        record = self.read_info().get(INTEGRITY_KEY)
        if record is None:
            return
        fix = "fix: restore the run folder as `finpod run` wrote it, or run the spec again"
        run_id = record.get("run_id", self.run_id)
        found = self._digests()
        for name, digest in sorted(record.get("sha256", {}).items()):
            if name not in found:
                raise SpecError(f"{self.root / name}: part of run {run_id} is missing; {fix}")
            if found[name] != digest:
                raise SpecError(
                    f"{self.root / name}: not the file run {run_id} wrote (its sha256 differs: "
                    f"truncated, edited or copied from another run); {fix}"
                )

    def check_dataset(self, dataset: Path, what: str) -> None:
        """Refuse to go on with ``dataset`` when its bars are not the ones the run started on.

        A dataset folder can be written again (a new fetch, an import with other adjustments, the
        same path): resuming a run on it would train its pods on two markets, and a rerun would
        not reproduce its figures. A run folder made before the hash was recorded passes.

        Args:
            dataset: the dataset folder ``run.json`` names.
            what: what was asked (``"resume"``, ``"rerun"``), for the message.

        Raises:
            SpecError: the dataset's bars changed since the run started.
            DataError: the dataset folder or its manifest is missing or unreadable.
        """
        from finpod.data.store import read_manifest  # pandas and pyarrow: not for every command's start

        recorded = self.read_info().get(DATASET_HASH_KEY)
        if recorded is None:
            return
        current = read_manifest(dataset).sha256
        if current != recorded:
            raise SpecError(
                f"{dataset}: its bars changed since run {self.run_id} started (sha256 {current[:12]}, "
                f"the run trained on {recorded[:12]}), so it cannot {what} on them; fix: restore the "
                "dataset the run trained on, or start a new run on this one"
            )

    def _digests(self) -> dict[str, str]:
        parts = sorted(
            {path for pattern in PART_PATTERNS for path in self.root.glob(pattern) if path.is_file()}
        )
        return {str(path.relative_to(self.root)): _sha256(path) for path in parts}

    def load_spec(self) -> Spec:
        """The resolved spec saved with the run (settings it predates read as it was trained:
        :meth:`Spec.from_saved`)."""
        if not self.spec_toml.is_file():
            raise SpecError(f"{self.root}: no {SPEC_TOML}; pass a folder made by `finpod run`")
        return Spec.from_saved(self.spec_toml)


def load_spec_file(path: str | Path) -> Spec:
    """A spec file as ``finpod run`` reads it: a run folder's own ``spec.toml`` (``run.json`` beside
    it) as the run was trained (:meth:`Spec.from_saved`, so ``finpod run <run>/spec.toml --resume``
    finds the run), any other file with :meth:`Spec.from_toml`.

    Raises:
        SpecError: as :meth:`Spec.from_toml`.
    """
    file = Path(path).expanduser()
    if file.name == SPEC_TOML and (file.parent / RUN_FILE).is_file():
        return Spec.from_saved(file)
    return Spec.from_toml(file)


def reports_root(out: Path | None) -> Path:
    """``out`` (absolute), else ``./reports`` (``$FINPOD_HOME/reports`` when that is set)."""
    return out.expanduser().resolve() if out is not None else default_reports_root()


def create_run_dir(spec: Spec, root: Path, run_info: dict[str, Any]) -> RunDir:
    """Make ``root/<run_id>/`` and save the resolved spec (TOML and JSON) and ``run.json``."""
    stamp = _now().strftime("%Y%m%d-%H%M%S")
    run = RunDir(root / f"{stamp}-{spec.name}-{spec.spec_hash()}")
    root.mkdir(parents=True, exist_ok=True)
    for attempt in itertools.count(2):
        try:
            run.root.mkdir()
            break
        except FileExistsError:  # two runs of one spec in the same second
            run = RunDir(root / f"{stamp}-{spec.name}-{spec.spec_hash()}-{attempt}")
    try:
        write_text_atomic(run.spec_toml, spec.to_toml())
        write_text_atomic(run.spec_json, json.dumps(spec.resolved_dict(), indent=2))
        run.write_info(
            {**run_info, "run_id": run.run_id, "spec_hash": spec.spec_hash(), "status": "training"}
        )
    except BaseException:
        shutil.rmtree(run.root, ignore_errors=True)  # a half-made folder must not look resumable
        raise
    return run


def find_resumable(spec: Spec, root: Path) -> RunDir:
    """The newest unfinished run of this exact resolved spec under ``root``.

    Raises:
        SpecError: there is none.
    """
    pattern = f"*-{spec.name}-{spec.spec_hash()}*"
    candidates = sorted(root.glob(pattern), reverse=True) if root.is_dir() else []
    finished: RunDir | None = None
    for folder in candidates:
        run = RunDir(folder)
        if not run.run_file.is_file():
            continue
        if run.read_info().get("status") != "done":
            return run
        finished = finished or run
    if finished is not None:
        raise SpecError(
            f"no unfinished run of spec {spec.name!r} (hash {spec.spec_hash()}) under {root}: its run "
            f"{finished.run_id} has finished, there is nothing to resume; fix: drop --resume to train a "
            f"new run, or rerun its figures with `finpod backtest {finished.root}`"
        )
    raise SpecError(
        f"no unfinished run of spec {spec.name!r} (hash {spec.spec_hash()}) under {root}; "
        "fix: drop --resume to start a new run (a changed spec starts a new run)"
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
