"""scripts/pick_rules.py: the pick rules replayed on skill-bench snapshot rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repo import load_script


def _row(score: float, pod: str, variance: float, held_out_edge: float, te: float) -> list[object]:
    # [trial, seconds, score, pod, share, val IC, held IC, val Sharpe, shrunk, TE, EW val Sharpe, var, edge]
    return [1, 1.0, score, pod, 0.0, 0.0, 0.0, score, score, te, 1.0, variance, held_out_edge]


def test_each_rule_picks_its_policy_and_the_table_has_their_means(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        _row(2.0, "pod0", 1.0, -0.4, 0.20),  # the best score: a bold bet, poorly measured
        _row(1.6, "pod1", 0.04, +0.3, 0.03),  # a little lower, well measured: the shrunk pick
    ]
    run = {
        "seeds": [
            {
                "case": "daily100-none-5bp",
                "seed": 100,
                "contenders": {"defaults/tournament": {"snapshots": rows}},
            }
        ]
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    script = load_script("pick_rules")
    assert script.main([str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    header, line, mean = out[0].split(), out[1], out[2]
    assert header[:3] == ["run", "score", "shrunk"]
    cells = line.split()[3:]
    assert cells[0] == "-0.40/0.20"  # score: the tournament's own pick
    assert cells[1] == "+0.30/0.03"  # shrunk 0.5 prefers the better measured edge
    assert out[0].split()[-6:] == ["gate", "1", "gate", "2", "deflated", "defl-score"]
    # the pick's validation edge: 1 SE; both deflated bars (2 trials) are far below its edge of 1.0
    assert cells[-4:] == ["-0.40/0.20", "EW", "-0.40/0.20", "-0.40/0.20"]
    assert mean.startswith("mean")
    assert script.main([]) == 2
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"seeds": []}))
    assert script.main([str(empty)]) == 2
