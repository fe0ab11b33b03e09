"""The WSGI application ``ai-memory serve`` runs: Django's, with what the server offers a
request under the environ keys the apps read (docs/serving.md#the-loop)."""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Iterable
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aimemory_site.settings")

from django.conf import settings  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

from aimemory_site.lib.db_spares import connections_let_go  # noqa: E402
from aimemory_site.lib.wakeups import CLIENT_GONE  # noqa: E402
from aimemory_site.serving.clients import WatchedClient  # noqa: E402
from aimemory_site.serving.keys import CLOSE_CONNECTION  # noqa: E402

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

#: Database connections a process keeps open between requests, as spares for the next
#: request's greenlet (``lib.db_spares``): a greenlet per connection, each holding a
#: database connection, would hold hundreds on a busy host.
SPARE_CONNECTIONS = 4


def _room(spares: int) -> bool:
    return spares < SPARE_CONNECTIONS


def serving(application: WsgiApp) -> WsgiApp:
    """Wrap ``application`` so each request's environ holds ``CLIENT_GONE`` and
    ``CLOSE_CONNECTION``, its socket gives up on a client silent for
    ``AI_MEMORY_CLIENT_TIMEOUT``, and its database connections go back to the spares
    when it is answered."""
    client_timeout = float(settings.AI_MEMORY_CLIENT_TIMEOUT)

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        sock = environ.get("gunicorn.socket")
        if sock is not None:
            sock.settimeout(client_timeout)
            environ[CLIENT_GONE] = WatchedClient(sock)
        force_close = getattr(getattr(start_response, "__self__", None), "force_close", None)
        if callable(force_close):
            environ[CLOSE_CONNECTION] = force_close
        # A context of its own: Django keeps a request's database connections in context
        # variables, which a greenlet would otherwise share with the one that spawned it.
        return contextvars.Context().run(_answered, application, environ, start_response)

    return wsgi


def _answered(
    application: WsgiApp, environ: dict[str, Any], start_response: Callable[..., Any]
) -> Iterable[bytes]:
    try:
        return application(environ, start_response)
    finally:
        # A Django response is whole when the application returns: its database
        # connections can serve the next request now.
        connections_let_go(_room)


application = serving(get_wsgi_application())
