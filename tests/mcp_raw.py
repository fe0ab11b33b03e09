"""MCP test helpers (the fixtures ``mcp``, ``handshake`` and ``modern`` live in the root
conftest): raw JSON-RPC over the Django test client, in either protocol era.

``RawMcp`` builds requests the way a real client of that era does: after the
initialize handshake (the version header only), or per the 2026-07-28 revision (``_meta``
envelope plus the ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` headers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.test import Client

if TYPE_CHECKING:
    # What the test client really returns: a response with .json() (django-stubs only).
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

HANDSHAKE_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
ERAS = ("handshake", "modern")


def modern_meta(**extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
        **extra,
    }


@dataclass
class RawMcp:
    client: Client
    era: str

    def post(
        self, body: bytes | str, *, headers: dict[str, str] | None = None, path: str = "/mcp"
    ) -> TestResponse:
        return self.client.post(path, body, content_type="application/json", headers=headers or {})

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        headers: dict[str, str] | None = None,
        meta: dict[str, Any] | None = None,
        request_id: int | str = 1,
    ) -> TestResponse:
        """POST one request as a client of this era sends it; ``headers`` override."""
        params = dict(params or {})
        sent = {"Accept": "application/json, text/event-stream"}
        if self.era == "modern":
            params["_meta"] = modern_meta(**(meta or {}))
            sent |= {"MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": method}
            if method == "tools/call":
                sent["Mcp-Name"] = params["name"]
        else:
            if meta:
                params["_meta"] = meta
            sent["MCP-Protocol-Version"] = HANDSHAKE_VERSION
        sent |= headers or {}
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        return self.post(json.dumps(body), headers=sent)

    def result(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        response = self.request(method, params, **kw)
        assert response.status_code == 200, response.content
        body = response.json()
        assert "error" not in body, body
        return body["result"]

    def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> Any:
        """The tool result; checks that success carries the same JSON as text and structure."""
        result = self.result("tools/call", {"name": name, "arguments": arguments or {}}, **kw)
        if not result["isError"]:
            assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
        return result

    def tool_error(self, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> str:
        """The text of a tool result that must be an error."""
        result = self.call_tool(name, arguments, **kw)
        assert result["isError"] is True, result
        assert "structuredContent" not in result
        text: str = result["content"][0]["text"]
        return text


def error_of(response: TestResponse) -> dict[str, Any]:
    """The JSON-RPC error object of a response that must be one."""
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "result" not in body
    error: dict[str, Any] = body["error"]
    return error
