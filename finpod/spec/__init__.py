"""Strategy specs: one TOML file says what to trade, on which data, how to train and how to select.

A spec is a tree of pydantic models with ``extra="forbid"``: every key is known, every default lives
here (documented on its field), and every mistake becomes ONE line naming the file, the field and the
fix, e.g. ``strategies/x.toml: env.fee_rate: must be >= 0 (got -0.1); fix: fee per trade as a
fraction of traded notional, e.g. 0.002``.

A relative path inside a spec file (``data.path``) is resolved against that file's folder, so a spec
runs the same from any working folder; a spec built in code resolves it against the current folder.
"""

from finpod.spec.agent import AGENT_DEFAULTS, ppo_config_from
from finpod.spec.base import DateRange
from finpod.spec.sections import DataSpec, EnvSpec, PaperSpec, SegmentsSpec, SyntheticSpec, TournamentSpec
from finpod.spec.strategy import Spec, setting_key

__all__ = [
    "AGENT_DEFAULTS",
    "DataSpec",
    "DateRange",
    "EnvSpec",
    "PaperSpec",
    "SegmentsSpec",
    "Spec",
    "SyntheticSpec",
    "TournamentSpec",
    "ppo_config_from",
    "setting_key",
]
