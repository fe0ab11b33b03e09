"""The official MCP conformance suite against a live server.

Only the scenarios that apply to a server without the suite's test-only tools run:
initialization, ping and the tool list. 0.1.12 is the newest release that runs on
Node 20.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_django.live_server_helper import LiveServer

from tests.mcp import node_clients

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(scope="module")
def conformance() -> list[str]:
    return node_clients.conformance_command()


@pytest.mark.parametrize("scenario", ["server-initialize", "ping", "tools-list"])
def test_the_conformance_scenario_passes(
    conformance: list[str], live_server: LiveServer, tmp_path: Path, scenario: str
) -> None:
    command = [*conformance, "server", "--url", f"{live_server.url}/mcp", "--scenario", scenario]
    done = node_clients.run(command, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Passed: 1/1, 0 failed" in done.stdout, done.stdout
