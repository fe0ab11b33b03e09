"""Oversized and chunked request bodies, against a spawned ``ai-memory serve`` (gunicorn).

Django's test client and ``live_server`` (wsgiref) frame bodies and connections their
own way: only gunicorn decodes chunked bodies, drains an unread body and decides
keep-alive, so every test here talks to a real server over raw sockets or
``http.client``. docs/reference.md#limits-and-faults: a body over 1 MiB gets its 413 JSON, never a reset
connection, and the connection state the answer announces is true.
"""

from __future__ import annotations

import http.client
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from aimemory_site.middleware import DRAIN_LIMIT_FACTOR
from tests.conftest import SEND
from tests.servers import Answer, RawConnection, serving

pytestmark = pytest.mark.slow

MIB = 1024 * 1024
LIMIT = MIB  # AI_MEMORY_MAX_REQUEST_BYTES
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


def chunked(body: bytes, piece: int = 64 * 1024) -> bytes:
    framed = [b"%x\r\n%s\r\n" % (len(part), part) for part in _pieces(body, piece)]
    return b"".join(framed) + b"0\r\n\r\n"


def _pieces(body: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


def json_headers(path: str, **extra: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", **extra}
    if path == "/mcp":
        headers |= MCP_HEADERS
    return headers


def oversized(path: str, size: int) -> bytes:
    """A JSON body of about ``size`` bytes for ``path`` (valid but for its size)."""
    pad = "x" * size
    if path == "/mcp":
        return json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": pad}}
        ).encode()
    return json.dumps({**SEND, "body": pad}).encode()


def assert_payload_too_large(answer: Answer) -> None:
    assert answer.status == 413
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "detail": f"request body is larger than {LIMIT} bytes",
        "code": "payload_too_large",
    }


@dataclass
class Server:
    port: int

    def connect(self) -> RawConnection:
        return RawConnection(self.port)

    def call(self, method: str, path: str, payload: Any = None, **headers: str) -> Answer:
        """One request on a new connection, with a Content-Length body."""
        body = b"" if payload is None else json.dumps(payload).encode()
        conn = self.connect()
        try:
            sent = {"Content-Length": str(len(body)), **json_headers(path), **headers}
            conn.send(conn.head(method, path, sent) + body)
            return conn.answer()
        finally:
            conn.close()

    def popped_body(self, message_id: str) -> str:
        answer = self.call(
            "POST",
            "/api/v1/messages/pop",
            {
                "workspace": SEND["to_workspace"],
                "project": SEND["to_project"],
                "message_id": message_id,
            },
        )
        assert answer.status == 200, answer.body
        body: str = answer.json()["message"]["body"]
        return body


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``ai-memory serve`` with one worker (so a kept-alive connection stays on it),
    anonymous, with the sender and recipient projects of ``SEND`` started."""
    data_dir = tmp_path_factory.mktemp("data")
    with serving(data_dir, "--workers", "1", database_prefix="aimemory_bodies") as (port, _):
        started = Server(port)
        expected = (
            "postgresql" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite"
        )
        assert started.call("GET", "/healthz").json()["database"] == expected
        for project in ("from_project", "to_project"):
            session = {
                "workspace": SEND["from_workspace"],
                "project": SEND[project],
                "session_id": f"bodies-{project}",
            }
            assert started.call("POST", "/api/v1/sessions", session).status == 200
        yield started


@pytest.mark.parametrize("path", ["/api/v1/messages", "/mcp"])
def test_a_body_over_the_limit_still_being_sent_gets_its_413_and_a_reusable_connection(
    server: Server, path: str
) -> None:
    body = oversized(path, 3 * MIB)
    conn = server.connect()
    try:
        headers = json_headers(path, **{"Content-Length": str(len(body))})
        writer = conn.send_in_background(conn.head("POST", path, headers) + body)
        answer = conn.answer()
        writer.join(timeout=30)
        assert conn.send_errors == []  # never a reset while the body was being written
        assert_payload_too_large(answer)
        assert answer.headers["connection"] == "keep-alive"
        # The body was drained, so the connection is what it said: good for another request.
        conn.send(conn.head("GET", "/healthz", {}))
        assert conn.answer().status == 200
    finally:
        conn.close()
    assert server.call("POST", "/api/v1/messages", SEND).status == 201


@pytest.mark.parametrize("path", ["/api/v1/messages", "/mcp"])
def test_a_chunked_body_over_the_limit_gets_its_413_and_a_reusable_connection(
    server: Server, path: str
) -> None:
    body = oversized(path, 2 * MIB)
    conn = server.connect()
    try:
        headers = json_headers(path, **{"Transfer-Encoding": "chunked"})
        writer = conn.send_in_background(conn.head("POST", path, headers) + chunked(body))
        answer = conn.answer()
        writer.join(timeout=30)
        assert conn.send_errors == []
        assert_payload_too_large(answer)
        assert answer.headers["connection"] == "keep-alive"
        conn.send(conn.head("GET", "/healthz", {}))
        assert conn.answer().status == 200
    finally:
        conn.close()


def test_a_body_too_large_to_drain_gets_its_413_with_close_and_a_clean_close(
    server: Server,
) -> None:
    declared = DRAIN_LIMIT_FACTOR * LIMIT + 1
    conn = server.connect()
    try:
        headers = json_headers("/api/v1/messages", **{"Content-Length": str(declared)})
        # A start of the body only: a server that waited for all of it would never answer.
        conn.send(conn.head("POST", "/api/v1/messages", headers) + b"x" * (32 * 1024))
        answer = conn.answer()
        assert_payload_too_large(answer)
        assert answer.headers["connection"] == "close"
        assert conn.closed_by_server()
    finally:
        conn.close()
    assert server.call("POST", "/api/v1/messages", SEND).status == 201


def test_a_body_over_the_limit_that_stops_arriving_gets_its_413_with_close(
    server: Server,
) -> None:
    conn = server.connect()
    try:
        headers = json_headers("/api/v1/messages", **{"Content-Length": str(2 * LIMIT)})
        # Half the declared body, then nothing: the drain gives up at its deadline.
        conn.send(conn.head("POST", "/api/v1/messages", headers) + b"x" * LIMIT)
        answer = conn.answer()
        assert_payload_too_large(answer)
        assert answer.headers["connection"] == "close"
        assert conn.closed_by_server()
    finally:
        conn.close()


def test_a_chunked_send_over_a_raw_socket_is_stored(server: Server) -> None:
    text = f"chunked over a raw socket {uuid.uuid4()}"
    body = json.dumps({**SEND, "body": text}).encode()
    conn = server.connect()
    try:
        headers = json_headers("/api/v1/messages", **{"Transfer-Encoding": "chunked"})
        conn.send(conn.head("POST", "/api/v1/messages", headers) + chunked(body, piece=17))
        answer = conn.answer()
        assert answer.status == 201, answer.body
        assert answer.headers["connection"] == "keep-alive"
        conn.send(conn.head("GET", "/healthz", {}))
        assert conn.answer().status == 200
    finally:
        conn.close()
    assert server.popped_body(answer.json()["message_id"]) == text


def test_a_chunked_send_by_http_client_is_stored(server: Server) -> None:
    text = f"chunked by http.client {uuid.uuid4()}"
    body = json.dumps({**SEND, "body": text}).encode()
    client = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        # An iterable body and no Content-Length: http.client sends it chunked.
        client.request(
            "POST",
            "/api/v1/messages",
            body=_pieces(body, 50),
            headers={"Content-Type": "application/json"},
            encode_chunked=True,
        )
        response = client.getresponse()
        answer = json.loads(response.read())
        assert response.status == 201, answer
    finally:
        client.close()
    assert server.popped_body(answer["message_id"]) == text


def test_a_chunked_mcp_tool_call_sends_the_message(server: Server) -> None:
    text = f"chunked over MCP {uuid.uuid4()}"
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "memory_message_send", "arguments": {**SEND, "body": text}},
    }
    conn = server.connect()
    try:
        headers = json_headers("/mcp", **{"Transfer-Encoding": "chunked"})
        conn.send(conn.head("POST", "/mcp", headers) + chunked(json.dumps(call).encode(), 64))
        answer = conn.answer()
    finally:
        conn.close()
    assert answer.status == 200, answer.body
    reply = answer.json()
    assert reply["id"] == 7
    assert reply["result"]["isError"] is False, reply
    assert server.popped_body(reply["result"]["structuredContent"]["message_id"]) == text


def test_a_malformed_chunked_body_gets_a_400_json_and_a_close(server: Server) -> None:
    conn = server.connect()
    try:
        headers = json_headers("/api/v1/messages", **{"Transfer-Encoding": "chunked"})
        conn.send(conn.head("POST", "/api/v1/messages", headers) + b"zz\r\n{}\r\n0\r\n\r\n")
        answer = conn.answer()
        assert answer.status == 400
        assert answer.json() == {
            "detail": "the chunked request body is malformed or was cut short; nothing was changed",
            "code": "bad_request",
        }
        assert answer.headers["connection"] == "close"
        assert conn.closed_by_server()
    finally:
        conn.close()


def _inbox_text(server: Server) -> str:
    """The recipient's pending messages, as the JSON text of the list."""
    scope = f"workspace={SEND['to_workspace']}&project={SEND['to_project']}"
    answer = server.call("GET", f"/api/v1/messages?{scope}&limit=200")
    assert answer.status == 200, answer.body
    return json.dumps(answer.json())


