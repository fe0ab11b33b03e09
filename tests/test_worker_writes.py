"""How ``ai-memory serve``'s gunicorn worker writes an answer and beats its heartbeat
(``aimemory_site.gunicorn_worker``): the head goes out with the body in one send, and
the heartbeat file is touched at most once a second however many requests pass.

gunicorn's own request parser, response and worker run here on a real socket pair; only
the application is a small WSGI callable, so each case picks the answer it needs.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.http.parser import RequestParser

from aimemory_site.gunicorn_worker import (
    HEARTBEAT_EVERY_SECONDS,
    ThreadWorker,
    sending_head_with_body,
)

BODY = b'{"status": "ok"}'


class _CountedSocket:
    """The server's end of the pair, counting the sends that reach it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sends: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.sends.append(bytes(data))
        self.sock.sendall(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


def _application(
    status: str, headers: list[tuple[str, str]], body: Iterable[bytes]
) -> Callable[..., Iterable[bytes]]:
    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        start_response(status, headers)
        return body

    return application


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    server, client = socket.socketpair()
    client.settimeout(5)
    yield server, client
    server.close()
    client.close()


def _serve(
    server: socket.socket,
    client: socket.socket,
    request: bytes,
    application: Callable[..., Iterable[bytes]],
) -> tuple[list[bytes], bytes]:
    """Serve ``request`` as gthread's ``handle_request`` does; the sends the server made
    and every byte the client received."""
    cfg = Config()
    client.sendall(request)
    req = next(iter(RequestParser(cfg, server, ("127.0.0.1", 1))))
    counted = _CountedSocket(server)
    resp, environ = wsgi.create(req, counted, ("127.0.0.1", 1), ("127.0.0.1", 2), cfg)
    for item in sending_head_with_body(application)(environ, resp.start_response):
        resp.write(item)
    resp.close()
    received = b"".join(counted.sends)
    return counted.sends, received


def test_head_and_body_go_out_in_one_send(pair: tuple[socket.socket, socket.socket]) -> None:
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]
    sends, received = _serve(
        *pair, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", _application("200 OK", headers, [BODY])
    )
    assert len(sends) == 1
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Content-Length: 16" in head
    assert body == BODY
    assert pair[1].recv(4096) == received  # what the client reads is that one send


def test_an_answer_without_a_body_sends_its_head(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]
    sends, received = _serve(
        *pair, b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n", _application("200 OK", headers, [BODY])
    )
    assert len(sends) == 1
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert received.endswith(b"\r\n\r\n")  # the head alone: a HEAD answer has no body


def test_an_empty_body_sends_its_head(pair: tuple[socket.socket, socket.socket]) -> None:
    sends, received = _serve(
        *pair,
        b"DELETE /x HTTP/1.1\r\nHost: x\r\n\r\n",
        _application("204 No Content", [], [b""]),
    )
    assert len(sends) == 1
    assert received.startswith(b"HTTP/1.1 204 No Content\r\n")
    assert received.endswith(b"\r\n\r\n")


def test_a_chunked_body_keeps_its_framing(pair: tuple[socket.socket, socket.socket]) -> None:
    # No length: gunicorn frames the body in chunks, which the head must stay outside.
    sends, received = _serve(
        *pair,
        b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n",
        _application("200 OK", [("Content-Type", "text/plain")], [b"one", b"two"]),
    )
    head, _, body = received.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head
    assert body == b"3\r\none\r\n3\r\ntwo\r\n0\r\n\r\n"
    assert sends[0] == head + b"\r\n\r\n"


def test_a_body_in_pieces_follows_the_first(pair: tuple[socket.socket, socket.socket]) -> None:
    headers = [("Content-Length", "6")]
    sends, received = _serve(
        *pair,
        b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n",
        _application("200 OK", headers, [b"one", b"two"]),
    )
    assert len(sends) == 2
    assert sends[0].endswith(b"\r\n\r\none")
    assert sends[1] == b"two"
    assert received.endswith(b"\r\n\r\nonetwo")


@pytest.fixture
def worker() -> Iterator[ThreadWorker]:
    cfg = Config()
    made = ThreadWorker(1, 1, [], None, 15, cfg, None)
    yield made
    made.tmp.close()


def test_the_heartbeat_beats_at_most_once_a_second(worker: ThreadWorker) -> None:
    worker.notify()
    first = worker.tmp.last_update()
    for _ in range(100):
        worker.notify()
    assert worker.tmp.last_update() == first  # a hundred turns of the loop, one beat
    worker._beat_at = time.monotonic() - HEARTBEAT_EVERY_SECONDS
    worker.notify()
    assert worker.tmp.last_update() > first
