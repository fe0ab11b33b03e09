"""The wire vocabulary of MCP over Streamable HTTP, for both protocol eras.

The initialize era (2025-03-26 to 2025-11-25) opens with an ``initialize`` handshake; the
2026-07-28 revision carries version, client info and capabilities in every request's
``_meta`` and mirrors method and name into headers. This server keeps no state between
requests in either era, so a request is understood from itself alone.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse

from aimemory_site.lib.errors import AppError, rpc_error_body

HANDSHAKE_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[-1]
MODERN_VERSIONS = ("2026-07-28",)
SUPPORTED_VERSIONS = (*HANDSHAKE_VERSIONS, *MODERN_VERSIONS)

# Per-request envelope keys of the 2026-07-28 revision.
PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"

# HTTP headers (Django's request.headers looks them up case-insensitively).
PROTOCOL_VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"

# JSON-RPC 2.0 codes, and the ones the 2026-07-28 revision reserves for itself.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022

# The 2026-07-28 transport fixes the HTTP status of these errors; every other error
# (and every error of the initialize era, where a 404 would read as "session expired")
# travels with 200, except the two that say the body itself could not be used.
_MODERN_ERROR_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}
_BODY_ERROR_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400}


class Era(enum.Enum):
    """Which protocol era a request speaks, decided per request."""

    HANDSHAKE = "handshake"
    MODERN = "modern"


RequestId = str | int


class RpcError(Exception):
    """A JSON-RPC error answer: a protocol fault, never a business one (those are tool results)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def status(self, era: Era | None) -> int:
        """The HTTP status this error travels with; ``era`` is None before it is known."""
        table = _MODERN_ERROR_STATUS if era is Era.MODERN else _BODY_ERROR_STATUS
        return table.get(self.code, 200)


def unsupported_version(requested: str) -> RpcError:
    """The -32022 answer naming every version this server speaks, both eras.

    Listing the handshake versions too lets a dual-era client fall back to
    ``initialize`` instead of giving up when it shares no modern version with us.
    """
    return RpcError(
        UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
        {"supported": list(SUPPORTED_VERSIONS), "requested": requested},
    )


def rpc_result(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def rpc_error(request_id: RequestId | None, error: RpcError) -> dict[str, Any]:
    """A JSON-RPC error object; ``id`` is null when the request's id could not be read."""
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        body["data"] = error.data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


@dataclass(frozen=True)
class Reply:
    """One HTTP answer of the endpoint: a status and a JSON-RPC body, or no body (202)."""

    status: int
    body: dict[str, Any] | None = None

    def content(self) -> bytes:
        return b"" if self.body is None else json.dumps(self.body).encode()

    def response(self) -> HttpResponse:
        if self.body is None:
            return HttpResponse(status=self.status)
        return HttpResponse(self.content(), status=self.status, content_type="application/json")


def app_error_reply(exc: AppError) -> Reply:
    """An AppError raised before any request is read (refused Origin, missing bearer): it
    travels with its own HTTP status, in the body every ``/mcp`` error answer shares."""
    return Reply(exc.http_status, rpc_error_body(exc))
