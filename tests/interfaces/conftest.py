"""Fixtures of the interface tests."""

from __future__ import annotations

import pytest
from _pages import page_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A process that has imported the libraries and forks one child per page or script
    (tests/interfaces/_pages.py): each run pays for its own work, not the imports again.
    One per module, so that each test process starts one only for the modules it runs."""
    with page_server(tmp_path_factory.mktemp("pages") / "server") as started:
        yield started
