"""The WSGI application ``ai-memory serve`` runs: Django's, with what the server offers a
request under the environ keys the apps read (docs/serving.md#the-loop)."""

from __future__ import annotations

import io
import json
import os
import socket
from collections.abc import Callable, Iterable, Iterator
from time import monotonic
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aimemory_site.settings")

import gevent
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from greenlet import greenlet

from aimemory_site.errors_views import MACHINE_PREFIXES, machine_error_body
from aimemory_site.lib.db_spares import connections_let_go
from aimemory_site.lib.errors import AppError, Code
from aimemory_site.lib.wakeups import CLIENT_GONE, ParkOutside, ServedCall
from aimemory_site.serving.clients import WatchedClient
from aimemory_site.serving.keys import CLOSE_CONNECTION

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

#: The longest request line (method, target and version) served. gunicorn is told to
#: take longer ones (``limit_request_line = 0``) so that the application, which knows
#: the route, refuses them: JSON on the machine routes, a page on the web.
REQUEST_LINE_MAX_BYTES = 4094


def serving(application: WsgiApp) -> WsgiApp:
    """Wrap ``application`` so each request's environ holds ``CLIENT_GONE`` (a
    ``ServedCall``) and ``CLOSE_CONNECTION``, its socket gives up on a client silent for
    ``AI_MEMORY_CLIENT_TIMEOUT`` while its body is read and its answer written, a request
    line over ``REQUEST_LINE_MAX_BYTES`` is refused, its database connections go back to
    the spares once it is answered, a call that parks does so here, outside the
    application, which runs the request again at each wake (docs/serving.md#the-loop),
    and the other connections get their turn once its answer is written (``_Answer``)."""
    client_timeout = float(settings.AI_MEMORY_CLIENT_TIMEOUT)
    body_kept_max = int(settings.AI_MEMORY_MAX_REQUEST_BYTES)

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        sock = environ.get("gunicorn.socket")
        served = None
        if sock is not None:
            sock.settimeout(client_timeout)
            served = environ[CLIENT_GONE] = ServedCall(WatchedClient(sock))
        closing = _Closing(sock, start_response)
        if closing.offered:
            environ[CLOSE_CONNECTION] = closing
        target = environ.get("RAW_URI") or environ.get("PATH_INFO", "")
        if len(environ.get("REQUEST_METHOD", "")) + len(target) + 10 > REQUEST_LINE_MAX_BYTES:
            return _request_line_too_long(environ, start_response)
        body = environ["wsgi.input"] = _KeptBody(environ["wsgi.input"], body_kept_max)
        # ``environ`` stays the request as it came, for its later runs; each run changes
        # an environ of its own, let go of before a park, so that a parked call holds its
        # request once (the server holds ``environ`` anyway).
        environ_of_run = dict(environ)
        try:
            while True:
                try:
                    answer = _run(application, environ_of_run, start_response)
                    break
                except ParkOutside:
                    pass  # its wait is held by ``served``, and nothing else of the run
                assert served is not None and body.whole, "only a ServedCall parks outside"
                del environ_of_run
                served.park()
                environ_of_run = _run_again(environ, body.kept())
        finally:
            if served is not None:
                served.end()
        if closing.asked:
            return _Answer(answer, sock)
        file_wrapper: type | None = environ.get("wsgi.file_wrapper")
        if file_wrapper is not None and isinstance(answer, file_wrapper):
            return answer  # a file: gunicorn sends it with sendfile only as it is
        return _Answer(answer, None)

    return wsgi


def _run(
    application: WsgiApp, environ: dict[str, Any], start_response: Callable[..., Any]
) -> Iterable[bytes]:
    """One run of ``application``, in a greenlet of its own (a child of the request's,
    which waits for it): a parked call's greenlet then holds only the few frames of the
    server and this module, not the pages of stack a run of Django's took (16 KiB of its
    greenlet's, kept as long as the greenlet lives). The run's database connections are
    its greenlet's (Django keeps them per greenlet), so it lets go of them as it ends: a
    Django response is whole when the application returns."""

    def run() -> Iterable[bytes]:
        try:
            return application(environ, start_response)
        finally:
            connections_let_go()

    answer: Iterable[bytes] = greenlet(run).switch()
    return answer


def _run_again(request: dict[str, Any], body: bytes) -> dict[str, Any]:
    """The environ of a later run of ``request``: as it came, with its body (read by the
    first run) to read again."""
    environ = dict(request)
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    environ.pop("HTTP_TRANSFER_ENCODING", None)  # the body kept is the chunks' content
    return environ


class _KeptBody:
    """A request's ``wsgi.input`` that keeps what the application reads of it, up to
    ``limit`` bytes, so that a call that parks can be run again with its body; a body
    read past that (one the size limit refuses, which never parks) is kept no more."""

    __slots__ = ("_size", "chunks", "limit", "stream", "whole")

    def __init__(self, stream: Any, limit: int) -> None:
        self.stream = stream
        self.limit = limit
        self.chunks: list[bytes] = []
        self._size = 0
        self.whole = True

    def _keep(self, data: bytes) -> bytes:
        if self.whole:
            self._size += len(data)
            if self._size > self.limit:
                self.whole, self.chunks = False, []
            elif data:
                self.chunks.append(data)
        return data

    def read(self, size: int | None = None) -> bytes:
        return self._keep(self.stream.read(size))

    def readline(self, size: int | None = None) -> bytes:
        return self._keep(self.stream.readline(size))

    def readlines(self, hint: int | None = None) -> list[bytes]:
        return [self._keep(line) for line in self.stream.readlines(hint)]

    def __iter__(self) -> Iterator[bytes]:
        return (self._keep(line) for line in self.stream)

    def kept(self) -> bytes:
        if len(self.chunks) > 1:
            self.chunks = [b"".join(self.chunks)]
        return self.chunks[0] if self.chunks else b""


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


class _Answer:
    """An answer whose ``close`` (called by the server once it is written) gives the
    process's other connections their turn, after ending its own connection gracefully
    if it was asked to (``_Closing``): the connection's greenlet reads the client's next
    request at once, and one that has arrived already is read without waiting, so under
    a steady load the same few connections were served over and over while the others'
    requests waited: at 8 clients, `/healthz` p99 of 86-95 ms with p50 under one
    (docs/serving.md#a-tail-on-sqlite)."""

    __slots__ = ("answer", "sock")

    def __init__(self, answer: Iterable[bytes], sock: Any) -> None:
        self.answer = answer
        self.sock = sock

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.answer)

    def close(self) -> None:
        close = getattr(self.answer, "close", None)
        if callable(close):
            close()
        if self.sock is not None:
            _close_gracefully(self.sock)
        gevent.sleep(0)  # to the back of the ready greenlets


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
    body = json.dumps(machine_error_body(path, error.http_status, error)).encode()
    start_response(status, [("Content-Type", "application/json")])
    return [body]


application = serving(get_wsgi_application())