@pytest.mark.parametrize("path", ["/api/v1/messages", "/mcp"])
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-32-le"])
@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_body_that_is_not_utf_8_is_invalid_text_and_stores_nothing(
    server: Server, path: str, encoding: str, framing: str
) -> None:
    marker = f"not utf-8 {uuid.uuid4()}"
    message = {**SEND, "subject": marker, "body": marker}
    if path == "/mcp":
        params = {"name": "memory_message_send", "arguments": message}
        payload: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": params,
        }
    else:
        payload = message
    body = json.dumps(payload).encode(encoding)
    conn = server.connect()
    try:
        if framing == "chunked":
            headers = json_headers(path, **{"Transfer-Encoding": "chunked"})
            conn.send(conn.head("POST", path, headers) + chunked(body, piece=100))
        else:
            headers = json_headers(path, **{"Content-Length": str(len(body))})
            conn.send(conn.head("POST", path, headers) + body)
        answer = conn.answer()
    finally:
        conn.close()

    assert answer.status == 400, answer.body
    refusal = answer.json()
    code = refusal["error"]["data"]["code"] if path == "/mcp" else refusal["code"]
    assert code == "invalid_text"
    assert marker not in _inbox_text(server)


def test_a_page_on_another_port_of_the_host_cannot_send(server: Server) -> None:
    """gunicorn's Host carries the port: the same address on the next port is foreign."""
    marker = f"from another port {uuid.uuid4()}"
    message = {**SEND, "body": marker}

    foreign = server.call(
        "POST", "/api/v1/messages", message, Origin=f"http://127.0.0.1:{server.port + 1}"
    )
    own = server.call("POST", "/api/v1/messages", message, Origin=f"http://127.0.0.1:{server.port}")

    assert foreign.status == 403
    assert foreign.json()["code"] == "origin_not_allowed"
    assert own.status == 201, own.body
    assert server.popped_body(own.json()["message_id"]) == marker
    assert marker not in _inbox_text(server)
