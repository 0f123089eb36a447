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
CHECK_SCRIPT = f"""
<script>
window.addEventListener("load", function () {{
  var images = Array.from(document.images).map(function (image) {{
    return {{alt: image.alt, complete: image.complete, naturalWidth: image.naturalWidth}};
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
    assert len(images) == len(report.plots) + 1  # every plot and the tear sheet
    for image in images:
        assert image["complete"], image["alt"]
        assert image["naturalWidth"] > 0, image["alt"]


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
