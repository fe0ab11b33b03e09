"""The one error hierarchy of the project.

Services and selectors raise these; each surface (JSON API, MCP, CLI, web) maps them once.
Every error carries a machine ``code``, an HTTP status and a human message that tells the
caller what to do.
"""

from __future__ import annotations


class AppError(Exception):
    code = "bad_request"
    http_status = 400

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class BadRequest(AppError):
    code = "bad_request"
    http_status = 400


class Unauthorized(AppError):
    code = "unauthorized"
    http_status = 401


class Forbidden(AppError):
    code = "forbidden"
    http_status = 403


class NotFound(AppError):
    code = "not_found"
    http_status = 404


class Conflict(AppError):
    code = "conflict"
    http_status = 409


class PayloadTooLarge(AppError):
    code = "payload_too_large"
    http_status = 413


class Invalid(AppError):
    code = "invalid"
    http_status = 422
