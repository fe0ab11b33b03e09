"""A lost answer never loses or doubles a message: the CLI retries a send and a pop once,
through a proxy that lets the first request of each reach the server and then drops its
answer (as a connection reset after the commit would)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from pytest_django.live_server_helper import LiveServer

from messaging.models import Message
from tests.cli.conftest import RunCli
from tests.conftest import make_project

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

DROPPED_PATHS = (b"POST /api/v1/messages ", b"POST /api/v1/messages/pop ")


def _read_request(conn: socket.socket) -> bytes:
    """One HTTP request (headers and a Content-Length body) from ``conn``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


@contextmanager
def dropping_proxy(upstream_port: int) -> Iterator[tuple[str, list[bytes]]]:
    """A one-request-per-connection proxy that drops the first answer to each path above."""
    listener = socket.create_server(("127.0.0.1", 0))
    dropped: list[bytes] = []
    stop = threading.Event()

    def serve_one(client: socket.socket) -> None:
        with client:
            request = _read_request(client)
            with socket.create_connection(("127.0.0.1", upstream_port)) as upstream:
                # The CLI sends "Connection: close": the answer ends when upstream closes.
                upstream.sendall(request)
                answer = b""
                while chunk := upstream.recv(65536):
                    answer += chunk
            first_line = request.split(b"\r\n", 1)[0]
            prefix = next((p for p in DROPPED_PATHS if first_line.startswith(p)), None)
            if prefix is not None and prefix not in dropped:
                dropped.append(prefix)  # the server did the work; its answer is lost
                # Linger 0: the close is a reset, as when a server dies mid-answer.
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            client.sendall(answer)

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve_one, args=(client,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", dropped
    finally:
        stop.set()
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in its thread
        listener.close()
        thread.join(timeout=10)


def test_a_send_and_a_pop_whose_answers_are_lost_happen_exactly_once(
    live_server: LiveServer, make_cli: Callable[[str], RunCli]
) -> None:
    make_project(None, "default", "project-a")
    make_project(None, "default", "project-b")
    port = int(live_server.url.rsplit(":", 1)[1])

    with dropping_proxy(port) as (url, dropped):
        cli = make_cli(url)
        sent = cli(
            "message", "send", "--to-workspace", "default", "--to-project", "project-b",
            "--from-workspace", "default", "--from-project", "project-a", "Ship the export.",
        )  # fmt: skip
        popped = cli("message", "pop", "--workspace", "default", "--project", "project-b")

    assert dropped == list(DROPPED_PATHS), "both first answers were dropped"
    assert sent.returncode == 0, sent.stderr
    assert popped.returncode == 0, popped.stderr
    [message] = Message.objects.all()
    assert message.state == Message.State.CLAIMED
    assert str(message.id) in sent.stdout
    assert str(message.id) in popped.stdout
    assert "Ship the export." in popped.stdout
