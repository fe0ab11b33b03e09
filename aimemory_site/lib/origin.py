"""Which browser origins may call this server: the one rule of ``/api/``, ``/mcp`` and
``/handoff`` (docs/reference.md#json-api).

An origin is a scheme, a host and a port. A page on another port of the same machine is
another origin: a local dev server (any npm package's) serves scripts that a browser
would otherwise let write mail that another project's agent then reads.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from django.http import HttpRequest

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_normalise(value: str) -> str | None:
    """``scheme://host[:port]`` of an origin, lowercase, without its scheme's default
    port; None when ``value`` names no origin (``null``, no scheme or host, a path, a
    query, credentials, a port that is no port).

    A trailing ``/`` is forgiven: an operator pastes a URL where an origin is asked for.
    """
    try:
        parts = urlsplit(value.strip())
        host = parts.hostname  # lowercase, IPv6 without its brackets
        port = parts.port
    except ValueError:  # an unbalanced IPv6 bracket, a port out of range or not a number
        return None
    scheme = parts.scheme.lower()
    if not scheme or not host or "@" in parts.netloc:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    if ":" in host:
        host = f"[{host}]"
    if port is None or port == _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def allowed_origins_parse(raw: str) -> tuple[str, ...]:
    """The ``AI_MEMORY_ALLOWED_ORIGINS`` value (comma-separated origins), normalised.

    An entry that is no origin stops the server at start: a mistyped origin would
    otherwise refuse the page it was meant to let in, with nothing saying why.
    """
    origins: list[str] = []
    for entry in raw.split(","):
        if not entry.strip():
            continue
        normal = origin_normalise(entry)
        if normal is None:
            raise ImproperlyConfigured(
                f"AI_MEMORY_ALLOWED_ORIGINS: {entry.strip()!r} is not an origin; give each "
                "as scheme://host[:port], such as http://localhost:5173, separated by commas"
            )
        origins.append(normal)
    return tuple(origins)


@lru_cache(maxsize=8)
def _allowed(listed: tuple[str, ...]) -> frozenset[str]:
    # Normalised again here, so a setting assigned in code (not read from the
    # environment) compares the same way.
    return frozenset(filter(None, map(origin_normalise, listed)))


def own_origin(request: HttpRequest) -> str | None:
    """The server's own origin as this request reached it: its scheme and its Host.

    ``get_host`` is Django's validated Host, so ``ALLOWED_HOSTS`` decides which names
    count as this server (which also defeats DNS rebinding); the scheme is https behind
    a TLS proxy that says so (``SECURE_PROXY_SSL_HEADER``).
    """
    return origin_normalise(f"{request.scheme}://{request.get_host()}")


def origin_ours(request: HttpRequest, origin: str) -> bool:
    """Whether ``origin`` is this server's own (as ``request`` reached it) or a listed one;
    a value that names no origin is neither."""
    normal = origin_normalise(origin)
    if normal is None:
        return False
    if normal == own_origin(request):
        return True
    return normal in _allowed(tuple(settings.AI_MEMORY_ALLOWED_ORIGINS))


def page_ours(request: HttpRequest, url: str) -> bool:
    """Whether the page at ``url`` (a ``Referer``) is on an origin ``origin_ours``
    accepts: its scheme, host and port; a value that is no such URL is foreign."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:  # an unbalanced IPv6 bracket
        return False
    return origin_ours(request, f"{parts.scheme}://{parts.netloc}")


def origin_allowed(request: HttpRequest) -> bool:
    """No Origin (every CLI agent and MCP client), this server's own, or a listed one.

    A browser sends the page's Origin with every write (and with cross-origin reads);
    refusing foreign ones keeps a web page a developer visits from writing to, or reading
    from, a local server.
    """
    # META, not request.headers: building the headers mapping costs more than this rule.
    origin: str | None = request.META.get("HTTP_ORIGIN")
    return origin is None or origin_ours(request, origin)
