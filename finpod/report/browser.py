"""Headless Chromium for reports: dump the rendered DOM (tests) and take screenshots (README).

Uses the system's Chromium (Debian package ``chromium``) through its command line; nothing is
fetched from the network: the flags turn off every background service, and reports are local files.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from finpod.errors import FinpodError

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
"""Executable names tried, in order, on ``PATH``."""
VIRTUAL_TIME_BUDGET_MS = 5000
"""Virtual time Chromium lets the page run (load events, image decoding) before dumping, ms."""
CHROMIUM_TIMEOUT_S = 120.0
"""Wall-clock limit of one Chromium run, seconds."""
_QUIET_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    f"--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}",
)


def find_chromium() -> Path | None:
    """The first Chromium executable on ``PATH``, or ``None`` when none is installed."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found is not None:
            return Path(found)
    return None


def _run_chromium(extra_args: list[str], page: Path) -> str:
    """Run headless Chromium on a local page with a throw-away profile; return its stdout."""
    chromium = find_chromium()
    if chromium is None:
        raise FinpodError(
            f"no Chromium found on PATH (tried {', '.join(CHROMIUM_NAMES)}); fix: install it, e.g. "
            "`apt-get install chromium`"
        )
    with tempfile.TemporaryDirectory(prefix="finpod-chromium-") as profile:
        command = [str(chromium), *_QUIET_FLAGS, f"--user-data-dir={profile}", *extra_args]
        completed = subprocess.run(
            [*command, page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=CHROMIUM_TIMEOUT_S,
            check=False,
        )
    if completed.returncode != 0:
        last_line = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        raise FinpodError(f"Chromium exited with {completed.returncode} on {page}: {last_line}")
    return completed.stdout


def dump_dom(page: Path) -> str:
    """Load a local HTML file in headless Chromium, run its scripts, and return the resulting DOM."""
    return _run_chromium(["--dump-dom"], page)


def section_only(html: str, section: str) -> str:
    """The page with its ``<main>`` reduced to the ``<section id=...>`` named ``section``.

    Raises:
        FinpodError: the page has no such section.
    """
    match = re.search(rf'<section id="{re.escape(section)}">.*?</section>', html, flags=re.DOTALL)
    main = re.search(r"(<main[^>]*>).*(</main>)", html, flags=re.DOTALL)
    if match is None or main is None:
        raise FinpodError(f"the report has no section {section!r}; fix: use an id such as tearsheet or plots")
    return html[: main.start()] + main.group(1) + match.group(0) + main.group(2) + html[main.end() :]


def screenshot(
    page: Path, png_path: Path, *, width_px: int, height_px: int, section: str | None = None
) -> None:
    """Save a PNG screenshot of ``width_px`` x ``height_px`` pixels of a local HTML file.

    The top of the page, or the part starting at the element whose id is ``section``.
    """
    png_path.parent.mkdir(parents=True, exist_ok=True)
    args = [f"--screenshot={png_path.resolve()}", f"--window-size={width_px},{height_px}"]
    if section is None:
        _run_chromium(args, page)
    else:
        # Headless Chromium does not reliably scroll to a fragment before it shoots: shoot a copy of
        # the page whose body holds only that section (same styles, same images).
        with tempfile.TemporaryDirectory(prefix="finpod-section-") as folder:
            only = Path(folder) / page.name
            only.write_text(section_only(page.read_text(encoding="utf-8"), section), encoding="utf-8")
            _run_chromium(args, only)
    if not png_path.is_file():
        raise FinpodError(f"Chromium wrote no screenshot to {png_path}")
