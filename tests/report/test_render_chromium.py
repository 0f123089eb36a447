"""report.html renders in headless Chromium: every image decodes and the metrics table is there."""

from __future__ import annotations

import html as html_lib
import json
import re
from pathlib import Path

import pytest

from finpod.report import ReportPaths
from finpod.report.browser import dump_dom
from report.conftest import require_chromium

CHECK_ID = "finpod-render-check"
MIN_INK_SHARE = 0.01
"""Least share of non-white pixels in a plot with data (measured on the test report: empty axes with
a title 0.4 %, the sparsest real panel, a single line, 2 %)."""
CHECK_SCRIPT = f"""
<script>
window.addEventListener("load", function () {{
  // Share of a downscaled copy's pixels that are not near-white: an empty plot has only its frame.
  function ink(image) {{
    var canvas = document.createElement("canvas");
    canvas.width = 160; canvas.height = 80;
    var context = canvas.getContext("2d");
    context.drawImage(image, 0, 0, canvas.width, canvas.height);
    var pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
    var inked = 0;
    for (var i = 0; i < pixels.length; i += 4) {{
      if (pixels[i] < 200 || pixels[i + 1] < 200 || pixels[i + 2] < 200) {{ inked += 1; }}
    }}
    return inked / (canvas.width * canvas.height);
  }}
  var images = Array.from(document.images).map(function (image) {{
    return {{alt: image.alt, complete: image.complete, naturalWidth: image.naturalWidth,
             ink: image.naturalWidth > 0 ? ink(image) : 0}};
  }});
  var result = {{
    images: images,
    metricsRows: document.querySelectorAll("#metrics-table tbody tr").length,
    metricsHeaders: document.querySelectorAll("#metrics-table thead th").length,
    leaderboardRows: document.querySelectorAll("#leaderboard-table tbody tr").length
  }};
  var out = document.createElement("pre");
  out.id = "{CHECK_ID}";
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
}});
</script>
"""


def _probe(page: Path) -> dict[str, object]:
    """Load ``page`` (with :data:`CHECK_SCRIPT` injected) in Chromium and read the probe's result."""
    dom = dump_dom(page)
    match = re.search(rf'<pre id="{CHECK_ID}">(.*?)</pre>', dom, flags=re.DOTALL)
    assert match is not None, "the probe script did not run: the page never finished loading"
    result: dict[str, object] = json.loads(html_lib.unescape(match.group(1)))
    return result


def _with_probe(html: str) -> str:
    assert html.count("</body>") == 1
    return html.replace("</body>", CHECK_SCRIPT + "</body>")


@pytest.fixture(scope="module")
def rendered(report: ReportPaths, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """What the page looks like after Chromium loaded it (a copy with a probe script injected)."""
    require_chromium("render")
    page = tmp_path_factory.mktemp("render") / "report.html"
    page.write_text(_with_probe(report.html.read_text(encoding="utf-8")), encoding="utf-8")
    return _probe(page)


def test_every_image_loaded(rendered: dict[str, object], report: ReportPaths) -> None:
    images = rendered["images"]
    assert isinstance(images, list)
    assert len(images) == len(report.plots) + len(report.tearsheets)  # every panel, once
    for image in images:
        assert image["complete"], image["alt"]
        assert image["naturalWidth"] > 0, image["alt"]


def test_no_plot_is_empty(rendered: dict[str, object]) -> None:
    """Every image carries data, not just axes and a title."""
    images = rendered["images"]
    assert isinstance(images, list)
    for image in images:
        assert image["ink"] > MIN_INK_SHARE, (image["alt"], image["ink"])


def test_metrics_and_leaderboard_tables_are_there(rendered: dict[str, object]) -> None:
    assert rendered["metricsRows"] == 5  # best, ensemble_top3, equal_weight, market, cash
    assert rendered["metricsHeaders"] == 16  # trader name + 15 metrics (sessions are in the header)
    assert rendered["leaderboardRows"] == 3


def test_a_broken_image_is_detected(report: ReportPaths, tmp_path: Path) -> None:
    """The probe would catch a plot that does not decode (guards the test above against passing vacuously)."""
    require_chromium("render")
    broken = tmp_path / "report.html"
    html = report.html.read_text(encoding="utf-8")
    first_image = html.index("data:image/png;base64,") + len("data:image/png;base64,")
    broken.write_text(
        html[:first_image] + "AAAA" + html[first_image + 4 :].replace("</body>", CHECK_SCRIPT + "</body>")
    )
    dom = dump_dom(broken)
    match = re.search(rf'<pre id="{CHECK_ID}">(.*?)</pre>', dom, flags=re.DOTALL)
    assert match is not None
    images = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))["images"]
    assert images[0]["naturalWidth"] == 0


def test_an_empty_plot_is_detected(report: ReportPaths, tmp_path: Path) -> None:
    """The ink probe tells empty axes (frame, ticks and title only) from a plot with data."""
    require_chromium("render")
    import base64

    from finpod.report.style import new_figure, report_style, save_png

    with report_style():
        figure = new_figure(height_in=3.4)
        axes = figure.add_subplot()
        axes.set_title("An empty panel")
        png = save_png(figure, tmp_path / "empty.png")
    html = report.html.read_text(encoding="utf-8")
    first_image = html.index("data:image/png;base64,") + len("data:image/png;base64,")
    end = html.index('"', first_image)
    page = tmp_path / "report.html"
    page.write_text(_with_probe(html[:first_image] + base64.b64encode(png).decode() + html[end:]))
    images = _probe(page)["images"]
    assert isinstance(images, list)
    assert images[0]["ink"] < MIN_INK_SHARE
    assert min(image["ink"] for image in images[1:]) > MIN_INK_SHARE
