"""The checks every machine request passes before a view reads it (docs/reference.md#json-api).

One rule, applied by ``RequestGuardMiddleware`` to ``/api/`` and ``/handoff`` and by the
MCP view (in its own order: method, then these, then the bearer):

- a present ``Origin`` that is neither this server's own (the scheme, host and port the
  request reached) nor listed in ``AI_MEMORY_ALLOWED_ORIGINS``: 403
  ``origin_not_allowed``, so no web page, a page on another port of this machine
  included, can write to (or read from) a local server;
- a body that is not ``application/json`` (forms and ``text/plain`` included): 415
  ``unsupported_media_type``, which also keeps browsers' CORS-free "simple requests" out;
- a body, a path or a query that is not UTF-8 (JSON in UTF-16 or UTF-32 included; the
  path and the query once percent-decoded), or a NUL or a lone surrogate in the path,
  the query or any string of the body: 400 ``invalid_text``.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from django.http import HttpRequest

from aimemory_site.lib.errors import AppError, BadRequest, Code, Forbidden, UnsupportedMediaType
from aimemory_site.lib.origin import origin_allowed, own_origin
from aimemory_site.lib.text import HOSTILE_TEXT, NOT_UTF8_URL, json_body_problem, text_invalid

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _json_media_type(content_type: str) -> bool:
    return content_type == "application/json" or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


def _has_body(request: HttpRequest) -> bool:
    if request.META.get("HTTP_TRANSFER_ENCODING"):
        return True
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0) > 0
    except ValueError:
        return True


# An escape of a byte over 0x7F, as Django writes one that is not part of UTF-8 back into
# the path it decodes (``repercent_broken_unicode``).
_REPERCENTED = re.compile("%[89A-F][0-9A-F]")


def _percent_decoded_utf8(raw: str) -> bool:
    """Whether ``raw``, WSGI text (a byte to a latin-1 character), is UTF-8 once
    percent-decoded."""
    try:
        unquote_to_bytes(raw.encode("latin-1")).decode("utf-8")
    except UnicodeError:  # not WSGI text, or bytes that are not UTF-8
        return False
    return True


def _url_not_utf8(request: HttpRequest) -> bool:
    """Whether the path or the query, percent-decoded, is not UTF-8.

    Django reads both leniently: a byte that is not UTF-8 becomes U+FFFD in the query
    and its escape again in the path, whose raw ``PATH_INFO`` it overwrites. So the raw
    decides: gunicorn's ``RAW_URI``, the request target as sent. Without it (Django's
    test client, another server), the query's raw ``QUERY_STRING`` and, in the path, an
    escape of a byte over 0x7F, which Django wrote back for a byte that is not UTF-8 (or
    the client sent as ``%25``, which no route here takes either).
    """
    meta = request.META
    raw: str | None = meta.get("RAW_URI")
    if raw is not None:
        return not _percent_decoded_utf8(raw)
    return _REPERCENTED.search(request.path_info) is not None or not _percent_decoded_utf8(
        meta.get("QUERY_STRING", "")
    )


def url_text_refusal(request: HttpRequest) -> AppError | None:
    """400 ``invalid_text`` when the path or the query is not UTF-8, or holds a NUL or a
    lone surrogate."""
    if _url_not_utf8(request):
        return invalid_text(NOT_UTF8_URL)
    if text_invalid(request.path) or any(
        text_invalid(key) or any(text_invalid(value) for value in values)
        for key, values in request.GET.lists()
    ):
        return invalid_text()
    return None


def invalid_text(problem: str = HOSTILE_TEXT) -> BadRequest:
    return BadRequest(f"{problem}; nothing was changed", code=Code.INVALID_TEXT)


def json_request_refusal(request: HttpRequest) -> AppError | None:
    """Why a machine request must be refused before any view reads it, or None."""
    if not origin_allowed(request):
        return Forbidden(
            f"requests from origin {request.headers['Origin'][:200]!r} are refused: agents, "
            "the CLI and MCP clients send no Origin, and a browser page may only call this "
            f"server from its own origin ({own_origin(request)}) or from one listed in "
            "AI_MEMORY_ALLOWED_ORIGINS",
            code=Code.ORIGIN_NOT_ALLOWED,
        )
    if request.method in _BODY_METHODS:
        content_type = (request.content_type or "").lower()
        # Only a body has a media type: a bodyless request (whose Content-Type some WSGI
        # servers invent as text/plain) gets the route's own answer, a 405 say.
        if _has_body(request) and not _json_media_type(content_type):
            return UnsupportedMediaType(
                f"the body must be application/json, got {content_type or 'no Content-Type'!r}",
            )
    refusal = url_text_refusal(request)
    if refusal is not None:
        return refusal
    if request.method in _BODY_METHODS:
        problem = json_body_problem(request.body)
        if problem is not None:
            return invalid_text(problem)
    return None
