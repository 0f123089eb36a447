"""Where a profiled run's host time went: py-spy's raw (collapsed) stacks -> seconds by thread and frame.

    py-spy record --rate 50 --threads --idle --subprocesses --format raw --output run.spy -- \\
        python -m finpod ...
    python scripts/spy_phases.py run.spy[.gz] [--rate 50] [--under NAME] [--top 25]

For each thread with samples: its seconds, then the frames with the most inclusive seconds (a frame
counted once per stack) and the most self seconds (the leaf). ``--under NAME`` keeps only stacks
through a frame whose function name contains NAME (e.g. ``_run_round`` or ``validate``).
"""

from __future__ import annotations

import argparse
import gzip
from collections import Counter, defaultdict
from pathlib import Path

WAITS = ("wait", "sleep", "get", "select", "poll", "acquire", "join", "result")
"""A leaf frame whose function name ends with one of these is a thread waiting, not working."""


def read_stacks(path: Path) -> list[tuple[str, list[str], int]]:
    """``(thread, frames root first, samples)`` for each line of a py-spy raw file (``.gz`` too);
    with ``--subprocesses`` the thread is named with its process id."""
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    stacks = []
    for line in text.splitlines():
        body, _, count = line.rpartition(" ")
        if not body or not count.isdigit():
            continue
        frames = body.split(";")
        thread = frames.pop(0)
        if thread.startswith("process ") and frames:
            thread = f"{thread.split(':', 1)[0]} {frames.pop(0)}"
        stacks.append((thread, frames, int(count)))
    return stacks


def short(frame: str) -> str:
    """``name (path/to/file.py:123)`` -> ``name (file.py)``: one entry per function, not per line."""
    name, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rsplit("/", 1)[-1]
    return f"{name} ({file})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", type=Path)
    parser.add_argument("--rate", type=float, default=50.0, help="py-spy's samples per second")
    parser.add_argument("--under", default="", help="only stacks through a frame whose name contains this")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    per_thread: dict[str, list[tuple[list[str], int]]] = defaultdict(list)
    for thread, frames, count in read_stacks(args.path):
        names = [short(frame) for frame in frames]
        if args.under and not any(args.under in name.split(" (")[0] for name in names):
            continue
        per_thread[thread].append((names, count))
    ranked = sorted(per_thread.items(), key=lambda item: -sum(count for _, count in item[1]))
    for thread, stacks in ranked:
        total = sum(count for _, count in stacks)
        if total / args.rate < 0.5 or not stacks:
            continue
        inclusive: Counter[str] = Counter()
        leaf: Counter[str] = Counter()
        for names, count in stacks:
            for name in set(names):
                inclusive[name] += count
            if names:
                leaf[names[-1]] += count
        waiting = sum(count for name, count in leaf.items() if name.split(" (")[0].endswith(WAITS))
        print(f"\n## {thread}: {total / args.rate:.1f} s, {waiting / args.rate:.1f} s of it waiting")
        print("inclusive s | self s | frame (frames in every sample left out)")
        shown = [(name, count) for name, count in inclusive.most_common() if count < 0.98 * total]
        for name, count in shown[: args.top]:
            print(f"{count / args.rate:11.1f} | {leaf.get(name, 0) / args.rate:6.1f} | {name}")


if __name__ == "__main__":
    main()
