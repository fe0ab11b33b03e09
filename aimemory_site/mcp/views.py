"""The HTTP edge of MCP: ``POST /mcp`` and the OAuth discovery paths clients probe.

Order of checks: method (405), then the request guard every machine surface shares
(Origin 403, media type 415, a body that is not UTF-8 or a NUL or lone surrogate 400
``invalid_text``), then the bearer (401); the body-size limit (413) is enforced earlier
by ``RequestSizeLimitMiddleware``. Only then is the body parsed.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from aimemory_site.lib.errors import Code, NotFound, Unauthorized, error_response
from aimemory_site.lib.request_guard import json_request_refusal
from aimemory_site.lib.wakeups import CLIENT_GONE
from aimemory_site.mcp.protocol import app_error_reply
from aimemory_site.mcp.server import handle_body
from projects.auth import principal_from_authorization


@csrf_exempt
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    """Answer one JSON-RPC message. Stateless: no GET stream, no sessions to DELETE."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    refused = json_request_refusal(request)
    if refused is not None:
        return app_error_reply(refused).response()
    try:
        # No WWW-Authenticate on the 401: a challenge sends clients looking for OAuth,
        # which this server does not offer; they should use their configured bearer.
        principal = principal_from_authorization(
            request.headers.get("Authorization"), request.META.get("REMOTE_ADDR") or ""
        )
    except Unauthorized as exc:
        return app_error_reply(exc).response()
    return handle_body(
        request.body,
        headers=request.headers,
        principal=principal,
        client_gone=request.META.get(CLIENT_GONE),
    ).response()


def well_known_not_found(request: HttpRequest, rest: str) -> JsonResponse:
    """``/.well-known/*`` (OAuth and OpenID discovery): JSON 404, no OAuth here.

    Clients probe these after a 401. An HTML page would make them fail to parse it; a 200
    would start an OAuth flow.
    """
    return error_response(
        NotFound(
            "this server offers no OAuth; send Authorization: Bearer <token>",
            code=Code.OAUTH_NOT_OFFERED,
        )
    )
