"""The worker class ``ai-memory serve`` names: gunicorn's gevent worker, answering the
requests gunicorn cannot parse in JSON (docs/serving.md#the-worker).

gunicorn answers a request it cannot parse (a header it cannot read, a request line over
its limit) itself, with a page of HTML, through the worker's ``handle_error``. Every
error of the machine routes is JSON (docs/reference.md#limits-and-faults), so this
worker gives the status gunicorn chose with the JSON body Django's answers have (a
JSON-RPC error on ``/mcp``). A request that failed to parse leaves no path behind, so
the worker peeks at the first bytes of each new connection (without reading them) for
the path of its first request; for a later request of the connection, or bytes that
hold no path, the answer is JSON: a program sent it. (A request line over its limit is
refused by the application instead, which knows the route: ``serving.wsgi``.)

Nothing else is changed: gevent's worker, its settings and hooks are used as gunicorn
documents them (``serving.gunicorn_config``).
"""

from __future__ import annotations

import json
import socket
from typing import Any
from urllib.parse import unquote

from gevent.local import local
from gevent.socket import wait_read
from gunicorn.workers.ggevent import GeventWorker

#: How much of a new connection's first bytes is peeked at for its path.
PEEKED_BYTES = 512
#: The path of the first request of the connection a greenlet serves (``Worker.handle``).
_connection = local()

# What a status of gunicorn's own means to the client: (code, text); the usual text of
# the status otherwise.
_REFUSALS = {
    400: (
        "bad_request",
        "the request is not valid HTTP/1.1: its request line or a header could not be parsed",
    ),
    417: ("bad_request", "the only Expect this server takes is 100-continue"),
    431: ("headers_too_large", "the request has too many headers, or one too long"),
    501: (
        "bad_request",
        "unsupported Transfer-Encoding: send the body with Content-Length or chunked",
    ),
}


# gunicorn ships no type information, so its worker class is Any to mypy.
class Worker(GeventWorker):  # type: ignore[misc]
    """gunicorn's gevent worker, whose answers to unparsable requests are JSON."""

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        _connection.path = _first_path(client)
        super().handle(listener, client, addr)

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        # Imported here: gunicorn's master loads this class, and must not load Django
        # before the worker patches the standard library (docs/serving.md#the-worker).
        from aimemory_site.errors_views import MACHINE_PREFIXES, machine_error_body
        from aimemory_site.lib.errors import AppError

        path = getattr(req, "path", None) or getattr(_connection, "path", None)
        if path is not None and not unquote(path).startswith(MACHINE_PREFIXES):
            super().handle_error(req, client, addr, exc)
            return
        written = _WrittenAnswer()
        super().handle_error(req, written, addr, exc)  # gunicorn chooses, logs, counts
        status_line = written.status_line()
        status = int(status_line.split(" ", 1)[0])
        refusal = _REFUSALS.get(status)
        error = None if refusal is None else AppError(refusal[1], code=refusal[0])
        body = json.dumps(machine_error_body(unquote(path or ""), status, error))
        head = (
            f"HTTP/1.1 {status_line}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        try:
            client.sendall((head + body).encode("latin-1"))
        except OSError:  # the client is gone, as gunicorn's own answer allows
            self.log.debug("Failed to send error message.")


def _first_path(client: Any) -> str | None:
    """The path of the request that ``client``'s first bytes begin, peeked at without
    reading them; None when they hold none (or none came within the keep-alive time,
    after which gunicorn closes the connection anyway)."""
    try:
        wait_read(client.fileno(), timeout=5.0)
        start: bytes = client.recv(PEEKED_BYTES, socket.MSG_PEEK)
    except (OSError, ValueError):  # a timeout is an OSError too
        return None
    line = start.removeprefix(b"\r\n").split(b"\r\n", 1)[0]
    target = line.partition(b" ")[2].split(b" ", 1)[0].decode("latin-1")
    if "://" in target:  # the absolute form: http://host/path
        target = "/" + target.split("://", 1)[1].partition("/")[2]
    if not target.startswith("/"):
        return None
    return target.split("?", 1)[0].split("#", 1)[0]


class _WrittenAnswer:
    """Stands for the client's socket while gunicorn writes its error answer, to learn
    the status it chose."""

    def __init__(self) -> None:
        self.written = bytearray()

    def gettimeout(self) -> float:
        return 0.0

    def sendall(self, data: bytes) -> None:
        self.written += data

    def status_line(self) -> str:
        """``400 Bad Request``: the status line of the answer, after the HTTP version."""
        first = bytes(self.written).split(b"\r\n", 1)[0].decode("latin-1")
        return first.split(" ", 1)[1] if " " in first else "400 Bad Request"
