"""The WSGI application ``ai-memory serve`` runs: Django's, with what the server offers a
request under the environ keys the apps read (docs/serving.md#the-loop)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
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
        force_close = getattr(getattr(start_response, "__self__", None), "force_close", None)
        if callable(force_close):
            environ[CLOSE_CONNECTION] = force_close
        target = environ.get("RAW_URI") or environ.get("PATH_INFO", "")
        if len(environ.get("REQUEST_METHOD", "")) + len(target) + 10 > REQUEST_LINE_MAX_BYTES:
            return _request_line_too_long(environ, start_response)
        try:
            return application(environ, start_response)
        finally:
            # A Django response is whole when the application returns: its database
            # connections can serve the next request now.
            connections_let_go()

    return wsgi


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
