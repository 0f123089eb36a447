"""CSV text files as a user sees them: their encoding, their delimiter, and their real line numbers.

pandas numbers a file's data records from 0 after the header and skips blank lines, so a record's
position is not its line: a blank line, a line of junk above the header or a quoted field holding a
line break moves every later record. :func:`source_line` maps a record back to the line a user's
editor shows (1-based, every line counted, the header too), so no message blames the wrong line.
"""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Final

DELIMITERS: Final[tuple[str, ...]] = (",", "\t", ";", "|")
UNREADABLE: Final[tuple[type[Exception], ...]] = (OSError, EOFError, zlib.error, csv.Error, UnicodeError)
"""What reading a damaged text file can raise (a truncated gzip raises EOFError)."""
_SNIFF_BYTES: Final[int] = 64 * 1024


def sniff_csv(path: Path) -> tuple[str, str]:
    """The encoding and delimiter of a CSV file, from its byte-order mark and its first line.

    UTF-8 (with or without a BOM) and UTF-16 (with a BOM) are read; the delimiter is whichever of
    comma, tab, semicolon and pipe the first line holds most of. Gzipped files are read as UTF-8
    with commas (pandas decompresses them).

    Args:
        path: a ``.csv`` (or ``.csv.gz``) file.

    Returns:
        ``(encoding, delimiter)`` for :func:`pandas.read_csv`.
    """
    if path.name.endswith(".gz"):
        return "utf-8", ","
    with path.open("rb") as handle:
        head = handle.read(_SNIFF_BYTES)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        encoding = "utf-16"
    elif head.startswith(b"\xef\xbb\xbf"):
        encoding = "utf-8-sig"
    else:
        encoding = "utf-8"
    text = head.decode(encoding, errors="ignore")
    first_line = text.splitlines()[0] if text.strip() else ""
    counts = {delimiter: first_line.count(delimiter) for delimiter in DELIMITERS}
    delimiter = max(DELIMITERS, key=lambda d: (counts[d], d == ","))
    return encoding, delimiter if counts[delimiter] else ","


def _open_text(path: Path, encoding: str) -> io.TextIOBase:
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding=encoding, errors="replace", newline="")
    return io.TextIOWrapper(path.open("rb"), encoding=encoding, errors="replace", newline="")


def records(path: Path) -> Iterator[tuple[int, list[str]]]:
    """``(first line, fields)`` of each record pandas reads from ``path``: blank lines skipped.

    Args:
        path: a ``.csv`` or ``.csv.gz`` file.

    Yields:
        The 1-based line each record starts on and its fields; the first is the header.
    """
    encoding, delimiter = sniff_csv(path)
    with _open_text(path, encoding) as handle:
        reader = csv.reader(handle, delimiter=delimiter)
        consumed = 0
        for fields in reader:
            start, consumed = consumed + 1, reader.line_num
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue  # pandas skips blank and whitespace-only lines
            yield start, fields


def source_line(path: Path, record: int) -> str:
    """Where data record ``record`` of ``path`` is, as a user finds it: ``line N`` or ``row N``.

    Args:
        path: the file pandas read.
        record: 0-based data record (the header not counted), as pandas numbers a frame's rows.

    Returns:
        ``"line N"`` for a CSV file (1-based, counting blank lines, the header and anything above
        it), ``"row N"`` (1-based) for parquet or when the file no longer has that record.
    """
    if path.suffix == ".parquet":
        return f"row {record + 1}"
    try:
        for index, (line, _) in enumerate(records(path)):
            if index == record + 1:
                return f"line {line}"
    except UNREADABLE:
        pass
    return f"row {record + 1}"
