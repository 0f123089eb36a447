"""``finpod bench data|env|train``: throughput and peak-memory benchmarks."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True)
