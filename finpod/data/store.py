"""Datasets on disk: one folder = ``bars.parquet`` + ``manifest.json``, written atomically.

A dataset folder holds the bars in the bar schema (:mod:`finpod.data.schema`), sorted by symbol then
timestamp, and a manifest that describes them (source, frequency, symbols, first/last bar, price
adjustment, calendar, row count, sha256 of ``bars.parquet``, what the loader repaired).

Writes are atomic: everything is written into a hidden temporary folder beside the target, flushed
to disk, and renamed into place in one ``os.rename``. A writer that dies part-way leaves at most a
hidden ``.<name>.tmp-*`` folder, never a folder that reads as a whole dataset; :func:`read_dataset`
also re-checks the hash and row count, so a truncated or edited ``bars.parquet`` is an error.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, ValidationError

from finpod.data.schema import BAR_COLUMNS
from finpod.errors import DataError
from finpod.version import __version__
from podracer.api import fsync_directory

BARS_FILE: Final[str] = "bars.parquet"
MANIFEST_FILE: Final[str] = "manifest.json"
CALENDAR_NAME: Final[str] = "XNAS"
MANIFEST_FORMAT_VERSION: Final[int] = 1
_HASH_CHUNK_BYTES: Final[int] = 1 << 22
_ZSTD_LEVEL: Final[int] = 1
"""Fast zstd: byte-stream-split floats compress about as well as at higher levels."""
_FLOAT_COLUMNS: Final[tuple[str, ...]] = ("open", "high", "low", "close", "volume")

Adjustment = Literal["split+dividend", "split", "none", "synthetic"]
"""How a dataset's prices are adjusted: ``split+dividend`` by the vendor (or Alpaca's ``all``);
``split``: raw prices checked for splits on import, each found split adjusted (from the file's split
column or a ``--adjust splits=FILE`` table) and no split-like jump left, dividends not adjusted;
``none``: imported as given, unchecked (``--adjustment none``: every run warns); ``synthetic``:
finpod's own market."""

_ARROW_SCHEMA: Final[pa.Schema] = pa.schema(
    [
        ("timestamp", pa.timestamp("ns", tz="UTC")),
        ("symbol", pa.string()),
        ("open", pa.float64()),
        ("high", pa.float64()),
        ("low", pa.float64()),
        ("close", pa.float64()),
        ("volume", pa.float64()),
    ]
)


