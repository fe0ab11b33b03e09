"""The JSON API's shared pieces: the error schema, bearer auth, ``principal_of`` and the
one mapping of errors to responses.

The app routers import these; ``aimemory_site.api`` builds the ``NinjaAPI`` objects and
mounts the routers. Keeping the pieces here, below the apps, is what lets ``import
messaging.api`` work on its own (no cycle through the API object).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from django.http import HttpRequest, HttpResponse
from ninja import Field, NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import HttpBearer
from pydantic import BaseModel, BeforeValidator, ConfigDict, StrictInt

from aimemory_site.lib.errors import AppError, Code, RateLimited, error_body
from aimemory_site.lib.limits import whole_number
from aimemory_site.lib.names import NAME_MAX_CHARS
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.scrubbing import INVISIBLE_CHARACTERS
from aimemory_site.lib.wakeups import wait_seconds_parse


class BodyIn(BaseModel):
    """Base of every JSON request body: unknown keys are refused.

    A plain pydantic model, not ninja's ``Schema``: that one validates through a
    ``DjangoGetter`` wrapper, which reads ORM objects and costs a send or a pop a few
    percent of its time, and a parsed JSON body is never an ORM object.
    """

    model_config = ConfigDict(extra="forbid")


class ErrorOut(Schema):
    detail: str
    code: str


# Every route may answer these; each route adds its own (404, 409, ...). 414: the server
# refuses a request line over its limit before Django sees it (docs/reference.md#limits-and-faults).
COMMON_ERRORS: dict[int, type[Schema]] = {
    400: ErrorOut,
    401: ErrorOut,
    403: ErrorOut,
    413: ErrorOut,
    414: ErrorOut,
    422: ErrorOut,
}


def errors(*statuses: int, body: bool = False) -> dict[int, Any]:
    """The error part of a route's ``response=`` mapping, for the OpenAPI document.

    ``body``: the route takes a JSON body, so anything else gets 415.
    """
    extra = (*statuses, 415) if body else statuses
    return {**COMMON_ERRORS, **dict.fromkeys(extra, ErrorOut)}


# --- Documented text rules ------------------------------------------------------------
#
# The domain checks these rules and answers 400 with a machine code (``invalid_name``,
# ``empty_body``, ...), as docs/reference.md#error-codes lists. These types only *document* them in the
# OpenAPI (``json_schema_extra`` adds keywords without validating), so a client and a
# fuzzer know what is valid, and pydantic never answers 422 where the contract says 400.


def _documented(description: str, **keywords: Any) -> Any:
    return Field(description=description, json_schema_extra=keywords)


# names.NAME_PATTERN without its lookahead, which not every JSON Schema tool reads.
NAME_DOCUMENTED_PATTERN = rf"^[A-Za-z0-9_-][A-Za-z0-9._-]{{0,{NAME_MAX_CHARS - 1}}}$"
# A page path: segments of [A-Za-z0-9._-] joined by "/", none empty, "." or "..".
_PAGE_SEGMENT = (
    r"(?:[A-Za-z0-9_-][A-Za-z0-9._-]*|\.[A-Za-z0-9_-][A-Za-z0-9._-]*|\.\.[A-Za-z0-9._-]+)"
)
PAGE_PATH_DOCUMENTED_PATTERN = rf"^{_PAGE_SEGMENT}(?:/{_PAGE_SEGMENT})*$"

NameText = Annotated[
    str,
    _documented(
        "1-100 letters, digits, '.', '_' or '-', not starting with a dot.",
        pattern=NAME_DOCUMENTED_PATTERN,
        maxLength=NAME_MAX_CHARS,
    ),
]
UuidText = Annotated[str, _documented("A full UUID.", format="uuid")]


def _holding_none_of(characters: str) -> str:
    """An unanchored pattern that matches a text holding a character not in the set.

    The set is spelt out rather than written ``\\S``: what ``str.strip`` removes is not
    what ECMA regexes (which JSON Schema validators use) call whitespace. Characters
    beyond U+FFFF are left out: ``\\u`` names four hex digits only, and no escape for
    them means the same in every validator (the domain still counts them invisible).
    """
    return "[^" + "".join(f"\\u{ord(c):04x}" for c in characters if ord(c) <= 0xFFFF) + "]"


# The domain strips bodies and session ids before its checks, and bodies lose their
# invisible characters too (aimemory_site.lib.scrubbing). U+3000 is the last whitespace.
_WHITESPACE = "".join(chr(code) for code in range(0x3001) if chr(code).isspace())
NonBlankText = Annotated[
    str,
    _documented(
        "Must hold a visible character.",
        pattern=_holding_none_of(_WHITESPACE + INVISIBLE_CHARACTERS),
    ),
]
SessionIdText = Annotated[
    str,
    _documented(
        "1-200 characters, not blank.", pattern=_holding_none_of(_WHITESPACE), maxLength=200
    ),
]


def _whole_or_as_is(value: Any) -> Any:
    whole = whole_number(value)
    return value if whole is None else whole


# A whole number of something: 30 or 30.0 (JSON's integer), never true, "30" or 1.5 (422).
WholeNumber = Annotated[StrictInt, BeforeValidator(_whole_or_as_is)]
RetryIdText = Annotated[str, Field(json_schema_extra={"minLength": 1, "maxLength": 200})]
PagePathText = Annotated[
    str,
    _documented(
        "Segments of letters, digits, '.', '_' or '-' joined by '/'; no empty, '.' or "
        "'..' segment; at most 200 characters.",
        pattern=PAGE_PATH_DOCUMENTED_PATTERN,
        maxLength=200,
    ),
]


Authenticator = Callable[[str | None, str], Principal]


class BearerAuth(HttpBearer):
    """Bearer token, root token or an anonymous server (docs/operating.md#authentication).

    ``authenticate_header`` turns the ``Authorization`` header (or its absence) into a
    Principal or raises ``Unauthorized``; the rule itself lives in ``projects.auth``.
    """

    def __init__(self, authenticate_header: Authenticator) -> None:
        super().__init__()
        self._authenticate_header = authenticate_header

    def __call__(self, request: HttpRequest) -> Principal:
        # META, not request.headers: building the headers mapping costs more than this.
        meta = request.META
        return self._authenticate_header(
            meta.get("HTTP_AUTHORIZATION"), meta.get("REMOTE_ADDR") or ""
        )

    def authenticate(self, request: HttpRequest, token: str) -> Principal:  # pragma: no cover
        return self._authenticate_header(f"Bearer {token}", request.META.get("REMOTE_ADDR") or "")


#: The response header of a call that may wait (a pop, a status, a session wait): the
#: seconds it was given to wait, after the clamp to 0..60, so a client that asked for more
#: learns it without a field the answer's JSON does not have
#: (docs/reference.md#waiting-and-waking).
WAIT_SECONDS_HEADER = "X-Memory-Wait-Seconds"


def wait_said(response: HttpResponse, wait_seconds: object) -> HttpResponse:
    """``response`` with ``WAIT_SECONDS_HEADER``: the request's ``wait_seconds`` as the
    service it went to clamped it (``wait_seconds_parse``, the one rule)."""
    response[WAIT_SECONDS_HEADER] = str(wait_seconds_parse(wait_seconds))
    return response


def principal_of(request: HttpRequest, *, access_confirms: bool = False) -> Principal:
    """The authenticated caller of a ninja route (set by BearerAuth), confirmed: an
    anonymous caller let in before anyone asked whether the server is open is asked now.

    ``access_confirms``: the route hands the caller to a service that reads nothing of it
    before ``projects.access.projects_access``, whose statement asks that question on the
    way, one round trip fewer (the service's docstring says so).
    """
    principal = getattr(request, "auth", None)
    assert isinstance(principal, Principal)
    return principal if access_confirms else principal.confirmed()


_SOURCES = {"body", "query", "path", "header", "cookie", "form"}
_PARAMETER_NAMES = {"payload", "query"}


def _field_path(loc: Any) -> list[Any]:
    """Drop ninja's ("body", "payload") prefix so an error names the client's field."""
    path = list(loc)
    if path and path[0] in _SOURCES:
        path = path[1:]
    if len(path) > 1 and path[0] in _PARAMETER_NAMES:
        path = path[1:]
    return path


def error_handlers_install(target: NinjaAPI) -> None:
    """Map every error a route can raise to ``{"detail", "code"}`` with its status."""

    @target.exception_handler(AppError)
    def on_app_error(request: HttpRequest, exc: AppError) -> HttpResponse:
        response = target.create_response(request, error_body(exc), status=exc.http_status)
        if isinstance(exc, RateLimited):
            response["Retry-After"] = str(exc.retry_after_s)
        return response

    @target.exception_handler(NinjaValidationError)
    def on_validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
        parts = []
        for err in exc.errors:
            where = ".".join(str(x) for x in _field_path(err.get("loc", ())))
            parts.append(f"{where}: {err.get('msg', 'invalid')}" if where else err.get("msg", ""))
        invalid = AppError("invalid request: " + "; ".join(parts), code=Code.VALIDATION_ERROR)
        body = error_body(
            invalid,
            errors=[
                {k: v for k, v in err.items() if k in ("loc", "msg", "type")} for err in exc.errors
            ],
        )
        return target.create_response(request, body, status=422)

    @target.exception_handler(AuthenticationError)
    def on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        body = error_body(AppError("authentication required", code=Code.UNAUTHORIZED))
        return target.create_response(request, body, status=401)

    @target.exception_handler(HttpError)
    def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        body = error_body(AppError(str(exc), code=f"http_{exc.status_code}"))
        return target.create_response(request, body, status=exc.status_code)
