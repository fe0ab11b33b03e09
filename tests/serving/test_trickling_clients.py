"""Clients that trickle their requests in hold nothing the others need
(docs/serving.md#slow-clients): while they send a byte at a time, whatever their
``Content-Length`` spelling, ``/healthz`` and a send are answered at once, by a server
of one worker process."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import SEND
from tests.servers import RawConnection, serving

pytestmark = pytest.mark.slow

TRICKLERS = 8
#: Well under the 10 s a silent client is given (AI_MEMORY_CLIENT_TIMEOUT): the tricklers
#: stay connected throughout.
BYTE_EVERY_SECONDS = 0.5
ANSWER_SECONDS = 2.0


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(
        tmp_path_factory.mktemp("data"), "--workers", "1", database_prefix="aimemory_trickle"
    ) as (port, _):
        url = f"http://127.0.0.1:{port}"
        for project in (SEND["from_project"], SEND["to_project"]):
            session = {"workspace": "default", "project": project, "session_id": f"s-{project}"}
            httpx.post(f"{url}/api/v1/sessions", json=session).raise_for_status()
        yield url


def _head(content_length: str) -> bytes:
    return (
        "POST /api/v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {content_length}\r\n\r\n"
    ).encode()


@pytest.mark.parametrize(
    ("what", "sent_at_once", "trickled"),
    [
        ("a body, its length with leading zeros", _head("00000000050"), b"x" * 50),
        ("a body, its length as usual", _head("50"), b"x" * 50),
        ("the head itself", b"", _head("50")),
    ],
)
def test_trickling_clients_leave_healthz_and_sends_answered(
    url: str, what: str, sent_at_once: bytes, trickled: bytes
) -> None:
    port = int(url.rsplit(":", 1)[1])
    stop = threading.Event()
    connections = [RawConnection(port) for _ in range(TRICKLERS)]

    def trickle(connection: RawConnection) -> None:
        try:
            connection.send(sent_at_once)
            for byte in trickled:
                if stop.wait(BYTE_EVERY_SECONDS):
                    return
                connection.send(bytes([byte]))
        except OSError:
            return  # closed by the test

    threads = [threading.Thread(target=trickle, args=(c,)) for c in connections]
    for thread in threads:
        thread.start()
    try:
        for _ in range(3):  # while every trickler holds its connection
            started = time.monotonic()
            assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200
            sent = httpx.post(f"{url}/api/v1/messages", json=SEND, timeout=10)
            assert sent.status_code == 201, what
            assert time.monotonic() - started < ANSWER_SECONDS, what
    finally:
        stop.set()
        for connection in connections:
            connection.close()
        for thread in threads:
            thread.join(10)
