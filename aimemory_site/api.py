"""The django-ninja API objects and the one mapping of errors to HTTP responses.

``api`` is the JSON API at ``/api/v1/``; ``hooks_api`` carries the lifecycle-hook route
``GET /handoff`` at the root. Both share authentication and the error mapping below, so
every error body is ``{"detail": "<message>", "code": "<machine code>"}``.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import HttpBearer

from aimemory_site.errors import AppError
from projects.access import Principal
from projects.auth import principal_from_authorization


class ErrorOut(Schema):
    detail: str
    code: str


# Every route may answer these; each route adds its own (404, 409, ...).
COMMON_ERRORS: dict[int, type[Schema]] = {
    400: ErrorOut,
    401: ErrorOut,
    413: ErrorOut,
    422: ErrorOut,
}


def errors(*statuses: int) -> dict[int, Any]:
    """The error part of a route's ``response=`` mapping, for the OpenAPI document."""
    return {**COMMON_ERRORS, **dict.fromkeys(statuses, ErrorOut)}


class BearerAuth(HttpBearer):
    """Bearer token, root token or an anonymous server (DESIGN.md section 8)."""

    def __call__(self, request: HttpRequest) -> Principal:
        return principal_from_authorization(request.headers.get("Authorization"))

    def authenticate(self, request: HttpRequest, token: str) -> Principal:  # pragma: no cover
        return principal_from_authorization(f"Bearer {token}")


def error_body(exc: AppError) -> dict[str, str]:
    return {"detail": exc.message, "code": exc.code}


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


def _install_error_handlers(target: NinjaAPI) -> None:
    @target.exception_handler(AppError)
    def on_app_error(request: HttpRequest, exc: AppError) -> HttpResponse:
        return target.create_response(request, error_body(exc), status=exc.http_status)

    @target.exception_handler(NinjaValidationError)
    def on_validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
        parts = []
        for err in exc.errors:
            where = ".".join(str(x) for x in _field_path(err.get("loc", ())))
            parts.append(f"{where}: {err.get('msg', 'invalid')}" if where else err.get("msg", ""))
        body = {
            "detail": "invalid request: " + "; ".join(parts),
            "code": "validation_error",
            "errors": [
                {k: v for k, v in err.items() if k in ("loc", "msg", "type")} for err in exc.errors
            ],
        }
        return target.create_response(request, body, status=422)

    @target.exception_handler(AuthenticationError)
    def on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        body = {"detail": "authentication required", "code": "unauthorized"}
        return target.create_response(request, body, status=401)

    @target.exception_handler(HttpError)
    def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        body = {"detail": str(exc), "code": f"http_{exc.status_code}"}
        return target.create_response(request, body, status=exc.status_code)


api = NinjaAPI(
    title="ai-memory server",
    version="1",
    description=(
        "Claim-once cross-project inboxes for coding agents. Every error answers "
        '`{"detail": "...", "code": "..."}`.'
    ),
    auth=BearerAuth(),
    urls_namespace="api",
)
_install_error_handlers(api)

hooks_api = NinjaAPI(
    title="ai-memory lifecycle hooks",
    version="1",
    auth=BearerAuth(),
    urls_namespace="hooks",
    docs_url=None,
    openapi_url=None,
)
_install_error_handlers(hooks_api)


def principal_of(request: HttpRequest) -> Principal:
    """The authenticated caller of a ninja route (set by BearerAuth)."""
    principal = getattr(request, "auth", None)
    assert isinstance(principal, Principal)
    return principal


def _register_routers() -> None:
    from messaging.api import router as messaging_router
    from projects.api import hooks_router
    from projects.api import router as projects_router

    api.add_router("", projects_router)
    api.add_router("", messaging_router)
    hooks_api.add_router("", hooks_router)


_register_routers()
