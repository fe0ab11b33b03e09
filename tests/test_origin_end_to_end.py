"""The Origin rule over a real listening server (docs/reference.md#json-api): a page served on
another port of the same machine cannot write through any route, and the server's own
origin, or one listed in ``AI_MEMORY_ALLOWED_ORIGINS``, can."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper
from pytest_django.live_server_helper import LiveServer

from messaging.models import Message
from projects.models import AgentSession, Handoff, Page
from tests.conftest import SEND, A, B
from tests.mcp_raw import HANDSHAKE_VERSION

pytestmark = pytest.mark.django_db(transaction=True)


def _mcp(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


# (method, path, JSON body or None): every route that writes, with a request that would.
WRITES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/api/v1/messages", SEND),
    ("POST", "/api/v1/messages/pop", B),
    ("POST", "/api/v1/messages/cancel", {**A, "all": True}),
    ("POST", "/api/v1/sessions", {**A, "session_id": "e2e-1"}),
    ("POST", "/api/v1/handoffs", {**A, "body": "Done: x."}),
    ("POST", "/api/v1/pages", {**A, "path": "notes", "body": "n"}),
    ("POST", "/mcp", _mcp("memory_message_send", SEND)),
    ("POST", "/mcp", _mcp("memory_handoff_create", {**A, "body": "Done: y."})),
    ("POST", "/mcp", _mcp("memory_write_page", {**A, "path": "mcp", "body": "m"})),
    ("GET", "/handoff?workspace=default&project=project-a&session_id=e2e-0", None),
]
WRITE_IDS = [
    "send",
    "pop",
    "cancel",
    "session-start",
    "handoff-create",
    "page-write",
    "mcp-send",
    "mcp-handoff-create",
    "mcp-page-write",
    "hook-handoff",
]


class Server:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        self.host, self.port, self.origin = parts.hostname, parts.port, url

    def call(
        self, method: str, path: str, payload: dict[str, Any] | None, *, origin: str | None
    ) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json", "MCP-Protocol-Version": HANDSHAKE_VERSION}
        if origin is not None:
            headers["Origin"] = origin
        body = None if payload is None else json.dumps(payload).encode()
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            conn.close()


@pytest.fixture
def server(live_server: LiveServer) -> Server:
    """The live server with A and B started, one message A to B, one open handoff in A."""
    started = Server(live_server.url)
    for scope, session_id in ((A, "e2e-0"), (B, "e2e-b")):
        session = {**scope, "session_id": session_id}
        assert started.call("POST", "/api/v1/sessions", session, origin=None)[0] == 200
    assert started.call("POST", "/api/v1/messages", SEND, origin=None)[0] == 201
    handoff = {**A, "body": "Done: the stock."}
    assert started.call("POST", "/api/v1/handoffs", handoff, origin=None)[0] == 201
    return started


def _state() -> tuple[Any, ...]:
    return (
        sorted(Message.objects.values_list("id", "state")),
        sorted(AgentSession.objects.values_list("session_id", "last_seen_at")),
        sorted(Handoff.objects.values_list("id", "state")),
        sorted(Page.objects.values_list("path", "body")),
    )


def _accepted(path: str, status: int, answer: Any) -> bool:
    return status in (200, 201) and (path != "/mcp" or answer["result"]["isError"] is False)


@pytest.mark.parametrize(("method", "path", "payload"), WRITES, ids=WRITE_IDS)
def test_a_page_on_another_local_port_cannot_write(
    server: Server, method: str, path: str, payload: dict[str, Any] | None
) -> None:
    before = _state()
    neighbour = f"http://{server.host}:{server.port + 1}"

    status, answer = server.call(method, path, payload, origin=neighbour)

    assert status == 403, answer
    code = answer["error"]["data"]["code"] if path == "/mcp" else answer["code"]
    assert code == "origin_not_allowed"
    assert _state() == before


@pytest.mark.parametrize(("method", "path", "payload"), WRITES, ids=WRITE_IDS)
def test_the_servers_own_origin_writes(
    server: Server, method: str, path: str, payload: dict[str, Any] | None
) -> None:
    status, answer = server.call(method, path, payload, origin=server.origin)

    assert _accepted(path, status, answer), answer


@pytest.mark.parametrize(("method", "path", "payload"), WRITES, ids=WRITE_IDS)
def test_a_listed_origin_writes(
    server: Server,
    settings: SettingsWrapper,
    method: str,
    path: str,
    payload: dict[str, Any] | None,
) -> None:
    neighbour = f"http://{server.host}:{server.port + 1}"
    settings.AI_MEMORY_ALLOWED_ORIGINS = [neighbour, "https://tools.example"]

    for origin in (neighbour, "https://tools.example"):
        status, answer = server.call(method, path, payload, origin=origin)
        assert _accepted(path, status, answer), (origin, answer)
