"""Clients that stop halfway through a request, against a spawned ``ai-memory serve``.

A stalled client once held a worker thread for good, and a few of them stopped the
server. Now each holds only a greenlet, and its body (or the reading of its answer) is
given up on after ``AI_MEMORY_CLIENT_TIMEOUT``. Only a real gunicorn shows it, so these
tests drive one over raw sockets, with ``AI_MEMORY_CLIENT_TIMEOUT=1`` and two worker
processes, on the suite's database.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import SEND
from tests.servers import Answer, RawConnection, serving

pytestmark = pytest.mark.slow

CLIENT_TIMEOUT = 1  # seconds; AI_MEMORY_CLIENT_TIMEOUT of the server below
#: More stalled connections than the threaded server had threads (two processes of two).
STALLED = 6


@dataclass
class Served:
    port: int
    log: Path  # the server's output, as it writes it


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data_dir = tmp_path_factory.mktemp("data")
    with serving(
        data_dir,
        *("--workers", "2"),
        database_prefix="aimemory_slow_clients",
        AI_MEMORY_CLIENT_TIMEOUT=str(CLIENT_TIMEOUT),
    ) as (port, _proc):
        for project in ("from_project", "to_project"):
            session = {
                "workspace": SEND["from_workspace"],
                "project": SEND[project],
                "session_id": f"slow-{project}",
            }
            assert _call(port, "/api/v1/sessions", json.dumps(session).encode()).status == 200
        yield Served(port, data_dir / "server.log")


@pytest.fixture
def port(served: Served) -> int:
    return served.port


def _call(port: int, path: str, body: bytes) -> Answer:
    connection = RawConnection(port)
    try:
        connection.send(_send_head(connection, len(body), path) + body)
        return connection.answer()
    finally:
        connection.close()


def _pending_count(port: int) -> int:
    """How many messages wait in the inbox SEND writes to."""
    query = f"workspace={SEND['to_workspace']}&project={SEND['to_project']}&limit=200"
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/messages?{query}") as answer:
        return len(json.load(answer)["messages"])


def _healthz(port: int, timeout: float = 30) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=timeout) as answer:
        status: int = answer.status
        return status


def _send_head(connection: RawConnection, length: int, path: str = "/api/v1/messages") -> bytes:
    return connection.head(
        "POST", path, {"Content-Type": "application/json", "Content-Length": str(length)}
    )


def test_a_body_that_stops_arriving_gets_a_408_and_a_close(port: int) -> None:
    connection = RawConnection(port)
    try:
        connection.send(_send_head(connection, 100) + b'{"to_workspace": ')
        answer = connection.answer()
        assert answer.status == 408
        assert answer.json() == {
            "detail": f"the request body stopped arriving for {CLIENT_TIMEOUT} s; "
            "nothing was changed",
            "code": "request_timeout",
        }
        assert answer.headers["connection"] == "close"
        assert connection.closed_by_server()
    finally:
        connection.close()


def test_a_chunked_body_that_stops_arriving_gets_a_408_and_a_close(port: int) -> None:
    connection = RawConnection(port)
    try:
        head = connection.head(
            "POST",
            "/api/v1/messages",
            {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
        )
        connection.send(head + b"40\r\n" + b'{"to_workspace": ')  # a chunk cut short
        answer = connection.answer()
        assert answer.status == 408
        assert answer.json()["code"] == "request_timeout"
        assert answer.headers["connection"] == "close"
        assert connection.closed_by_server()
    finally:
        connection.close()


def test_a_head_that_stops_arriving_is_closed_without_an_answer(served: Served) -> None:
    connection = RawConnection(served.port)
    try:
        connection.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line
        started = time.monotonic()
        assert connection.closed_by_server()
        # Within the keep-alive time, which is AI_MEMORY_CLIENT_TIMEOUT.
        assert time.monotonic() - started < CLIENT_TIMEOUT + 2
    finally:
        connection.close()
    assert "Traceback" not in served.log.read_text()


def test_clients_stopped_halfway_do_not_stop_the_server(port: int) -> None:
    stalled = [RawConnection(port) for _ in range(2 * STALLED)]
    try:
        for connection in stalled[:STALLED]:
            connection.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for connection in stalled[STALLED:]:
            connection.send(_send_head(connection, 100) + b"{")
        # Every thread may be holding one of them; each lets go after CLIENT_TIMEOUT,
        # so this is answered within a few seconds instead of never.
        assert _healthz(port) == 200
    finally:
        for connection in stalled:
            connection.close()


def test_idle_connections_hold_no_thread(port: int) -> None:
    """Connections that have sent nothing wait in the poller: with more of them than
    threads, a request is answered at once (gthread alone held a thread 5 s for each)."""
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(STALLED)]
    try:
        assert _healthz(port, timeout=4) == 200
    finally:
        for sock in idle:
            sock.close()


def test_a_slow_client_that_keeps_sending_is_served(port: int) -> None:
    """The limit is on a pause, not on the whole request: a body sent in pieces with
    pauses shorter than the limit, taking longer than it in all, is stored."""
    body = json.dumps({**SEND, "body": "sent slowly"}).encode()
    connection = RawConnection(port)
    try:
        connection.send(_send_head(connection, len(body)))
        step = len(body) // 4 + 1
        for piece in (body[start : start + step] for start in range(0, len(body), step)):
            time.sleep(CLIENT_TIMEOUT / 2)  # the client's own pace, which is the point
            connection.send(piece)
        answer = connection.answer()
        assert answer.status == 201, answer.body
    finally:
        connection.close()
    claim = {
        "workspace": SEND["to_workspace"],
        "project": SEND["to_project"],
        "message_id": answer.json()["message_id"],
    }
    popped = _call(port, "/api/v1/messages/pop", json.dumps(claim).encode())
    assert popped.json()["message"]["body"] == "sent slowly"


@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_a_bad_client_timeout_stops_the_server_from_starting(value: str) -> None:
    env = {**os.environ, "AI_MEMORY_CLIENT_TIMEOUT": value}
    done = subprocess.run(
        [sys.executable, "-m", "aimemory_site.cli.main", "serve", "--bind", "127.0.0.1:0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "AI_MEMORY_CLIENT_TIMEOUT must be" in done.stderr


def test_a_body_the_client_ends_early_gets_a_400_and_a_close(port: int) -> None:
    """The client ends its side of the connection before the declared length arrived:
    not a stall, so no 408, and not a body to parse, even where the cut leaves valid
    JSON."""
    before = _pending_count(port)
    connection = RawConnection(port)
    try:
        body = json.dumps(SEND).encode()
        connection.send(_send_head(connection, len(body) + 10) + body)
        connection.sock.shutdown(socket.SHUT_WR)
        answer = connection.answer()
        assert answer.status == 400
        assert answer.json() == {
            "detail": "the request body was cut short; nothing was changed",
            "code": "bad_request",
        }
        assert answer.headers["connection"] == "close"
        assert connection.closed_by_server()
    finally:
        connection.close()
    assert _pending_count(port) == before
