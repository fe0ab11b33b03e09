"""The gunicorn worker ``ai-memory serve`` runs: gthread, plus a way to close a connection
and a time limit on a stalled client.

gunicorn decides keep-alive itself and drops a ``Connection`` header set by the
application (it is hop-by-hop), so a WSGI application cannot say "this connection ends
here". The 413 of ``RequestSizeLimitMiddleware`` needs to when it could not drain the
rest of an oversized body: announcing keep-alive and then closing is what made clients'
next pooled request fail (issue 15).

So every request's environ carries a callable under ``CLOSE_CONNECTION``. Called before
the response starts, it makes gunicorn send ``Connection: close`` and, once the response
is written, close the connection gracefully (FIN first, then a short linger that reads
what the client still sends). Under any other server the key is absent and the
application's answer is unchanged.

gthread reads a request and writes its answer on a blocking socket with no time limit,
so a client that stops halfway through its request (a suspended process, a laptop that
lost its network, or one that means to) holds a worker thread for good; on SQLite a
worker has one thread, and a handful of such clients stopped every worker (tests/
test_slow_clients.py). Every socket operation on a served connection now ends after
``AI_MEMORY_CLIENT_TIMEOUT`` seconds without progress, and the connection is closed;
and a new connection that has sent nothing yet waits in the poller, not in a thread.

Every worker process polls the one listening socket, and whichever wakes first takes a
new connection; a client keeps its connection, so its requests stay with that worker.
Eight clients came to rest on four single-threaded workers as 7 + 1 or 4 + 2 + 2, and the
requests of a worker holding more connections wait behind each other while another
worker idles. A worker that already holds connections now leaves a new one to the others
for a moment per connection it holds (``ACCEPT_DEFER_PER_CONNECTION_SECONDS``), so the
one holding fewest takes it: the p99 of sends and pops at 8 clients fell by a sixth
(docs/hot-path.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from time import monotonic
from typing import Any

from django.conf import settings
from gunicorn.workers import gthread
from gunicorn.workers.gthread import ThreadWorker as GthreadWorker

#: WSGI environ key of the zero-argument callable that closes the connection after this
#: response (a server-specific extension, named like ``gunicorn.socket``).
CLOSE_CONNECTION = "aimemory.close_connection"

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


# gunicorn ships no type information, so its worker class is Any to mypy.
class ThreadWorker(GthreadWorker):  # type: ignore[misc]
    """gunicorn's gthread worker, offering the application ``CLOSE_CONNECTION``, with a
    time limit on stalled clients."""

    wsgi: WsgiApp  # set by gunicorn's load_wsgi
    # While in the future, this worker leaves new connections to the other workers.
    _accept_deferred_until = 0.0
    # When accepting resumed after a deferral: the connection it waited out, if no other
    # worker took it meanwhile, is this worker's to take now.
    _accept_resumed_at = float("-inf")

    def load_wsgi(self) -> None:
        super().load_wsgi()
        self.wsgi = offering_close(self.wsgi)
        self.client_timeout = float(settings.AI_MEMORY_CLIENT_TIMEOUT)
        self.log.error_log.addFilter(_StalledClientRecord(settings.AI_MEMORY_CLIENT_TIMEOUT))

    def accept(self, listener: Any) -> None:
        """Take a new connection, or first leave it to a worker that holds fewer.

        Called by the poller when the listening socket is readable, in every worker at
        once. A worker holding ``nr_conns`` connections stops listening for
        ``nr_conns`` times ``ACCEPT_DEFER_PER_CONNECTION_SECONDS`` (at most
        ``ACCEPT_DEFER_MAX_SECONDS``), without blocking its poller; if the connection
        is still waiting when it listens again, it takes it.
        """
        now = monotonic()
        waited_out = now - self._accept_resumed_at <= ACCEPT_RESUME_GRACE_SECONDS
        # One connection per deferral: clients connect in bursts, and the next of a
        # burst is again for the worker holding fewest.
        self._accept_resumed_at = float("-inf")
        if self.nr_conns and not waited_out:
            wait = min(
                ACCEPT_DEFER_MAX_SECONDS, self.nr_conns * ACCEPT_DEFER_PER_CONNECTION_SECONDS
            )
            self._accept_deferred_until = now + wait
            self.set_accept_enabled(False)
            return
        super().accept(listener)

    def set_accept_enabled(self, enabled: bool) -> None:
        # gthread's main loop asks for listening again at every turn while the worker has
        # room for more connections; a deferral holds it off until it ends.
        if enabled and not self._accepting and self._accept_deferred_until:
            now = monotonic()
            if now < self._accept_deferred_until:
                return
            self._accept_deferred_until = 0.0
            self._accept_resumed_at = now
        super().set_accept_enabled(enabled)

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        # Wake when a deferral ends, not a second later, even if nothing else happens.
        if self._accept_deferred_until:
            timeout = min(timeout, max(0.0, self._accept_deferred_until - monotonic()))
        super().wait_for_and_dispatch_events(timeout)

    def handle(self, conn: Any) -> Any:
        """Serve one request of ``conn`` (in a worker thread)."""
        if type(conn) is gthread.TConn:
            # gthread builds its connections itself (accept offers no hook for the
            # class); the subclass only adds the time limit to its socket.
            conn.__class__ = _TimedConnection
            conn.client_timeout = self.client_timeout
        if not conn.initialized and not conn.wait_for_data(FIRST_BYTES_WAIT_SECONDS):
            # Back to the poller, which hands it to a thread once its first bytes arrive.
            return gthread._DEFER
        return super().handle(conn)


#: How long a thread waits for the first bytes of a new connection before handing it back
#: to the poller. gthread waits 5 s, holding the thread: a connection opened ahead of need
#: (browsers keep spare ones) then stalled a single-threaded SQLite worker for that long.
#: A client sends its request right after connecting; this covers that gap.
FIRST_BYTES_WAIT_SECONDS = 0.02

#: How long a worker leaves a new connection to the others, per connection it holds
#: already, and at most. A worker busy with a request has its poller wait for the GIL,
#: up to Python's switch interval (5 ms), before it can take a connection; 2 ms per
#: connection still left eight clients as 3 + 2 + 2 + 1, 5 ms as 2 + 2 + 2 + 2. A new
#: connection waits at most 20 ms, and only while every worker holds some.
ACCEPT_DEFER_PER_CONNECTION_SECONDS = 0.005
ACCEPT_DEFER_MAX_SECONDS = 0.02
#: After a deferral the worker listens again and takes a connection that is still
#: waiting: the poller reports it within this long of listening again.
ACCEPT_RESUME_GRACE_SECONDS = 0.005


class _TimedConnection(gthread.TConn):  # type: ignore[misc]  # gunicorn is untyped
    """A gthread connection whose socket operations time out.

    ``handle`` makes the socket blocking before every request and then calls ``init``,
    so the limit is set here, after gunicorn's own set-up, for every request on the
    connection. A timed-out read or write raises ``TimeoutError`` where it blocked, and
    gthread closes the connection (a read in the application's body read answers the
    request as an unreadable body first)."""

    client_timeout: float

    def init(self) -> None:
        super().init()
        self.sock.settimeout(self.client_timeout)


class _StalledClientRecord(logging.Filter):
    """gthread logs a client socket's timeout as an error of the server, with its
    traceback; a client that stopped sending is the client's doing: one line at INFO."""

    def __init__(self, timeout: int) -> None:
        super().__init__()
        self.timeout = timeout

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], TimeoutError):
            record.msg = "closed a connection that stalled for %s s (AI_MEMORY_CLIENT_TIMEOUT)"
            record.args = (self.timeout,)
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def offering_close(application: WsgiApp) -> WsgiApp:
    """Wrap ``application`` so its environ holds the response's ``force_close``.

    gunicorn hands the application its ``Response.start_response`` bound method;
    ``force_close`` on that response is what gunicorn itself calls when a worker is about
    to restart: it sets ``Connection: close`` and ends the connection after the answer.
    tests/test_request_bodies.py checks this end to end, so a gunicorn that stops
    offering it fails there rather than silently announcing keep-alive again.
    """

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        force_close = getattr(getattr(start_response, "__self__", None), "force_close", None)
        if callable(force_close):
            environ[CLOSE_CONNECTION] = force_close
        return application(environ, start_response)

    return wsgi
