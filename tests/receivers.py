"""Real receivers for notifications on loopback: an HTTP server that Apprise's
``json://`` posts to, and an SMTP server (aiosmtpd) that ``mailto://`` sends to."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message as EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import pytest
from aiosmtpd.controller import Controller

from tests.servers import free_port

# Long enough for a loaded CI machine; a missing notification still fails the test.
WAIT_SECONDS = 15


@dataclass
class Posted:
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""


@dataclass
class HttpReceiver:
    """Records each POST; a path may be told to answer a status (with a ``Location``
    from ``locations``), or to hold its answer until ``release`` is set."""

    port: int = 0
    posted: queue.Queue[Posted] = field(default_factory=queue.Queue)
    statuses: dict[str, int] = field(default_factory=dict)
    locations: dict[str, str] = field(default_factory=dict)
    held: set[str] = field(default_factory=set)
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str) -> str:
        return f"json://127.0.0.1:{self.port}/{path}"

    def next(self, timeout: float = WAIT_SECONDS) -> Posted:
        return self.posted.get(timeout=timeout)

    def all_now(self) -> list[Posted]:
        got = []
        while not self.posted.empty():
            got.append(self.posted.get_nowait())
        return got


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: HttpReceiver


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        receiver = cast(_Server, self.server).receiver
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        path = self.path.strip("/")
        if path in receiver.held:
            receiver.release.wait(60)
        headers = {name.lower(): value for name, value in self.headers.items()}
        receiver.posted.put(
            Posted(path=path, body=json.loads(raw or b"{}"), headers=headers, raw=raw)
        )
        status = receiver.statuses.get(path, 200)
        self.send_response(status)
        if path in receiver.locations:
            self.send_header("Location", receiver.locations[path])
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def http_receiver() -> Iterator[HttpReceiver]:
    receiver = HttpReceiver()
    server = _Server(("127.0.0.1", 0), _Handler)
    server.receiver = receiver
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.release.set()
        server.shutdown()
        server.server_close()


class _Mailbox:
    def __init__(self) -> None:
        self.mail: queue.Queue[EmailMessage] = queue.Queue()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.mail.put(message_from_bytes(envelope.content))
        return "250 OK"


@dataclass
class SmtpReceiver:
    port: int
    mail: queue.Queue[EmailMessage]

    def url(self, to: str) -> str:
        return f"mailto://127.0.0.1:{self.port}?to={to}&from=ai-memory@example.com&mode=insecure"


@pytest.fixture
def smtp_receiver() -> Iterator[SmtpReceiver]:
    handler = _Mailbox()
    port = free_port()  # aiosmtpd connects to its port once started: name one
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield SmtpReceiver(port=port, mail=handler.mail)
    finally:
        controller.stop()
