"""The initialize era (2025-03-26 to 2025-11-25) over raw HTTP."""

from __future__ import annotations

import pytest

from aimemory_site.onstart.mcp_tools import ONSTART_TOOLS
from messaging.mcp_tools import DECISION_TOOLS, MESSAGING_TOOLS
from projects.mcp_tools import PROJECT_TOOLS
from tests.mcp_raw import RawMcp, error_of

pytestmark = pytest.mark.django_db

TOOL_NAMES = [
    "memory_message_send",
    "memory_message_list",
    "memory_message_pop",
    "memory_message_cancel",
    "memory_message_status",
    "memory_message_search",
    "memory_briefing",
    "memory_handoff_create",
    "memory_write_page",
    "memory_read_page",
    "memory_list_pages",
    "memory_decision_answer",
]


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_initialize_echoes_a_revision_it_speaks(handshake: RawMcp, version: str) -> None:
    result = handshake.result(
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    )
    assert result["protocolVersion"] == version
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "ai-memory"
    assert "resultType" not in result


@pytest.mark.parametrize("version", ["2024-11-05", "2099-01-01", None])
def test_initialize_offers_its_newest_revision_for_any_other(
    handshake: RawMcp, version: str | None
) -> None:
    result = handshake.result("initialize", {"protocolVersion": version, "capabilities": {}})
    assert result["protocolVersion"] == "2025-11-25"


def test_initialize_is_answered_even_under_a_2026_version_header(handshake: RawMcp) -> None:
    # Claude Code has sent initialize after a successful server/discover, with the
    # modern header still set (claude-code #96183); the handshake must still work.
    result = handshake.result(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}},
        headers={"MCP-Protocol-Version": "2026-07-28"},
    )
    assert result["protocolVersion"] == "2025-11-25"


def test_a_version_header_other_than_the_negotiated_one_is_tolerated(handshake: RawMcp) -> None:
    # Stateless: the server cannot know what was negotiated, and Claude Code has sent a
    # different handshake revision in the header than the one it negotiated (#92835).
    for version in ("2025-03-26", "2025-06-18"):
        assert handshake.result("ping", headers={"MCP-Protocol-Version": version}) == {}


def test_a_request_without_the_version_header_is_served(handshake: RawMcp) -> None:
    response = handshake.post('{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}')
    assert response.status_code == 200
    assert [t["name"] for t in response.json()["result"]["tools"]] == TOOL_NAMES


def test_ping_answers_an_empty_object(handshake: RawMcp) -> None:
    response = handshake.request("ping", request_id="abc")
    assert response.json() == {"jsonrpc": "2.0", "id": "abc", "result": {}}


def test_tools_list_has_every_tool_without_modern_fields(handshake: RawMcp) -> None:
    result = handshake.result("tools/list")
    assert set(result) == {"tools"}
    assert [tool["name"] for tool in result["tools"]] == TOOL_NAMES
    assert result["tools"] == [
        tool.listing()
        for tool in (*MESSAGING_TOOLS, *ONSTART_TOOLS, *PROJECT_TOOLS, *DECISION_TOOLS)
    ]


def test_an_unknown_method_is_method_not_found_with_200(handshake: RawMcp) -> None:
    # 200, not 404: in this era a 404 tells the client its session is gone.
    response = handshake.request("resources/list")
    assert response.status_code == 200
    assert error_of(response)["code"] == -32601
    assert response.json()["id"] == 1


def test_an_unknown_tool_is_invalid_params(handshake: RawMcp) -> None:
    response = handshake.request("tools/call", {"name": "memory_nope", "arguments": {}})
    assert response.status_code == 200
    error = error_of(response)
    assert error["code"] == -32602
    assert "memory_nope" in error["message"]


def test_a_tool_call_without_a_name_is_invalid_params(handshake: RawMcp) -> None:
    response = handshake.request("tools/call", {"arguments": {}})
    assert error_of(response)["code"] == -32602
