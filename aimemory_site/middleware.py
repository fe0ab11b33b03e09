"""Request checks around every view: the size limit, the request guard, the turn for a
database connection, the machine error answers and the unconfirmed caller's 401."""

from __future__ import annotations

import contextlib
import io
import logging
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, UnreadablePostError

from aimemory_site.errors_views import API_PREFIXES, error_page, is_machine, machine_error
from aimemory_site.lib.errors import (
    AppError,
    BadRequest,
    PayloadTooLarge,
    RequestTimeout,
    Unauthorized,
    error_response,
)
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.request_guard import json_request_refusal, url_text_refusal
from aimemory_site.serving.keys import CLOSE_CONNECTION

logger = logging.getLogger(__name__)


#: A refused body is read and dropped up to this many times the limit, so a client
#: still sending it gets its 413 and a reusable connection, never a reset.
DRAIN_LIMIT_FACTOR = 4
#: How long a refused body may take to arrive; a slower one gets the 413 with a close.
DRAIN_SECONDS = 5.0
_DRAIN_PIECE = 64 * 1024


class RequestSizeLimitMiddleware:
    """Refuse request bodies over 1 MiB with a JSON 413 before anything parses them, and
    read chunked bodies (which Django alone would see as empty) under the same limit.

    A refused body is still read to its end and dropped, up to ``DRAIN_LIMIT_FACTOR``
    times the limit and ``DRAIN_SECONDS``: a server that closes with unread bytes in its
    receive buffer sends a reset, which a client still writing its body sees instead of
    the 413, and gunicorn drains only 64 KiB of an unread body before it gives up on the
    connection it has just announced as keep-alive. Drained, the connection really is
    reusable. When the body is larger, or does not arrive in time, the 413 says
    ``Connection: close`` and gunicorn closes after writing it
    (``aimemory_site.serving.wsgi``). Only the machine routes: the web's forms keep
    Django's own limit and reading.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_machine(request) and request.method in ("POST", "PUT", "PATCH"):
            refusal = self.body_refusal(request)
            if refusal is not None:
                return refusal
        return self.get_response(request)

    def body_refusal(self, request: HttpRequest) -> HttpResponse | None:
        """The 413 (or 400) for this request's body, or None with the body read."""
        limit: int = settings.AI_MEMORY_MAX_REQUEST_BYTES
        if _chunked(request):
            try:
                body = _read(request.META["wsgi.input"], limit + 1)
            except Exception as exc:  # the server's own errors: a cut or malformed chunk
                logger.info("unreadable chunked body on %s: %r", request.path, exc)
                return _closing(request, error_response(_unreadable(exc, _unreadable_chunks())))
            if len(body) > limit:
                ended = _drain(
                    request, request.META["wsgi.input"].read, DRAIN_LIMIT_FACTOR * limit - len(body)
                )
                return self.too_large(request, limit, drained=ended)
            # What Django does once it has read a body itself; CONTENT_LENGTH too, so
            # every later reader sees a plain request of that length.
            request._body = body
            request._stream = io.BytesIO(body)
            request.META["CONTENT_LENGTH"] = str(len(body))
            return None
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if declared > limit:
            ended = declared <= DRAIN_LIMIT_FACTOR * limit and _drain(
                request, request.read, declared
            )
            return self.too_large(request, limit, drained=ended)
        try:
            body = request.body  # reads at most the limit, then raises
        except RequestDataTooBig:
            return self.too_large(request, limit, drained=False)
        except UnreadablePostError as exc:  # the client stopped sending, or went away
            logger.info("unreadable body on %s: %r", request.path, exc)
            return _closing(request, error_response(_unreadable(exc, _cut_short())))
        if len(body) < declared:
            # The client ended its side of the connection before the length it declared
            # arrived: the server's reader returns what came, and a cut that happened to
            # leave valid JSON would otherwise be served.
            logger.info("body of %s ended at %d of %d bytes", request.path, len(body), declared)
            return _closing(request, error_response(_cut_short()))
        return None

    @staticmethod
    def too_large(request: HttpRequest, limit: int, *, drained: bool) -> HttpResponse:
        """The 413; it closes the connection unless the whole body was read."""
        response = error_response(PayloadTooLarge(f"request body is larger than {limit} bytes"))
        return response if drained else _closing(request, response)


def _chunked(request: HttpRequest) -> bool:
    """A body without a length that the server has decoded and ends for us.

    ``wsgi.input_terminated`` (gunicorn sets it) says reading ``wsgi.input`` to its end
    is safe; without it, a read past the body would block, so Django's default (no
    Content-Length, no body) stands.
    """
    return (
        "HTTP_TRANSFER_ENCODING" in request.META
        and not request.META.get("CONTENT_LENGTH")
        and bool(request.META.get("wsgi.input_terminated"))
    )


def _read(stream: Any, size: int) -> bytes:
    """Up to ``size`` bytes of ``stream``, fewer only at its end."""
    pieces: list[bytes] = []
    wanted = size
    while wanted > 0:
        piece: bytes = stream.read(min(wanted, _DRAIN_PIECE))
        if not piece:
            break
        pieces.append(piece)
        wanted -= len(piece)
    return b"".join(pieces)


def _drain(request: HttpRequest, read: Callable[[int], bytes], budget: int) -> bool:
    """Read and drop the rest of the body; True when it ended within ``budget`` bytes
    and ``DRAIN_SECONDS``.

    Under gunicorn the deadline bounds each read through the connection's socket, as
    gunicorn bounds its own drain; its previous timeout is restored afterwards.
    """
    sock = request.META.get("gunicorn.socket")
    prior_timeout = sock.gettimeout() if sock is not None else None
    deadline = time.monotonic() + DRAIN_SECONDS
    drained = 0
    try:
        while drained <= budget:
            if sock is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                sock.settimeout(remaining)
            piece = read(min(_DRAIN_PIECE, budget - drained + 1))
            if not piece:
                return True
            drained += len(piece)
        return False
    except Exception:  # a timeout, a client gone, a malformed chunk: the body did not end
        return False
    finally:
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.settimeout(prior_timeout)


