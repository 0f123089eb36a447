"""Screenshot a finpod report for the README with headless Chromium.

Usage::

    .venv/bin/python scripts/screenshot_report.py reports/<run_id>/report.html --out docs/report.png
    .venv/bin/python scripts/screenshot_report.py reports/<run_id>/report.html \\
        --section tearsheet --height 2400 --out docs/report_tearsheets.png

Takes the top of the page (header, summary strip, strategy, metrics tables, first plots) at a
desktop width, or the part that starts at a section (``--section tearsheet``: the pyfolio returns,
positions, transactions and round-trip sheets). Needs Debian's ``chromium`` (or another
Chromium/Chrome on ``PATH``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from finpod.errors import FinpodError
from finpod.report.browser import screenshot

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "docs" / "report.png"
DEFAULT_WIDTH_PX = 1280
DEFAULT_HEIGHT_PX = 1800


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, take the screenshot, print where it went; one-line error and exit 2 on failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report_html", type=Path, help="path of a report.html written by `finpod run`")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"PNG to write (default {DEFAULT_OUT})")
    parser.add_argument("--width", type=int, default=DEFAULT_WIDTH_PX, help="viewport width, pixels")
    parser.add_argument("--height", type=int, default=DEFAULT_HEIGHT_PX, help="viewport height, pixels")
    parser.add_argument(
        "--section", default=None, help="start at this element id instead of the top, e.g. tearsheet"
    )
    args = parser.parse_args(argv)
    try:
        if not args.report_html.is_file():
            raise FinpodError(f"{args.report_html}: no such file; fix: pass reports/<run_id>/report.html")
        if args.width <= 0 or args.height <= 0:
            raise FinpodError(f"--width {args.width} --height {args.height}: must be positive pixel counts")
        screenshot(
            args.report_html, args.out, width_px=args.width, height_px=args.height, section=args.section
        )
    except FinpodError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
