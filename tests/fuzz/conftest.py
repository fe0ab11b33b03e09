"""The fuzzers' shared set-up."""

from __future__ import annotations

import pytest

from aimemory_site.lib import wakeups


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``wait_seconds`` is clamped to 0 here: an example that asked for a minute
    would otherwise wait it out (inside a test transaction, where a park cannot even let
    go of the connection). Its parsing and refusals are still fuzzed; the waits are
    tested in tests/messaging/test_message_wait.py."""
    monkeypatch.setattr(wakeups, "WAIT_SECONDS_MAX", 0)
