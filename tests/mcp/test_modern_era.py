"""The 2026-07-28 revision over raw HTTP: discover, envelope, headers, result fields."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from aimemory_site.onstart.mcp_tools import ONSTART_TOOLS
from messaging.mcp_tools import DECISION_TOOLS, MESSAGING_TOOLS
from projects.mcp_tools import PROJECT_TOOLS
from tests.mcp_raw import MODERN_VERSION, RawMcp, error_of, modern_meta

pytestmark = pytest.mark.django_db

SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"


def _raw(method: str, params: dict[str, Any] | None = None) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": 9, "method": method, "params": params or {}})


def test_discover_names_versions_capabilities_identity_and_cache_hints(modern: RawMcp) -> None:
    result = modern.result("server/discover")
    assert result["resultType"] == "complete"
    assert MODERN_VERSION in result["supportedVersions"]
    assert "2025-11-25" in result["supportedVersions"]
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["_meta"][SERVER_INFO_META]["name"] == "ai-memory"
    assert result["ttlMs"] > 0
    assert result["cacheScope"] == "public"


def test_tools_list_carries_result_type_and_cache_hints(modern: RawMcp) -> None:
    result = modern.result("tools/list")
    assert result["resultType"] == "complete"
    assert result["ttlMs"] > 0
    assert result["cacheScope"] == "public"
    assert result["_meta"][SERVER_INFO_META]["name"] == "ai-memory"
    assert result["tools"] == [
        tool.listing()
        for tool in (*MESSAGING_TOOLS, *ONSTART_TOOLS, *PROJECT_TOOLS, *DECISION_TOOLS)
    ]


def test_tool_results_carry_result_type_but_no_cache_hints(modern: RawMcp) -> None:
    result = modern.call_tool("memory_message_pop", {"bogus": 1})
    assert result["resultType"] == "complete"
    assert result["_meta"][SERVER_INFO_META]["name"] == "ai-memory"
    assert "ttlMs" not in result


@pytest.mark.parametrize(
    "headers",
    [
        {"MCP-Protocol-Version": "2025-11-25"},
        {"MCP-Protocol-Version": "2026-07-29"},
        {"Mcp-Method": "tools/call"},
        {"Mcp-Method": "TOOLS/LIST"},  # header values are case-sensitive
    ],
)
def test_a_header_that_disagrees_with_the_body_is_a_header_mismatch(
    modern: RawMcp, headers: dict[str, str]
) -> None:
    response = modern.request("tools/list", headers=headers)
    assert response.status_code == 400
    assert error_of(response)["code"] == -32020
    assert response.json()["id"] == 1


@pytest.mark.parametrize("missing", ["MCP-Protocol-Version", "Mcp-Method"])
def test_a_missing_standard_header_is_a_header_mismatch(modern: RawMcp, missing: str) -> None:
    headers = {"MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": "tools/list"}
    del headers[missing]
    params = {"_meta": modern_meta()}
    response = modern.post(_raw("tools/list", params), headers=headers)
    assert response.status_code == 400
    assert error_of(response)["code"] == -32020


def test_a_tool_call_whose_name_header_disagrees_is_a_header_mismatch(modern: RawMcp) -> None:
    params = {"name": "memory_briefing", "arguments": {}}
    for name_header in ("memory_message_pop", None):
        headers = {"Mcp-Name": name_header} if name_header else {}
        sent = {"MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": "tools/call", **headers}
        response = modern.post(_raw("tools/call", {**params, "_meta": modern_meta()}), headers=sent)
        assert response.status_code == 400
        assert error_of(response)["code"] == -32020


def test_a_base64_encoded_name_header_is_decoded_before_comparing(modern: RawMcp) -> None:
    encoded = base64.b64encode(b"memory_message_pop").decode()
    result = modern.call_tool(
        "memory_message_pop", {"bogus": 1}, headers={"Mcp-Name": f"=?base64?{encoded}?="}
    )
    assert result["isError"] is True
    broken = modern.request(
        "tools/call",
        {"name": "memory_message_pop", "arguments": {}},
        headers={"Mcp-Name": "=?base64?not base64!?="},
    )
    assert error_of(broken)["code"] == -32020


def test_an_unsupported_version_names_what_the_server_speaks(modern: RawMcp) -> None:
    params = {"_meta": {**modern_meta(), "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}
    response = modern.post(
        _raw("tools/list", params),
        headers={"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"},
    )
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32022
    assert error["data"]["requested"] == "2099-01-01"
    assert MODERN_VERSION in error["data"]["supported"]
    assert "2025-11-25" in error["data"]["supported"]


@pytest.mark.parametrize(
    "meta",
    [
        None,
        {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION},  # no capabilities
    ],
)
def test_a_modern_request_without_its_envelope_is_invalid_params(
    modern: RawMcp, meta: dict[str, Any] | None
) -> None:
    params = {} if meta is None else {"_meta": meta}
    response = modern.post(
        _raw("server/discover", params),
        headers={"MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": "server/discover"},
    )
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602


def test_a_version_header_naming_no_handshake_revision_selects_the_modern_rules(
    handshake: RawMcp,
) -> None:
    response = handshake.post(_raw("tools/list"), headers={"MCP-Protocol-Version": MODERN_VERSION})
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602


def test_a_non_string_version_never_matches_its_header(modern: RawMcp) -> None:
    params = {"_meta": {**modern_meta(), "io.modelcontextprotocol/protocolVersion": 2026}}
    response = modern.post(
        _raw("tools/list", params),
        headers={"MCP-Protocol-Version": "2026", "Mcp-Method": "tools/list"},
    )
    assert response.status_code == 400
    assert error_of(response)["code"] == -32020


@pytest.mark.parametrize("method", ["ping", "resources/list", "initialized"])
def test_an_unknown_method_is_404_method_not_found(modern: RawMcp, method: str) -> None:
    response = modern.request(method)
    assert response.status_code == 404
    assert error_of(response)["code"] == -32601


def test_an_unknown_tool_is_400_invalid_params(modern: RawMcp) -> None:
    response = modern.request("tools/call", {"name": "memory_nope", "arguments": {}})
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602
