"""Fixtures for the tests that drive the real Claude Code and Codex CLIs.

A live ``ai-memory serve`` per module, the model stand-in per test, a throwaway HOME
(``CODEX_HOME`` inside it) per test, a git repository where ``ai-memory init`` has written
each client's settings, and a tmux server of the test's own. Teardown ends the tmux server,
then kills every process that carries the test's run id (harness.RUN_ENV).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents.harness import SENDER, Agents, Repo, Server, Tmux, init_repo, kill_marked
from tests.agents.standin import StandIn
from tests.mcp import node_clients
from tests.servers import serving


@pytest.fixture(scope="session")
def claude() -> Path:
    return node_clients.claude_code_cli()


@pytest.fixture(scope="session")
def codex() -> Path:
    return node_clients.codex_cli()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("server"), database_prefix="aimemory_agents") as started:
        port, _ = started
        server = Server(port)
        server.register(SENDER)  # the sender's project exists, as an agent's that sends
        yield server


@pytest.fixture
def standin() -> Iterator[StandIn]:
    with StandIn() as started:
        yield started


@pytest.fixture
def agents(tmp_path: Path, standin: StandIn, server: Server) -> Iterator[Agents]:
    home = tmp_path / "home"
    home.mkdir()
    agents = Agents(run=uuid.uuid4().hex, home=home, standin=standin, server_url=server.url)
    agents.codex_home.mkdir()
    try:
        yield agents
    finally:
        kill_marked(agents.run)


@pytest.fixture
def tmux(agents: Agents) -> Iterator[Tmux]:
    """Torn down before ``agents`` (which kills what the windows left)."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the interactive clients run in it")
    server = Tmux()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def repo(agents: Agents, tmp_path: Path) -> Repo:
    return init_repo(agents, tmp_path)
