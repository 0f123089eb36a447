"""Regenerate finpod/data/nasdaq100_membership.json from the MIT-licensed n100tickers YAML files.

Usage: ``python scripts/build_membership.py [SOURCE_DIR]`` (default ``../shared/data/universe/n100tickers``
beside the checkout). The output keeps, per year, the members on January 1 and the dated changes,
exactly as the source states them, plus the source's attribution and license text.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO_ROOT.parent / "shared" / "data" / "universe" / "n100tickers"
OUTPUT = REPO_ROOT / "finpod" / "data" / "nasdaq100_membership.json"
ATTRIBUTION = (
    "NASDAQ-100 membership from n100tickers by Jeff McCarrell "
    "(https://github.com/jmccarrell/n100tickers, PyPI nasdaq-100-ticker-history), MIT License. "
    "Tickers as traded at the time. Membership on a date = that year's January-1 members with the "
    "changes dated on or before it applied."
)


def read_year(path: Path) -> tuple[int, dict[str, object]]:
    """One ``n100-ticker-changes-YYYY.yaml`` as ``(year, {"jan1": [...], "changes": {...}})``."""
    # BaseLoader keeps every scalar a string: YAML 1.1 would read the ticker ON as the boolean True.
    raw = yaml.load(path.read_text(), Loader=yaml.BaseLoader)
    changes = {
        str(date): {
            "added": sorted(change.get("union", [])),
            "removed": sorted(change.get("difference", [])),
        }
        for date, change in sorted((raw.get("changes") or {}).items())
    }
    return int(raw["year"]), {"jan1": sorted(raw["tickers_on_Jan_1"]), "changes": changes}


def build(source: Path) -> dict[str, object]:
    """The packaged membership document built from every YAML file in ``source``."""
    years = dict(read_year(path) for path in sorted(source.glob("n100-ticker-changes-*.yaml")))
    if not years:
        raise SystemExit(f"no n100-ticker-changes-*.yaml files in {source}")
    return {
        "attribution": ATTRIBUTION,
        "license": (source / "LICENSE").read_text(),
        "years": {str(year): years[year] for year in sorted(years)},
    }


def main() -> None:
    """Write the JSON (one ticker list per line keeps it compact and diffable)."""
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SOURCE
    document = build(source)
    OUTPUT.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
    (OUTPUT.parent / "nasdaq100_membership.LICENSE").write_text(
        ATTRIBUTION + "\n\n" + str(document["license"])
    )


if __name__ == "__main__":
    main()
