"""The Content-Security-Policy header (docs/reference.md#limits-and-faults); Django 5.2 has none built in.

Our pages, Django admin and the bundled Swagger UI at ``/api/v1/docs`` all load their
scripts and styles from ``/static/`` and keep no inline code, so one strict policy covers
every response. Were an inline script to slip into a template, the browser would refuse
it, and the browser tests, which fail on any reported violation, would notice.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        # data: for the inline SVG favicon of our pages and the icons in admin's and
        # Swagger UI's stylesheets.
        "img-src 'self' data:",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ]
)


class ContentSecurityPolicyMiddleware:
    """Give every response the policy, unless its view set a policy of its own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        response.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response
