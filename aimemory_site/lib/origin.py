"""Which browser origins may call this server: the one rule of ``/api/``, ``/mcp`` and
``/handoff`` (DESIGN.md section 7, Requests)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from django.http import HttpRequest

_LOOPBACK_NAMES = frozenset({"localhost", "localhost."})


def origin_allowed(request: HttpRequest) -> bool:
    """No Origin (every CLI agent and MCP client), a loopback origin, or this server's own.

    A browser sends the page's Origin with every write (and with cross-origin reads);
    refusing foreign ones keeps a web page a developer visits from writing to, or reading
    from, a local server. A loopback origin is a page served by this machine itself.
    Same-host is judged on Django's validated Host, so ``ALLOWED_HOSTS`` decides which
    names count as this server (which also defeats DNS rebinding).
    """
    # META, not request.headers: building the headers mapping costs more than this rule.
    origin: str | None = request.META.get("HTTP_ORIGIN")
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
