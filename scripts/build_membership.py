"""Regenerate finpod/data/nasdaq100_membership.json from the MIT-licensed n100tickers YAML files.

Usage: ``python scripts/build_membership.py [UNIVERSE_DIR]`` (default ``../shared/data/universe``
beside the checkout). The output keeps, per year, the members on January 1 and the dated changes,
exactly as n100tickers states them, plus its attribution and license text, and the dated ticker
renames (FB -> META ...) listed as ``ticker_change`` events in index_constitution's events file, so
that data keyed by today's ticker can be matched to the ticker a member traded under then.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO_ROOT.parent / "shared" / "data" / "universe"
OUTPUT = REPO_ROOT / "finpod" / "data" / "nasdaq100_membership.json"
ATTRIBUTION = (
    "NASDAQ-100 membership from n100tickers by Jeff McCarrell "
    "(https://github.com/jmccarrell/n100tickers, PyPI nasdaq-100-ticker-history), MIT License. "
    "Tickers as traded at the time. Membership on a date = that year's January-1 members with the "
    "changes dated on or before it applied."
)
RENAMES_ATTRIBUTION = (
    "Ticker renames: the ticker_change events of index-constitution 1.0.1 (PyPI, MIT; derived from "
    "Wikipedia): on 'date' the company trading as 'old' began trading as 'new'."
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


def read_renames(path: Path) -> list[dict[str, str]]:
    """The ``ticker_change`` rows of index_constitution's ``nasdaq100_events.csv``, by date."""
    with path.open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["event_type"] == "ticker_change"]
    return sorted(
        ({"date": r["event_date"], "old": r["old_symbol"], "new": r["new_symbol"]} for r in rows),
        key=lambda rename: rename["date"],
    )


def build(universe: Path) -> dict[str, object]:
    """The packaged membership document built from the reference files under ``universe``."""
    source = universe / "n100tickers"
    years = dict(read_year(path) for path in sorted(source.glob("n100-ticker-changes-*.yaml")))
    if not years:
        raise SystemExit(f"no n100-ticker-changes-*.yaml files in {source}")
    return {
        "attribution": ATTRIBUTION,
        "license": (source / "LICENSE").read_text(),
        "years": {str(year): years[year] for year in sorted(years)},
        "renames_attribution": RENAMES_ATTRIBUTION,
        "renames": read_renames(universe / "index_constitution" / "nasdaq100_events.csv"),
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
