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
    """Every machine code an error answer may carry (the ``code`` of the JSON body)."""

    BAD_REQUEST = "bad_request"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    REQUEST_TIMEOUT = "request_timeout"
    VALIDATION_ERROR = "validation_error"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    SERVER_ERROR = "server_error"
    DATABASE_UNAVAILABLE = "database_unavailable"
    RATE_LIMITED = "rate_limited"
    TOO_MANY_WAITS = "too_many_waits"
    # Requests
    BAD_HOST = "bad_host"
    ORIGIN_NOT_ALLOWED = "origin_not_allowed"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    INVALID_TEXT = "invalid_text"
    INVALID_ARGUMENTS = "invalid_arguments"
    REQUEST_LINE_TOO_LONG = "request_line_too_long"
    HEADERS_TOO_LARGE = "headers_too_large"
    OAUTH_NOT_OFFERED = "oauth_not_offered"
    # Projects, sessions and scopes
    INVALID_NAME = "invalid_name"
    PROJECT_NOT_FOUND = "project_not_found"
    WRITE_ACCESS_REQUIRED = "write_access_required"
    INVALID_SESSION_ID = "invalid_session_id"
    SESSION_TAKEN = "session_taken"
    SESSION_NOT_FOUND = "session_not_found"
    INVALID_SOURCE = "invalid_source"
    SCOPE_INCOMPLETE = "scope_incomplete"
    SCOPE_NOT_NAMED = "scope_not_named"
    # Messages
    EMPTY_BODY = "empty_body"
    INVALID_BOX = "invalid_box"
    INVALID_MESSAGE_ID = "invalid_message_id"
    CANCEL_TARGET = "cancel_target"
    INBOX_FULL = "inbox_full"
    MESSAGE_NOT_FOUND = "message_not_found"
    INVALID_IN_REPLY_TO = "invalid_in_reply_to"
    INVALID_IDEMPOTENCY_KEY = "invalid_idempotency_key"
    INVALID_REQUEST_ID = "invalid_request_id"
    INVALID_EXPIRY = "invalid_expiry"
    INVALID_WAIT_SECONDS = "invalid_wait_seconds"
    ADMISSION_REFUSED = "admission_refused"
    INVALID_QUERY = "invalid_query"
    # Handoffs and pages
    INVALID_PAGE_PATH = "invalid_page_path"
    PAGE_NOT_FOUND = "page_not_found"
    # Operator decisions: the answer page
    NOT_A_PENDING_DECISION = "not_a_pending_decision"
    UNKNOWN_OPTION = "unknown_option"
    # A question whose deadline or on_deadline is not one the server can keep.
    INVALID_DECISION = "invalid_decision"
    REPLY_PROJECT_NOT_FOUND = "reply_project_not_found"
    ROOT_REQUIRED = "root_required"
    ANONYMOUS_ANSWERS_OFF = "anonymous_answers_off"
    DECISION_ALREADY_ANSWERED = "decision_already_answered"
    INVALID_REQUEST_STATE = "invalid_request_state"


class AppError(Exception):
    code: str = Code.BAD_REQUEST
    http_status = 400

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class BadRequest(AppError):
    code = Code.BAD_REQUEST
    http_status = 400


class Unauthorized(AppError):
    code = Code.UNAUTHORIZED
    http_status = 401


class Forbidden(AppError):
    code = Code.FORBIDDEN
    http_status = 403


class NotFound(AppError):
    code = Code.NOT_FOUND
    http_status = 404


class Conflict(AppError):
    code = Code.CONFLICT
    http_status = 409


class PayloadTooLarge(AppError):
    code = Code.PAYLOAD_TOO_LARGE
    http_status = 413


class RequestTimeout(AppError):
    """The request's body stopped arriving (``AI_MEMORY_CLIENT_TIMEOUT``)."""

    code = Code.REQUEST_TIMEOUT
    http_status = 408


class UnsupportedMediaType(AppError):
    code = Code.UNSUPPORTED_MEDIA_TYPE
    http_status = 415


class RateLimited(AppError):
    """Too many requests; the caller may try again after ``retry_after_s`` seconds."""

    code = Code.RATE_LIMITED
    http_status = 429

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
