"""Request checks that run before any view: the size limit and the request guard."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse

from aimemory_site.errors_views import API_PREFIXES, error_page, is_machine, machine_error
from aimemory_site.lib.errors import PayloadTooLarge, error_response
from aimemory_site.lib.request_guard import json_request_refusal, url_text_refusal

logger = logging.getLogger(__name__)


class RequestSizeLimitMiddleware:
    """Refuse request bodies over 1 MiB with 413 before anything parses them."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # Machine routes get a JSON 413; the web's forms keep Django's own limit.
        if is_machine(request) and request.method in ("POST", "PUT", "PATCH"):
            limit: int = settings.AI_MEMORY_MAX_REQUEST_BYTES
            try:
                declared = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                declared = 0
            if declared > limit:
                return self.too_large(limit)
            try:
                request.body  # noqa: B018 - reads at most the limit, then raises
            except RequestDataTooBig:
                return self.too_large(limit)
        return self.get_response(request)

    @staticmethod
    def too_large(limit: int) -> JsonResponse:
        return error_response(PayloadTooLarge(f"request body is larger than {limit} bytes"))


class RequestGuardMiddleware:
    """Apply ``json_request_refusal`` to the JSON API and the hook route, and refuse
    NUL or lone surrogates in any web URL with our own 400 page.

    ``/mcp`` applies the same rule itself, after its method check, and answers in
    JSON-RPC (``aimemory_site.mcp.views``).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path
        if path.startswith(API_PREFIXES):
            refusal = json_request_refusal(request)
            if refusal is not None:
                return error_response(refusal)
        elif not path.startswith("/mcp"):
            refusal = url_text_refusal(request)
            if refusal is not None:
                return error_page("400.html", 400)
        return self.get_response(request)


class MachineErrorMiddleware:
    """Every error of a machine route answers JSON (DESIGN.md section 14).

    Django's own answers (a method check's 405, the CSRF 403, ninja's text 405) are
    rewritten to ``{"detail", "code"}`` with the same status; a database error raised by
    a view becomes 503 ``database_unavailable`` (an HTML page of ours on the web pages).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code >= 400
            and is_machine(request)
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            rewritten = machine_error(request, response.status_code)
            if response.has_header("Allow"):
                rewritten["Allow"] = response["Allow"]
            return rewritten
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, DatabaseError):
            return None  # Django's handler500 answers it (ours, by surface)
        logger.warning("database unavailable on %s: %s", request.path, type(exception).__name__)
        if is_machine(request):
            return machine_error(request, 503)
        return error_page("503.html", 503)
