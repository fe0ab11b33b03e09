"""Answer one MCP message: read its envelope, decide its era, check it, dispatch it.

Era is decided per request, as the 2026-07-28 versioning rules say a dual-era server
does: ``initialize`` selects the handshake era; ``server/discover``, a request whose
``_meta`` carries the protocol version, or a version header that names no handshake
revision selects 2026-07-28, whose envelope and headers are then checked strictly.
Nothing is remembered between requests, so no session id is ever minted.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from django.db import DatabaseError

from aimemory_site.lib.mcp_tool import Tool
from aimemory_site.lib.principal import Principal
from aimemory_site.mcp.protocol import (
    CLIENT_CAPABILITIES_META,
    HANDSHAKE_VERSIONS,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_HANDSHAKE_VERSION,
    METHOD_HEADER,
    METHOD_NOT_FOUND,
    MODERN_VERSIONS,
    NAME_HEADER,
    PARSE_ERROR,
    PROTOCOL_VERSION_HEADER,
    PROTOCOL_VERSION_META,
    SERVER_INFO_META,
    SUPPORTED_VERSIONS,
    Era,
    Reply,
    RequestId,
    RpcError,
    rpc_error,
    rpc_result,
    unsupported_version,
)
from aimemory_site.onstart.mcp_tools import ONSTART_TOOLS
from messaging.mcp_tools import DECISION_TOOLS, MESSAGING_TOOLS
from projects.mcp_tools import PROJECT_TOOLS

logger = logging.getLogger(__name__)


def _package_version() -> str:
    try:
        return version("ai-memory-server")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


SERVER_INFO = {"name": "ai-memory", "version": _package_version()}
TOOLS: dict[str, Tool] = {
    tool.name: tool for tool in (*MESSAGING_TOOLS, *ONSTART_TOOLS, *PROJECT_TOOLS, *DECISION_TOOLS)
}

# How the caller names its lifecycle-hook session (docs/reference.md#scope-resolution).
SESSION_ID_HEADER = "X-Memory-Actor-Session-Id"
SESSION_ID_META = "ai.opencode/sessionID"

# The tool list and the discovery answer change only when the server is upgraded and
# hold nothing caller-specific, so any cache may keep them for an hour.
_LIST_TTL_MS = 3_600_000
_CACHEABLE_METHODS = frozenset({"server/discover", "tools/list"})

_BASE64_SENTINEL = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")


@dataclass(frozen=True)
class Request:
    """A JSON-RPC request (not a notification) with what the server needs to answer it."""

    id: RequestId
    method: str
    params: dict[str, Any]
    headers: Mapping[str, str]
    principal: Principal
    client_gone: Callable[[], bool] | None = None
    era: Era = Era.HANDSHAKE

    def session_id(self) -> str | None:
        """The lifecycle-hook session the client named, header first."""
        from_header = self.headers.get(SESSION_ID_HEADER)
        if from_header:
            return from_header
        meta = self.params.get("_meta")
        from_meta = meta.get(SESSION_ID_META) if isinstance(meta, dict) else None
        return from_meta if isinstance(from_meta, str) else None


def handle_body(
    raw: bytes,
    *,
    headers: Mapping[str, str],
    principal: Principal,
    client_gone: Callable[[], bool] | None = None,
) -> Reply:
    """Answer one POSTed body from an authenticated ``principal``; ``client_gone`` (the
    server's, when it offers one) tells a waiting tool call that the caller left.

    Preconditions: the Origin and the bearer were accepted and the body is within the
    size limit.
    """
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return _error(None, None, RpcError(PARSE_ERROR, "Parse error: the body is not JSON"))
    if isinstance(message, list):
        error = RpcError(INVALID_REQUEST, "Batches are not supported: POST one message at a time")
        return _error(None, None, error)
    if not isinstance(message, dict):
        return _error(None, None, RpcError(INVALID_REQUEST, "The body must be a JSON object"))
    raw_id = message.get("id")
    request_id = raw_id if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else None
    if "id" in message and request_id is None:
        return _error(None, None, RpcError(INVALID_REQUEST, "id must be a string or an integer"))
    try:
        method, params = _method_and_params(message)
    except RpcError as error:
        return _error(request_id, None, error)
    if request_id is None:
        return _notification_reply(headers)
    era = era_of(method, params, headers)
    request = Request(request_id, method, params, headers, principal, client_gone, era)
    try:
        result = _dispatch(era, request)
    except RpcError as error:
        return _error(request_id, era, error)
    return Reply(200, rpc_result(request_id, result))


def era_of(method: str, params: Mapping[str, Any], headers: Mapping[str, str]) -> Era:
    """Which era a request speaks, from its method, its ``_meta`` and its version header."""
    if method == "initialize":
        return Era.HANDSHAKE
    meta = params.get("_meta")
    if method == "server/discover" or (isinstance(meta, dict) and PROTOCOL_VERSION_META in meta):
        return Era.MODERN
    header = headers.get(PROTOCOL_VERSION_HEADER)
    if header is not None and header not in HANDSHAKE_VERSIONS:
        return Era.MODERN
    return Era.HANDSHAKE


def _error(request_id: RequestId | None, era: Era | None, error: RpcError) -> Reply:
    return Reply(error.status(era), rpc_error(request_id, error))


def _method_and_params(message: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    method = message.get("method")
    if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
        raise RpcError(INVALID_REQUEST, 'Expected one JSON-RPC 2.0 message: "jsonrpc" and "method"')
    params = message.get("params", {})
    if not isinstance(params, dict):
        raise RpcError(INVALID_REQUEST, "params must be an object")
    return method, params


def _notification_reply(headers: Mapping[str, str]) -> Reply:
    """Accept any notification: this server holds no state a notification could change.

    Only a version header naming no revision we speak is refused, as for a request.
    """
    header = headers.get(PROTOCOL_VERSION_HEADER)
    if header is not None and header not in SUPPORTED_VERSIONS:
        error = unsupported_version(header)
        return Reply(error.status(Era.MODERN), rpc_error(None, error))
    return Reply(202)


def _dispatch(era: Era, request: Request) -> dict[str, Any]:
    if era is Era.MODERN:
        _modern_envelope_check(request)
    handler = _METHODS[era].get(request.method)
    if handler is None:
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {request.method}")
    try:
        result = handler(request)
    except (RpcError, DatabaseError):
        raise  # a database outage is the HTTP 503 of MachineErrorMiddleware, not a bug
    except Exception:
        # A bug or an outage, not the caller's fault: log it, and still answer JSON-RPC
        # (an HTML error page is what breaks MCP clients worst).
        logger.exception("MCP %s failed", request.method)
        raise RpcError(INTERNAL_ERROR, "Internal error; the server log has the details") from None
    if era is Era.MODERN:
        # A tool that asks the person first has set "input_required"
        # (docs/reference.md#memory_decision_answer).
        result.setdefault("resultType", "complete")
        result["_meta"] = {SERVER_INFO_META: SERVER_INFO}
        if request.method in _CACHEABLE_METHODS:
            result["ttlMs"] = _LIST_TTL_MS
            result["cacheScope"] = "public"
    return result


def _modern_envelope_check(request: Request) -> None:
    """The 2026-07-28 checks, in the order the revision's SDK applies them.

    ``_meta`` must carry version and client capabilities; the version, method and (for
    ``tools/call``) name headers must repeat the body; the version must be one we serve.
    """
    meta = request.params.get("_meta")
    if not isinstance(meta, dict):
        raise RpcError(
            INVALID_PARAMS,
            f"params._meta must be an object carrying {PROTOCOL_VERSION_META!r} and "
            f"{CLIENT_CAPABILITIES_META!r}",
        )
    missing = [key for key in (PROTOCOL_VERSION_META, CLIENT_CAPABILITIES_META) if key not in meta]
    if missing:
        raise RpcError(INVALID_PARAMS, f"params._meta is missing {', '.join(missing)}")
    requested = meta[PROTOCOL_VERSION_META]
    headers = request.headers
    version_header = headers.get(PROTOCOL_VERSION_HEADER)
    if version_header is None or version_header != requested:
        raise RpcError(
            HEADER_MISMATCH,
            f"{PROTOCOL_VERSION_HEADER} header does not match params._meta {PROTOCOL_VERSION_META}",
        )
    if headers.get(METHOD_HEADER) != request.method:
        raise RpcError(HEADER_MISMATCH, f"{METHOD_HEADER} header does not match the method")
    if request.method == "tools/call":
        name = request.params.get("name")
        if name is not None and _header_decode(headers.get(NAME_HEADER)) != name:
            raise RpcError(HEADER_MISMATCH, f"{NAME_HEADER} header does not match params.name")
    # The header matched, so the requested version is that header's string.
    if version_header not in MODERN_VERSIONS:
        raise unsupported_version(version_header)


def _header_decode(value: str | None) -> str | None:
    """A header value as sent, or decoded from ``=?base64?...?=``; None when malformed."""
    if value is None:
        return None
    sentinel = _BASE64_SENTINEL.fullmatch(value)
    if sentinel is None:
        return value
    try:
        return base64.b64decode(sentinel["payload"], validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def _initialize(request: Request) -> dict[str, Any]:
    """Echo the client's revision when we speak it, else offer our newest (lifecycle rules)."""
    requested = request.params.get("protocolVersion")
    negotiated = requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE_VERSION
    return {
        "protocolVersion": negotiated,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": SERVER_INFO,
    }


def _discover(request: Request) -> dict[str, Any]:
    return {
        "supportedVersions": list(SUPPORTED_VERSIONS),
        "capabilities": {"tools": {"listChanged": False}},
    }


def _ping(request: Request) -> dict[str, Any]:
    return {}


def _tools_list(request: Request) -> dict[str, Any]:
    return {"tools": [tool.listing() for tool in TOOLS.values()]}


def _tools_call(request: Request) -> dict[str, Any]:
    name = request.params.get("name")
    if not isinstance(name, str):
        raise RpcError(INVALID_PARAMS, "params.name must name a tool")
    tool = TOOLS.get(name)
    if tool is None:
        raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}. See tools/list.")
    arguments = request.params.get("arguments")
    modern = request.era is Era.MODERN
    return tool.call(
        principal=request.principal,
        arguments={} if arguments is None else arguments,
        session_id=request.session_id(),
        client_gone=request.client_gone,
        can_elicit=modern and _can_elicit_forms(request.params),
        input_responses=_input_responses(request.params) if modern else None,
        request_state=_request_state(request.params) if modern else None,
    )


