"""Fixtures shared by every test: where the real market data lives, and a scratch dir per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from engine._ray_cluster import ray_cluster  # noqa: F401  (the Ray tests' cluster; sets Ray's environment)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` beside the checkout; tests that need it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real market data not found at {SHARED_DATA} (present in CI and dev checkouts)")
    return SHARED_DATA


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """One intra-op torch thread for the test, restored after (tiny shapes: threads only spin
    against each other on a busy box). Use with ``pytestmark = pytest.mark.usefixtures(...)``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
