"""The real Claude Code CLI against a live server.

``claude mcp list`` connects to every configured server with its own MCP handshake and
needs no model and no login, so it proves the endpoint works with the client agents use
most. Each test gets a throwaway HOME, so nothing of the machine's own config leaks in.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytest_django.live_server_helper import LiveServer

from tests.conftest import Persona
from tests.mcp import node_clients

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

NAME = "ai-memory"
CONNECTED = "✔ Connected"


@pytest.fixture(scope="module")
def claude() -> Path:
    return node_clients.claude_code_cli()


def _status(listing: str) -> str:
    """The status ``claude mcp list`` shows for our server, e.g. "✔ Connected"."""
    [line] = [line for line in listing.splitlines() if line.startswith(f"{NAME}:")]
    return line.rsplit(" - ", 1)[1]


def _mcp_list(claude: Path, home: Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    listed = node_clients.run([str(claude), "mcp", "list"], cwd=cwd, home=home, env=env)
    assert listed.returncode == 0, listed.stderr
    return _status(listed.stdout)


def _added_and_listed(claude: Path, home: Path, url: str, *header: str) -> str:
    """``claude mcp add --transport http`` then ``claude mcp list``: the server's status."""
    # After the URL: --header takes several values, so before NAME it would swallow it.
    options = [arg for value in header for arg in ("--header", value)]
    added = node_clients.run(
        [str(claude), "mcp", "add", "--transport", "http", NAME, url, *options],
        cwd=home,
        home=home,
    )
    assert added.returncode == 0, added.stderr
    return _mcp_list(claude, home, home)


def test_claude_code_connects_to_an_anonymous_server(
    claude: Path, live_server: LiveServer, tmp_path: Path
) -> None:
    assert _added_and_listed(claude, tmp_path, f"{live_server.url}/mcp") == CONNECTED


def test_claude_code_connects_with_a_bearer_on_an_auth_server(
    claude: Path, live_server: LiveServer, tmp_path: Path, auth_on: str, alice: Persona
) -> None:
    bearer = f"Authorization: Bearer {alice.token}"
    assert _added_and_listed(claude, tmp_path, f"{live_server.url}/mcp", bearer) == CONNECTED


@pytest.mark.parametrize("header", [None, "Authorization: Bearer not-a-real-token"])
def test_claude_code_does_not_connect_to_an_auth_server_without_a_valid_bearer(
    claude: Path, live_server: LiveServer, tmp_path: Path, auth_on: str, header: str | None
) -> None:
    headers = [header] if header else []
    status = _added_and_listed(claude, tmp_path, f"{live_server.url}/mcp", *headers)
    assert status != CONNECTED
    assert "✘" in status


def test_the_readmes_mcp_json_connects_with_the_token_from_the_environment(
    claude: Path, live_server: LiveServer, tmp_path: Path, auth_on: str, alice: Persona
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    NAME: {
                        "type": "http",
                        "url": "${AI_MEMORY_SERVER_URL:-http://127.0.0.1:8000}/mcp",
                        "headers": {"Authorization": "Bearer ${AI_MEMORY_AUTH_TOKEN}"},
                    }
                }
            }
        )
    )
    # What accepting the folder-trust and .mcp.json approval prompts once would record.
    approved = {"hasTrustDialogAccepted": True, "enabledMcpjsonServers": [NAME]}
    approval = {"projects": {str(repo): approved}}
    (tmp_path / ".claude.json").write_text(json.dumps(approval))
    env = {"AI_MEMORY_SERVER_URL": live_server.url, "AI_MEMORY_AUTH_TOKEN": alice.token}
    assert _mcp_list(claude, tmp_path, repo, env) == CONNECTED