def _can_elicit_forms(params: Mapping[str, Any]) -> bool:
    """Whether the request's client capabilities offer form elicitation: ``elicitation``
    declared with ``form``, or empty (which means form alone)."""
    meta = params.get("_meta")
    capabilities = meta.get(CLIENT_CAPABILITIES_META) if isinstance(meta, dict) else None
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    return isinstance(elicitation, dict) and (not elicitation or "form" in elicitation)


def _input_responses(params: Mapping[str, Any]) -> dict[str, Any] | None:
    """A retry's ``inputResponses``: an object of response objects, by request key."""
    responses = params.get("inputResponses")
    if responses is None:
        return None
    if not isinstance(responses, dict) or not all(isinstance(r, dict) for r in responses.values()):
        raise RpcError(INVALID_PARAMS, "params.inputResponses must map request keys to objects")
    return responses


def _request_state(params: Mapping[str, Any]) -> str | None:
    state = params.get("requestState")
    if state is not None and not isinstance(state, str):
        raise RpcError(INVALID_PARAMS, "params.requestState must be the string the server sent")
    return state


_Handler = Callable[[Request], dict[str, Any]]
_METHODS: dict[Era, dict[str, _Handler]] = {
    Era.HANDSHAKE: {
        "initialize": _initialize,
        "ping": _ping,
        "tools/list": _tools_list,
        "tools/call": _tools_call,
    },
    # 2026-07-28 removed initialize and ping; server/discover replaces the handshake.
    Era.MODERN: {
        "server/discover": _discover,
        "tools/list": _tools_list,
        "tools/call": _tools_call,
    },
}
