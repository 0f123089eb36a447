"""``finpod data ...``: synth, import, fetch, info."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True)
