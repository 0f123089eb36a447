"""scripts/screenshot_report.py: a PNG of the report, and one-line errors for bad arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from finpod.report import ReportPaths
from repo import load_script
from report.conftest import require_chromium


def test_screenshot_of_a_report(report: ReportPaths, tmp_path: Path) -> None:
    require_chromium("screenshot")
    out = tmp_path / "shot.png"
    code = load_script("screenshot_report").main(
        [str(report.html), "--out", str(out), "--width", "800", "--height", "600"]
    )
    assert code == 0
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_screenshot_of_the_tear_sheets_differs_from_the_top(report: ReportPaths, tmp_path: Path) -> None:
    require_chromium("screenshot")
    script = load_script("screenshot_report")
    top, sheets = tmp_path / "top.png", tmp_path / "sheets.png"
    assert script.main([str(report.html), "--out", str(top), "--width", "800", "--height", "600"]) == 0
    args = [
        str(report.html),
        "--out",
        str(sheets),
        "--width",
        "800",
        "--height",
        "600",
        "--section",
        "tearsheet",
    ]
    assert script.main(args) == 0
    assert sheets.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    from PIL import Image

    with Image.open(sheets) as shot:
        grey = shot.convert("L")
        dark = sum(count for value, count in enumerate(grey.histogram()) if value < 200)
        assert dark / (grey.width * grey.height) > 0.02  # the pyfolio sheets, not a blank viewport


def test_missing_report_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = load_script("screenshot_report").main(
        [str(tmp_path / "nope.html"), "--out", str(tmp_path / "x.png")]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ")
    assert "nope.html: no such file" in err
    assert err.count("\n") == 1


def test_bad_size_is_a_one_line_error(
    report: ReportPaths, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = load_script("screenshot_report").main(
        [str(report.html), "--out", str(tmp_path / "x.png"), "--width", "0"]
    )
    assert code == 2
    assert "must be positive pixel counts" in capsys.readouterr().err