class Manifest(BaseModel):
    """What a dataset folder holds; the JSON in ``manifest.json``.

    Attributes:
        format_version: version of this manifest layout.
        source: where the bars came from (``synthetic``, ``alphavantage``, ``pooksoft``, ``alpaca``...).
        frequency: ``"1min"`` or ``"1d"``.
        symbols: the tickers present, sorted.
        first_bar: UTC ISO timestamp of the earliest bar START.
        last_bar: UTC ISO timestamp of the latest bar START.
        adjustment: ``"split+dividend"``, ``"split"``, ``"none"`` or ``"synthetic"`` (:data:`Adjustment`).
        calendar: exchange calendar the bars follow (``"XNAS"``).
        rows: number of bars in ``bars.parquet``.
        sha256: hex digest of ``bars.parquet``.
        created_at: UTC ISO time the dataset was written.
        finpod_version: version of finpod that wrote it.
        repairs: what the loader repaired, counted (e.g. ``{"zero_volume_bars": 61}``).
        notes: human-readable lines about what was skipped or how the data was made.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int
    source: str
    frequency: Literal["1min", "1d"]
    symbols: tuple[str, ...]
    first_bar: str
    last_bar: str
    adjustment: Adjustment
    calendar: str
    rows: int
    sha256: str
    created_at: str
    finpod_version: str
    repairs: dict[str, int]
    notes: tuple[str, ...]


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_HASH_CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def _write_bars(bars: pd.DataFrame, path: Path) -> None:
    table = pa.Table.from_pandas(bars.loc[:, list(BAR_COLUMNS)], schema=_ARROW_SCHEMA, preserve_index=False)
    pq.write_table(
        table,
        path,
        compression="zstd",
        compression_level=_ZSTD_LEVEL,
        use_dictionary=["symbol"],
        column_encoding={
            "timestamp": "DELTA_BINARY_PACKED",
            **dict.fromkeys(_FLOAT_COLUMNS, "BYTE_STREAM_SPLIT"),
        },
    )
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


def _write_manifest(manifest: Manifest, path: Path) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _iso_utc(stamp: pd.Timestamp) -> str:
    return stamp.tz_convert("UTC").isoformat()


def sort_bars(bars: pd.DataFrame) -> pd.DataFrame:
    """Bars in the canonical on-disk order: by symbol, then timestamp, with a fresh 0..n-1 index.

    Already-sorted input (the usual case) is detected in one vectorised pass and not re-sorted.

    Args:
        bars: bar-schema frame, any row order.

    Returns:
        The same rows sorted by ``(symbol, timestamp)`` (stable).
    """
    codes, _ = pd.factorize(bars["symbol"], sort=True)
    stamps = bars["timestamp"].to_numpy(dtype="datetime64[ns]").view(np.int64)
    code_step, stamp_step = np.diff(codes), np.diff(stamps)
    columns = list(BAR_COLUMNS)
    if bool(((code_step > 0) | ((code_step == 0) & (stamp_step >= 0))).all()):
        return bars.loc[:, columns].reset_index(drop=True)
    order = np.lexsort((stamps, codes))
    return bars.loc[:, columns].take(order).reset_index(drop=True)


def write_dataset(
    bars: pd.DataFrame,
    out: Path,
    *,
    source: str,
    frequency: Literal["1min", "1d"],
    adjustment: Adjustment,
    repairs: Mapping[str, int],
    notes: Sequence[str],
) -> Manifest:
    """Write validated bars as a dataset folder, atomically.

    Args:
        bars: bar-schema frame (already validated by :func:`finpod.data.validate.validate_bars`);
            at least one row. It is sorted by ``(symbol, timestamp)`` on the way out.
        out: the dataset folder to create; must not exist yet (or be an empty folder).
        source: where the bars came from, recorded in the manifest.
        frequency: ``"1min"`` or ``"1d"``.
        adjustment: price adjustment of the bars.
        repairs: what the loader repaired, counted.
        notes: human-readable lines (what was skipped, how the data was made).

    Returns:
        The manifest written to ``out/manifest.json``.

    Raises:
        DataError: ``out`` already holds files, or ``bars`` is empty.
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DataError(f"{out}: already exists; remove it or choose another output folder")
    if len(bars) == 0:
        raise DataError(f"{out}: no bars to write; check the input files")
    ordered = sort_bars(bars)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        _write_bars(ordered, tmp / BARS_FILE)
        manifest = Manifest(
            format_version=MANIFEST_FORMAT_VERSION,
            source=source,
            frequency=frequency,
            symbols=tuple(sorted(ordered["symbol"].unique())),
            first_bar=_iso_utc(ordered["timestamp"].min()),
            last_bar=_iso_utc(ordered["timestamp"].max()),
            adjustment=adjustment,
            calendar=CALENDAR_NAME,
            rows=len(ordered),
            sha256=_sha256_of(tmp / BARS_FILE),
            created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            finpod_version=__version__,
            repairs=dict(repairs),
            notes=tuple(notes),
        )
        _write_manifest(manifest, tmp / MANIFEST_FILE)
        fsync_directory(tmp)
        if out.is_dir():
            out.rmdir()
        os.rename(tmp, out)
        fsync_directory(out.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def read_manifest(path: Path) -> Manifest:
    """Read and check ``path/manifest.json``.

    Args:
        path: a dataset folder.

    Returns:
        The parsed manifest.

    Raises:
        DataError: the folder or its manifest is missing, unreadable or malformed.
    """
    if path.is_file():
        raise DataError(
            f"{path}: a file, not a dataset folder; fix: pass the folder `finpod data import` or "
            "`synth` wrote (it holds manifest.json and bars.parquet)"
        )
    if not path.is_dir():
        raise DataError(f"{path}: no such dataset folder; create one with `finpod data import` or `synth`")
    manifest_path = path / MANIFEST_FILE
    if not manifest_path.is_file():
        raise DataError(
            f"{path}: no {MANIFEST_FILE}, so this is not a complete dataset "
            "(an interrupted write?); re-run the import into a fresh folder"
        )
    try:
        manifest = Manifest.model_validate_json(manifest_path.read_text(encoding="utf-8"))
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise DataError(
            f"{manifest_path}: malformed manifest at {where}: {first['msg']}; re-create the dataset"
        ) from None
    if manifest.format_version > MANIFEST_FORMAT_VERSION:
        raise DataError(
            f"{manifest_path}: manifest format {manifest.format_version}, newer than this finpod reads "
            f"(up to {MANIFEST_FORMAT_VERSION}); fix: upgrade finpod, or re-create the dataset with this one"
        )
    if manifest.format_version < 1:
        raise DataError(
            f"{manifest_path}: malformed manifest at format_version: {manifest.format_version}; "
            "re-create the dataset"
        )
    return manifest


def read_dataset(path: Path) -> tuple[pd.DataFrame, Manifest]:
    """Read a dataset folder after checking it is whole (hash and row count match the manifest).

    Args:
        path: a dataset folder written by :func:`write_dataset`.

    Returns:
        ``(bars, manifest)``: bars in the bar schema sorted by ``(symbol, timestamp)``, and the manifest.

    Raises:
        DataError: the folder is not a whole dataset (missing files, hash or row-count mismatch).
    """
    manifest = read_manifest(path)
    bars_path = path / BARS_FILE
    if not bars_path.is_file():
        raise DataError(f"{path}: {BARS_FILE} is missing; re-create the dataset")
    digest = _sha256_of(bars_path)
    if digest != manifest.sha256:
        raise DataError(
            f"{bars_path}: sha256 {digest[:12]}... does not match the manifest's "
            f"{manifest.sha256[:12]}... (truncated or edited); re-create the dataset"
        )
    table = pq.read_table(bars_path, read_dictionary=["symbol"])
    if table.num_rows != manifest.rows:
        raise DataError(
            f"{bars_path}: {table.num_rows} rows but the manifest says {manifest.rows}; re-create the dataset"
        )
    symbol_index = table.schema.get_field_index("symbol")
    table = table.set_column(symbol_index, "symbol", table.column(symbol_index).cast(pa.string()))
    return table.to_pandas(), manifest
