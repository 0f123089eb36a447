"""The environment every Ray process of the tests shares; ``tests/conftest.py`` imports it first.

Ray reads these once per process (at import, and when it spawns a node's processes), so the test
driver, the head and every worker node must see the same values: loopback addresses only, no usage
report, and token authentication with one token made for this test session.
"""

from __future__ import annotations

import os
import secrets
import sys

RAY_TEST_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # every node binds 127.0.0.1
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "token",
    "RAY_AUTH_TOKEN": os.environ.get("RAY_AUTH_TOKEN") or secrets.token_hex(16),
}

os.environ.update(RAY_TEST_ENV)
if "ray" in sys.modules:  # imported already: make its cached config read the variables again
    from ray._private.authentication_test_utils import reset_auth_token_state

    reset_auth_token_state()
