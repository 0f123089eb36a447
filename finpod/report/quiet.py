"""Keep empyrical, pyfolio and seaborn quiet locally: no deprecation noise, nothing on stdout.

pyfolio was written for notebooks: it calls ``IPython.display.display`` on its tables, which, outside
a notebook, prints ``<IPython.core.display.HTML object>`` to stdout, and it triggers pandas 3 and
matplotlib deprecation warnings. :func:`quiet_analytics` silences both for the ``with`` block only;
warnings filters and ``sys.stdout`` are restored on exit.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Iterator

import pandas as pd

_SILENCED_CATEGORIES: tuple[type[Warning], ...] = (
    DeprecationWarning,
    PendingDeprecationWarning,
    FutureWarning,
    pd.errors.Pandas4Warning,
    RuntimeWarning,
)


@contextlib.contextmanager
def quiet_analytics() -> Iterator[io.StringIO]:
    """Silence third-party analytics noise inside the block.

    Yields:
        The buffer that captures anything written to stdout inside the block (pyfolio's display
        calls); callers may inspect or drop it.
    """
    captured = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(captured):
        for category in _SILENCED_CATEGORIES:
            warnings.simplefilter("ignore", category)
        warnings.filterwarnings("ignore", message=r".*zipline\.assets.*")
        warnings.filterwarnings("ignore", message=r".*no explicit representation of timezones.*")
        warnings.filterwarnings("ignore", module=r"(pyfolio|empyrical|seaborn)(\..*)?")
        yield captured
