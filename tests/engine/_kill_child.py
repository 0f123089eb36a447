"""Child process of the kill tests: start or resume the tiny tournament in ``argv[1]`` and run it.

Run as ``python -m engine._kill_child RUN_DIR`` from the ``tests`` folder; the parent SIGKILLs it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from engine._tournament_kit import ROUND_ENV_STEPS, new_tournament, resume_tournament, tournament_config

KILL_TEST_BUDGET_ROUNDS = 200
"""Budget of the killed tournament, in rounds of ``ROUND_ENV_STEPS`` env steps."""
KILL_TEST_CONFIG = tournament_config(
    pool_size=2, budget_env_steps=KILL_TEST_BUDGET_ROUNDS * ROUND_ENV_STEPS, archive_size=8
)


def main(run_dir: Path) -> None:
    """Resume the run in ``run_dir`` if it has one, else start it; train to the end of the budget."""
    started = (run_dir / "state.json").exists()
    tournament = resume_tournament(run_dir) if started else new_tournament(run_dir, KILL_TEST_CONFIG)
    tournament.run()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
