"""The WSGI application ``ai-memory serve`` runs: Django's, with what the server offers a
request under the environ keys the apps read (docs/serving.md#the-loop)."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterable, Iterator
from time import monotonic
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aimemory_site.settings")

from django.conf import settings
from django.core.wsgi import get_wsgi_application

from aimemory_site.errors_views import MACHINE_PREFIXES, machine_error_body
from aimemory_site.lib.db_spares import connections_let_go
from aimemory_site.lib.errors import AppError, Code
from aimemory_site.lib.wakeups import CLIENT_GONE
from aimemory_site.serving.clients import WatchedClient
from aimemory_site.serving.keys import CLOSE_CONNECTION

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

#: The longest request line (method, target and version) served. gunicorn is told to
#: take longer ones (``limit_request_line = 0``) so that the application, which knows
#: the route, refuses them: JSON on the machine routes, a page on the web.
REQUEST_LINE_MAX_BYTES = 4094


def serving(application: WsgiApp) -> WsgiApp:
    """Wrap ``application`` so each request's environ holds ``CLIENT_GONE`` and
    ``CLOSE_CONNECTION``, its socket gives up on a client silent for
    ``AI_MEMORY_CLIENT_TIMEOUT`` while its body is read and its answer written, a request
    line over ``REQUEST_LINE_MAX_BYTES`` is refused, and its database connections go
    back to the spares once it is answered."""
    client_timeout = float(settings.AI_MEMORY_CLIENT_TIMEOUT)

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        sock = environ.get("gunicorn.socket")
        if sock is not None:
            sock.settimeout(client_timeout)
            environ[CLIENT_GONE] = WatchedClient(sock)
        closing = _Closing(sock, start_response)
        if closing.offered:
            environ[CLOSE_CONNECTION] = closing
        target = environ.get("RAW_URI") or environ.get("PATH_INFO", "")
        if len(environ.get("REQUEST_METHOD", "")) + len(target) + 10 > REQUEST_LINE_MAX_BYTES:
            return _request_line_too_long(environ, start_response)
        try:
            answer = application(environ, start_response)
        finally:
            # A Django response is whole when the application returns: its database
            # connections can serve the next request now.
            connections_let_go()
        return closing.after(answer) if closing.asked else answer

    return wsgi


class _Closing:
    """``CLOSE_CONNECTION`` of one request: called before the answer starts, it makes
    gunicorn say ``Connection: close`` (its response's ``force_close``) and, once the
    answer is written, end the connection gracefully: FIN first, then a short linger
    that reads and drops what the client still sends, so a client still writing a body
    the server refused reads the answer rather than a reset."""

    __slots__ = ("asked", "force_close", "sock")

    def __init__(self, sock: Any, start_response: Callable[..., Any]) -> None:
        self.sock = sock
        self.force_close = getattr(getattr(start_response, "__self__", None), "force_close", None)
        self.asked = False

    @property
    def offered(self) -> bool:
        return self.sock is not None and callable(self.force_close)

    def __call__(self) -> None:
        assert self.force_close is not None
        self.force_close()
        self.asked = True

    def after(self, answer: Iterable[bytes]) -> Iterable[bytes]:
        return _ThenClose(answer, self.sock)


class _ThenClose:
    """An answer whose ``close`` (called by the server once it is written) also ends the
    connection gracefully."""

    def __init__(self, answer: Iterable[bytes], sock: Any) -> None:
        self.answer = answer
        self.sock = sock

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.answer)

    def close(self) -> None:
        close = getattr(self.answer, "close", None)
        if callable(close):
            close()
        _close_gracefully(self.sock)


#: How long, and how much, a connection ended after its answer is read from before it
#: closes (``_Closing``).
LINGER_SECONDS = 2.0
LINGER_BYTES = 4 * 1024 * 1024


def _close_gracefully(sock: Any) -> None:
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline = monotonic() + LINGER_SECONDS
        drained = 0
        while drained < LINGER_BYTES and (left := deadline - monotonic()) > 0:
            sock.settimeout(left)
            piece = sock.recv(64 * 1024)
            if not piece:
                return
            drained += len(piece)
    except OSError:
        return


def _request_line_too_long(
    environ: dict[str, Any], start_response: Callable[..., Any]
) -> Iterable[bytes]:
    path = environ.get("PATH_INFO", "")
    status = "414 URI Too Long"
    if not path.startswith(MACHINE_PREFIXES):
        page = b"<!doctype html><title>414 URI Too Long</title><h1>URI Too Long</h1>"
        start_response(status, [("Content-Type", "text/html; charset=utf-8")])
        return [page]
    error = AppError(
        f"the request line (method, path and query) is longer than {REQUEST_LINE_MAX_BYTES} bytes",
        code=Code.REQUEST_LINE_TOO_LONG,
    )
    body = json.dumps(machine_error_body(path, 414, error)).encode()
    start_response(status, [("Content-Type", "application/json")])
    return [body]


application = serving(get_wsgi_application())
