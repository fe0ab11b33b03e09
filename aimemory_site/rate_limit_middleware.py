"""``AI_MEMORY_RATE_LIMIT`` on the routes agents call (the rule: ``projects.rate_limits``)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.core.exceptions import MiddlewareNotUsed
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse

from aimemory_site.errors_views import API_PREFIXES, machine_error
from aimemory_site.lib.wakeups import CLIENT_GONE, run_again
from projects.rate_limits import rate_limit_caller, rate_limit_configured, rate_limit_refusal

logger = logging.getLogger(__name__)

# The JSON API, the hook route and MCP: what agents call, in loops a limit is for.
# Not /healthz: a load balancer's probe must never be refused, or a busy server would be
# taken out of rotation. Not /.well-known/: constant discovery answers without a database.
# Not /web/, /admin/ or sign-in: pages for people, behind a session; sign-in is throttled
# by axes. Static files never get here (whitenoise answers them earlier).
RATE_LIMITED_PREFIXES = (*API_PREFIXES, "/mcp")


class RateLimitMiddleware:
    """Refuse a request over the limit with 429 ``rate_limited`` and ``Retry-After``
    before any view runs, so a refused request changes nothing.

    Unset, the middleware takes itself out of the chain at start (MiddlewareNotUsed): no
    query and no work per request. A bad value raises ImproperlyConfigured at start,
    which the system check ``projects.E001`` reports first.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        limit = rate_limit_configured()
        if limit is None:
            raise MiddlewareNotUsed("AI_MEMORY_RATE_LIMIT is not set")
        self.limit = limit
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(RATE_LIMITED_PREFIXES) or run_again(
            request.META.get(CLIENT_GONE)
        ):
            # A later run of a parked call is its look after a wake, not a new call.
            return self.get_response(request)
        # REMOTE_ADDR may be empty (a unix socket bind): such callers share one counter.
        address = request.META.get("REMOTE_ADDR") or ""
        caller = rate_limit_caller(request.headers.get("Authorization"), address)
        try:
            refusal = rate_limit_refusal(self.limit, caller)
        except DatabaseError as exc:
            # An outage is not a reason to refuse: the view meets it too and answers 503
            # database_unavailable (MachineErrorMiddleware), as it does without a limit.
            logger.warning("rate limit not counted on %s: %s", request.path, type(exc).__name__)
            return self.get_response(request)
        if refusal is None:
            return self.get_response(request)
        response = machine_error(request, refusal.http_status, refusal)
        response["Retry-After"] = str(refusal.retry_after_s)
        return response
