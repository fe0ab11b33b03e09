"""The fuzzers check what every argument gets back, not how long a call waits: a
``wait_seconds`` they draw (up to any integer) is honoured as 0, so no example parks.
Waiting has tests of its own (tests/messaging/test_message_wait.py and beside it)."""

from __future__ import annotations

import pytest

from aimemory_site.lib import wakeups


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wakeups, "WAIT_SECONDS_MAX", 0)
