"""Request checks that run before any view: the size limit and the request guard."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import bad_request

from aimemory_site.lib.errors import PayloadTooLarge, error_response
from aimemory_site.lib.request_guard import json_request_refusal, url_text_refusal

# Machine surfaces whose oversized bodies get a JSON 413 instead of Django's HTML 400.
JSON_PREFIXES = ("/api/", "/mcp", "/handoff")


class RequestSizeLimitMiddleware:
    """Refuse request bodies over 1 MiB with 413 before anything parses them."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(JSON_PREFIXES) and request.method in ("POST", "PUT", "PATCH"):
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
        if path.startswith(_GUARDED_JSON_PREFIXES):
            refusal = json_request_refusal(request)
            if refusal is not None:
                return error_response(refusal)
        elif not path.startswith("/mcp"):
            refusal = url_text_refusal(request)
            if refusal is not None:
                return bad_request(request, refusal)
        return self.get_response(request)


# The MCP endpoint runs the same checks in its own order and JSON-RPC shape.
_GUARDED_JSON_PREFIXES = ("/api/", "/handoff")
