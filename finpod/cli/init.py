"""``finpod init [DIR]``: copy the example strategy specs shipped in the package into ``DIR/strategies``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer

from finpod.cli.output import err_console
from finpod.errors import SpecError
from finpod.paths import EXAMPLES_PACKAGE_DIR, example_specs


def init_command(
    folder: Annotated[
        Path, typer.Argument(help="project folder; the specs go to FOLDER/strategies/ (default: .)")
    ] = Path("."),
    force: Annotated[bool, typer.Option("--force", help="overwrite spec files that already exist")] = False,
) -> None:
    """Copy the example strategy specs into FOLDER/strategies/, ready for `finpod run`."""
    copied = copy_examples(folder, force=force)
    err_console().print(f"copied {len(copied)} files to {copied[0].parent}", soft_wrap=True)
    err_console().print(
        f"next: finpod run {Path(folder) / EXAMPLES_PACKAGE_DIR / 'demo.toml'}", soft_wrap=True
    )


def copy_examples(folder: Path, *, force: bool = False) -> list[Path]:
    """Copy every shipped example spec into ``folder/strategies/``; returns the files written.

    Raises:
        SpecError: a file would be overwritten and ``force`` is false (nothing is copied then).
    """
    target = Path(folder).expanduser().resolve() / EXAMPLES_PACKAGE_DIR
    sources = example_specs()
    clashes = [target / source.name for source in sources if (target / source.name).exists()]
    if clashes and not force:
        raise SpecError(
            f"{clashes[0]} already exists; fix: pass --force to overwrite it, or init another folder"
        )
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for source in sources:
        shutil.copyfile(source, target / source.name)
        written.append(target / source.name)
    return written


def register(app: typer.Typer) -> None:
    """Add ``finpod init`` to the top-level app."""
    app.command("init")(init_command)
