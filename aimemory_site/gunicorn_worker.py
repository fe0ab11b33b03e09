"""The gunicorn worker ``ai-memory serve`` runs: gthread, plus a way to close a connection.

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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from gunicorn.workers.gthread import ThreadWorker as GthreadWorker

#: WSGI environ key of the zero-argument callable that closes the connection after this
#: response (a server-specific extension, named like ``gunicorn.socket``).
CLOSE_CONNECTION = "aimemory.close_connection"

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


# gunicorn ships no type information, so its worker class is Any to mypy.
class ThreadWorker(GthreadWorker):  # type: ignore[misc]
    """gunicorn's gthread worker, offering the application ``CLOSE_CONNECTION``."""

    wsgi: WsgiApp  # set by gunicorn's load_wsgi

    def load_wsgi(self) -> None:
        super().load_wsgi()
        self.wsgi = offering_close(self.wsgi)


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
