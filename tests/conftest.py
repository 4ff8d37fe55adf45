"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from helpers import fresh_session, kernel  # noqa: F401  (fixtures shared by every module)

from mmsp_notebook.demo import DemoServer


@pytest.fixture(scope="module")
def demo_server() -> Iterator[DemoServer]:
    """An instant demo server (short heartbeat interval), shared by the tests of a module."""
    with DemoServer(instant=True, heartbeat=0.1) as server:
        yield server
