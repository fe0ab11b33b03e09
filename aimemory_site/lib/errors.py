"""The one error hierarchy of the project, its machine codes and its JSON body.

Services and selectors raise these; each surface (JSON API, MCP, CLI, web) maps them once.
Every error carries a machine ``code``, an HTTP status and a human message that tells the
caller what to do. Every JSON error body is built by ``error_body``, or on ``/mcp`` by
``rpc_error_body``.
"""

from __future__ import annotations

import enum
from typing import Any

from django.http import JsonResponse


class Code(enum.StrEnum):
    """Every machine code an error answer may carry (the ``code`` of the JSON body), each
    with the HTTP status it answers with: the one place a code's status is written
    (docs/reference.md#error-codes is generated from it)."""

    _value_: str
    status: int

    def __new__(cls, value: str, status: int) -> Code:
        member = str.__new__(cls, value)
        member._value_ = value
        member.status = status
        return member

    BAD_REQUEST = "bad_request", 400
    UNAUTHORIZED = "unauthorized", 401
    FORBIDDEN = "forbidden", 403
    NOT_FOUND = "not_found", 404
    CONFLICT = "conflict", 409
    PAYLOAD_TOO_LARGE = "payload_too_large", 413
    REQUEST_TIMEOUT = "request_timeout", 408
    VALIDATION_ERROR = "validation_error", 422
    METHOD_NOT_ALLOWED = "method_not_allowed", 405
    SERVER_ERROR = "server_error", 500
    DATABASE_UNAVAILABLE = "database_unavailable", 503
    RATE_LIMITED = "rate_limited", 429
    TOO_MANY_WAITS = "too_many_waits", 429
    # Requests
    BAD_HOST = "bad_host", 400
    ORIGIN_NOT_ALLOWED = "origin_not_allowed", 403
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type", 415
    INVALID_TEXT = "invalid_text", 400
    INVALID_ARGUMENTS = "invalid_arguments", 400
    REQUEST_LINE_TOO_LONG = "request_line_too_long", 414
    HEADERS_TOO_LARGE = "headers_too_large", 431
    OAUTH_NOT_OFFERED = "oauth_not_offered", 404
    # Projects, sessions and scopes
    INVALID_NAME = "invalid_name", 400
    PROJECT_NOT_FOUND = "project_not_found", 404
    WRITE_ACCESS_REQUIRED = "write_access_required", 403
    INVALID_SESSION_ID = "invalid_session_id", 400
    SESSION_TAKEN = "session_taken", 409
    SESSION_NOT_FOUND = "session_not_found", 404
    INVALID_SOURCE = "invalid_source", 400
    SCOPE_INCOMPLETE = "scope_incomplete", 400
    SCOPE_NOT_NAMED = "scope_not_named", 400
    # Messages
    EMPTY_BODY = "empty_body", 400
    INVALID_BOX = "invalid_box", 400
    INVALID_MESSAGE_ID = "invalid_message_id", 400
    CANCEL_TARGET = "cancel_target", 400
    INBOX_FULL = "inbox_full", 409
    MESSAGE_NOT_FOUND = "message_not_found", 404
    INVALID_IN_REPLY_TO = "invalid_in_reply_to", 400
    INVALID_IDEMPOTENCY_KEY = "invalid_idempotency_key", 400
    INVALID_REQUEST_ID = "invalid_request_id", 400
    INVALID_EXPIRY = "invalid_expiry", 400
    INVALID_WAIT_SECONDS = "invalid_wait_seconds", 400
    ADMISSION_REFUSED = "admission_refused", 403
    INVALID_QUERY = "invalid_query", 400
    # Handoffs and pages
    INVALID_PAGE_PATH = "invalid_page_path", 400
    PAGE_NOT_FOUND = "page_not_found", 404
    # Operator decisions: the answer page
    NOT_A_PENDING_DECISION = "not_a_pending_decision", 400
    UNKNOWN_OPTION = "unknown_option", 400
    # A question whose deadline or on_deadline is not one the server can keep.
    INVALID_DECISION = "invalid_decision", 400
    REPLY_PROJECT_NOT_FOUND = "reply_project_not_found", 400
    ROOT_REQUIRED = "root_required", 403
    ANONYMOUS_ANSWERS_OFF = "anonymous_answers_off", 403
    DECISION_ALREADY_ANSWERED = "decision_already_answered", 409
    INVALID_REQUEST_STATE = "invalid_request_state", 400


class AppError(Exception):
    """An error a caller gets an answer for: its ``code`` decides the HTTP status.

    Each subclass names a default code; a code given at the raise must answer the same
    status as that default, so a class's name never disagrees with the status it sends.
    """

    code: str = Code.BAD_REQUEST

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            default = type(self).code
            if type(self) is not AppError and _status_of(code, 0) != _status_of(default, 0):
                raise TypeError(f"{type(self).__name__} cannot carry code {code}")
            self.code = code

    @property
    def http_status(self) -> int:
        return _status_of(self.code, Code.BAD_REQUEST.status)


def _status_of(code: str, otherwise: int) -> int:
    # A code outside the enum is one django-ninja's own errors are given (``http_405``);
    # their answers are sent with the status they came with.
    return code.status if isinstance(code, Code) else otherwise


class BadRequest(AppError):
    code = Code.BAD_REQUEST


class Unauthorized(AppError):
    code = Code.UNAUTHORIZED


class Forbidden(AppError):
    code = Code.FORBIDDEN


class NotFound(AppError):
    code = Code.NOT_FOUND


class Conflict(AppError):
    code = Code.CONFLICT


class PayloadTooLarge(AppError):
    code = Code.PAYLOAD_TOO_LARGE


class RequestTimeout(AppError):
    """The request's body stopped arriving (``AI_MEMORY_CLIENT_TIMEOUT``)."""

    code = Code.REQUEST_TIMEOUT


class UnsupportedMediaType(AppError):
    code = Code.UNSUPPORTED_MEDIA_TYPE


class RateLimited(AppError):
    """Too many requests; the caller may try again after ``retry_after_s`` seconds."""

    code = Code.RATE_LIMITED

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TooManyWaits(RateLimited):
    """A call with ``wait_seconds`` that would pass a cap on parked calls; it did not park
    and changed nothing (docs/serving.md#caps)."""

    code = Code.TOO_MANY_WAITS


def error_body(exc: AppError, **extra: Any) -> dict[str, Any]:
    """The JSON body of every error answer: ``{"detail": ..., "code": ...}`` (plus extra)."""
    return {"detail": exc.message, "code": str(exc.code), **extra}


def rpc_error_body(exc: AppError, status: int | None = None) -> dict[str, Any]:
    """``exc`` as the JSON-RPC error of ``/mcp`` when no request id is known (the request
    was refused, or never read). Its JSON-RPC code is the HTTP status it travels with
    (``status``, else ``exc``'s own): an application code outside the ranges JSON-RPC and
    MCP reserve. ``data.code`` is the machine code every other surface answers."""
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": exc.http_status if status is None else status,
            "message": exc.message,
            "data": {"code": str(exc.code)},
        },
    }


def error_response(exc: AppError) -> JsonResponse:
    """``exc`` as a JSON answer with its own status, for views outside django-ninja."""
    return JsonResponse(error_body(exc), status=exc.http_status)
