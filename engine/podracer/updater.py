"""The lagging check and score smoothing, now part of the judge (:mod:`podracer.judge`).

``from podracer.updater import is_lagging, smooth`` keeps working.
"""

from podracer.judge import is_lagging, smooth

__all__ = ["is_lagging", "smooth"]
