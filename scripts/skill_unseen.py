"""The skill bench on the signal kind it never plants: ``momentum_60`` (the trailing 60-bar
cross-sectional return continues; :mod:`finpod.data.signals`), against its oracle and the ridge.

No finpod default was chosen on this kind, so it is the bench's check of skill on data the code was
never tuned on. The script adds ``daily20-momentum_60-ic05-5bp`` and ``daily100-momentum_60-ic05-5bp``
(and the ``ic02`` and ``20bp`` variants) to the bench's cases, each the daily ``reversal_5`` case of
that size, strength and fee with the other signal, then runs ``finpod`` with the arguments given::

    PYTHONPATH=.:engine .venv/bin/python scripts/skill_unseen.py bench skill \\
        --case daily100-momentum_60-ic05-5bp --contender tournament --hyper defaults \\
        --seeds 1 --first-seed 0 --json

BENCHMARKS.md "Issue 20 at 20 bp, and the kind the bench never plants" ran it on seeds 0-4.
"""

from __future__ import annotations

import dataclasses
import sys

from finpod.bench import skill_bench
from finpod.bench.skill_names import DAILY_SIZES, DAILY_STRENGTHS, FEES_BPS, daily_case_name
from finpod.data.signals import SignalSpec

UNSEEN_KIND = "momentum_60"
"""The kind the bench never plants (finpod's defaults were tuned on the others)."""


def add_unseen_cases() -> list[str]:
    """Add the unseen kind's daily cases to :data:`finpod.bench.skill_bench.CASES`; their names."""
    names = []
    for size in DAILY_SIZES:
        for fee in FEES_BPS:
            for strength in DAILY_STRENGTHS:
                twin = skill_bench.CASES[daily_case_name(size, "reversal_5", strength, fee)]
                name = daily_case_name(size, UNSEEN_KIND, strength, fee)
                skill_bench.CASES[name] = dataclasses.replace(
                    twin, name=name, signal=SignalSpec(UNSEEN_KIND, strength)
                )
                names.append(name)
    return names


def main(argv: list[str] | None = None) -> None:
    """Add the cases, then run the ``finpod`` CLI on ``argv`` (default: this script's arguments)."""
    from finpod.cli import main as finpod_main

    add_unseen_cases()
    sys.argv = ["finpod", *(sys.argv[1:] if argv is None else argv)]
    finpod_main()


if __name__ == "__main__":
    main()
