"""Error answers of our own on every surface (docs/reference.md#limits-and-faults).

Machine routes (``/api/``, ``/mcp``, ``/handoff``, ``/healthz``, ``/.well-known/``) answer
every error as ``{"detail", "code"}`` JSON, whatever raised it (Django's URL resolver, a
method check, a bad Host, a crash, a database outage); ``/mcp`` wraps the same in a
JSON-RPC error so a client can parse it. Pages for people get HTML pages of ours.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from django.core.exceptions import DisallowedHost
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader

from aimemory_site.lib.errors import AppError, Code, error_body, rpc_error_body

# The JSON API and the hook route; with MCP, health and discovery, every machine route.
API_PREFIXES = ("/api/", "/handoff")
MACHINE_PREFIXES = (*API_PREFIXES, "/mcp", "/healthz", "/.well-known/")

_TEXTS = {
    400: (Code.BAD_REQUEST, "bad request"),
    403: (Code.FORBIDDEN, "forbidden"),
    404: (Code.NOT_FOUND, "no such route; see /api/v1/docs"),
    405: (Code.METHOD_NOT_ALLOWED, "method not allowed"),
    500: (Code.SERVER_ERROR, "internal error; the server log has the details"),
    503: (
        Code.DATABASE_UNAVAILABLE,
        "the database is unavailable; retry shortly (nothing was changed)",
    ),
}


def is_machine(request: HttpRequest) -> bool:
    return request.path.startswith(MACHINE_PREFIXES)


def machine_error(request: HttpRequest, status: int, error: AppError | None = None) -> HttpResponse:
    """``{"detail", "code"}`` with ``status`` (in a JSON-RPC error on ``/mcp``)."""
    return JsonResponse(machine_error_body(request.path, status, error), status=status)


def machine_error_body(path: str, status: int, error: AppError | None = None) -> dict[str, Any]:
    """The JSON body of an error answer with ``status`` on the machine route ``path``:
    ``error``'s ``{"detail", "code"}``, or the usual one for ``status`` without it; on
    ``/mcp`` a JSON-RPC error carrying the same. Also the body of the answers gunicorn
    gives before a request reaches Django (``aimemory_site.serving.worker``)."""
    if error is None:
        code, text = _TEXTS.get(status, (Code.BAD_REQUEST, "error"))
        error = AppError(text, code=code)
    if path.startswith("/mcp"):
        return rpc_error_body(error, status)
    return error_body(error)


def error_page(template: str, status: int) -> HttpResponse:
    """One of our error pages, rendered without the request: its context processors
    would reach for the session and the user, which an outage may have taken away."""
    return HttpResponse(loader.render_to_string(template), status=status)


def _page(template: str, status: int) -> Callable[..., HttpResponse]:
    def view(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
        if is_machine(request):
            if status == 400 and isinstance(exception, DisallowedHost):
                return machine_error(
                    request,
                    400,
                    AppError("this server does not serve that Host", code=Code.BAD_HOST),
                )
            if status == 500 and isinstance(sys.exc_info()[1], DatabaseError):
                return machine_error(request, 503)
            return machine_error(request, status)
        if status == 500 and isinstance(sys.exc_info()[1], DatabaseError):
            return error_page("503.html", 503)
        return error_page(template, status)

    return view


bad_request = _page("400.html", 400)
permission_denied = _page("403.html", 403)
page_not_found = _page("404.html", 404)
server_error = _page("500.html", 500)