def _closing(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """``response``, after which the server closes the connection (when it can say so)."""
    close = request.META.get(CLOSE_CONNECTION)
    if close is not None:
        close()
    return response


def _unreadable(exc: BaseException, otherwise: AppError) -> AppError:
    """A 408 when reading the body timed out (the server's ``AI_MEMORY_CLIENT_TIMEOUT``
    on the connection's socket), else ``otherwise``."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, TimeoutError):
        cause = cause.__cause__  # Django wraps the socket's error, once or twice
    if cause is not None:
        return RequestTimeout(
            f"the request body stopped arriving for {settings.AI_MEMORY_CLIENT_TIMEOUT} s; "
            "nothing was changed"
        )
    return otherwise


def _cut_short() -> BadRequest:
    return BadRequest("the request body was cut short; nothing was changed")


def _unreadable_chunks() -> BadRequest:
    return BadRequest("the chunked request body is malformed or was cut short; nothing was changed")


class RequestGuardMiddleware:
    """Apply ``json_request_refusal`` to the JSON API and the hook route, and refuse a
    URL that is not UTF-8 or holds a NUL or a lone surrogate everywhere else: in JSON on
    the other machine routes, with our own 400 page on the web.

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
                if is_machine(request):
                    return error_response(refusal)
                return error_page("400.html", 400)
        return self.get_response(request)


class DatabaseTurnMiddleware:
    """Take the request's database connection before its view runs, for a POST to a
    machine route (docs/serving.md#database-connections).

    A worker's requests share a few connections (``lib.db_spares``) and one core. Had
    each taken its connection at its first query, a burst (thousands of pops parking at
    once) would start every request: its first steps, then a wait in line for a
    connection, while the few holding one got a thousandth of the core between their
    queries; connections stayed taken so long that most of the burst ran out of its
    database budget and answered 503. Taken here, a request waits in line before its
    work, and the requests at work have the core. A POST: sends, pops, session starts
    and waits, MCP calls, every one of which queries; a GET may need no database (the
    OpenAPI document, ``/healthz``, whose own look at the database says how it failed).
    Before the view, not earlier: an unknown route needs no connection, and the size
    limit has read the body by then (a client trickling its body holds no connection).
    Inside the database budget: a wait too long for it answers 503.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: object, args: object, kwargs: object
    ) -> HttpResponse | None:
        if request.method != "POST" or not is_machine(request):
            return None
        try:
            connection.ensure_connection()
        except DatabaseError as exc:
            # Answered here, in a line of the log: under a burst, a traceback logged for
            # each refusal cost the core more than the refusals saved.
            return database_unavailable(request, exc)
        return None


class MachineErrorMiddleware:
    """Every error of a machine route answers JSON, and the web's are pages of ours
    (docs/reference.md#limits-and-faults).

    On machine routes, Django's own answers (a method check's 405, the CSRF 403, ninja's
    text 405) are rewritten to ``{"detail", "code"}`` with the same status. On the web,
    the method check's empty 405 becomes our page: Django has no ``handler405`` to render
    it, as its handlers do the other statuses. A rewritten answer keeps the headers and
    cookies of the one it replaces (``Allow``, and the security headers the middleware
    inside this one set). A database error raised by a view becomes 503
    ``database_unavailable`` (an HTML page of ours on the web pages).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        rewritten = _own_error(request, response)
        if rewritten is None:
            return response
        for header, value in response.items():
            if header.lower() not in _BODY_HEADERS:
                rewritten.setdefault(header, value)
        rewritten.cookies = response.cookies
        return rewritten

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, DatabaseError):
            return None  # Django's handler500 answers it (ours, by surface)
        return database_unavailable(request, exception)


def database_unavailable(request: HttpRequest, exception: DatabaseError) -> HttpResponse:
    """The 503 ``database_unavailable`` of ``request``, logged in one line."""
    logger.warning("database unavailable on %s: %s", request.path, type(exception).__name__)
    if is_machine(request):
        return machine_error(request, 503)
    return error_page("503.html", 503)


class UnconfirmedCallerMiddleware:
    """Answer 401 where the JSON API let an anonymous caller in unconfirmed and the
    server turns out to be closed (docs/operating.md#authentication).

    The API asks whether the server is open as late as it can (``projects.auth.
    OpenServerCheck``): a route's project look-up reads it on the way, and anything that
    reads the caller first asks it alone, so nothing is decided for a caller not let in.
    What answers without either (a body refused before the route read its caller, say)
    is asked here, and a closed server's answer replaces it, as when the API asked first.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        principal = getattr(request, "auth", None)
        if isinstance(principal, Principal) and principal.open_server_check is not None:
            try:
                principal.open_server_check.confirm()
            except Unauthorized as refused:
                return error_response(refused)
        return response


# Headers that describe the replaced body, not the answer.
_BODY_HEADERS = frozenset({"content-type", "content-length"})


def _own_error(request: HttpRequest, response: HttpResponse) -> HttpResponse | None:
    """Our answer in place of an error answer Django or a library made, or None to keep it."""
    if response.status_code < 400:
        return None
    if is_machine(request):
        if response.get("Content-Type", "").startswith("application/json"):
            return None
        return machine_error(request, response.status_code)
    if response.status_code == 405:
        return error_page("405.html", 405)
    return None
