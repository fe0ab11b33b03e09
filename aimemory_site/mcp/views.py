"""The HTTP edge of MCP: ``POST /mcp`` and the OAuth discovery paths clients probe.

Order of checks: method (405), Origin (403), bearer (401); the body-size limit (413) is
enforced earlier by ``RequestSizeLimitMiddleware``. Only then is the body parsed.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from aimemory_site.lib.errors import Code, Forbidden, NotFound, Unauthorized, error_response
from aimemory_site.mcp.protocol import app_error_reply
from aimemory_site.mcp.server import handle_body
from projects.auth import principal_from_authorization

_LOOPBACK_NAMES = frozenset({"localhost", "localhost."})


@csrf_exempt
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    """Answer one JSON-RPC message. Stateless: no GET stream, no sessions to DELETE."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not origin_allowed(request):
        refused = Forbidden(
            f"requests from origin {request.headers['Origin']!r} are refused: MCP clients "
            "send no Origin, and a browser page may only call this server from itself",
            code=Code.ORIGIN_NOT_ALLOWED,
        )
        return app_error_reply(refused).response()
    try:
        # No WWW-Authenticate on the 401: a challenge sends clients looking for OAuth,
        # which this server does not offer; they should use their configured bearer.
        principal = principal_from_authorization(request.headers.get("Authorization"))
    except Unauthorized as exc:
        return app_error_reply(exc).response()
    return handle_body(request.body, headers=request.headers, principal=principal).response()


def origin_allowed(request: HttpRequest) -> bool:
    """No Origin (every CLI agent), a loopback origin, or this server's own host.

    A browser sends the page's Origin; refusing foreign ones keeps web pages from using
    a local server (DNS rebinding). Same-host is judged on Django's validated Host, so
    ALLOWED_HOSTS decides which names count as this server.
    """
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    try:
        parts = urlsplit(origin)
        hostname = parts.hostname
    except ValueError:  # an unbalanced IPv6 bracket
        return False
    if not hostname:
        return False  # "null" (sandboxed frames, file: pages) or no URL at all
    if hostname in _LOOPBACK_NAMES or hostname.endswith(".localhost"):
        return True
    try:
        if ipaddress.ip_address(hostname).is_loopback:
            return True
    except ValueError:
        pass  # a name, not an address
    return parts.netloc.lower() == request.get_host().lower()


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
