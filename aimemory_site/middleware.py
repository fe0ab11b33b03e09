from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse

from aimemory_site.lib.errors import PayloadTooLarge, error_response

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
