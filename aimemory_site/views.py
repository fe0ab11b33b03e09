from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from aimemory_site.db_deadline import DatabaseTimeout
from aimemory_site.lib.errors import AppError, Code, error_body


@csrf_exempt  # a POST gets the honest 405, not a CSRF 403: there is nothing to forge
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness plus a database round trip, within the request's database budget.

    A database that does not answer is ``"database": "timeout"`` (stalled, or its lock
    held beyond the budget); one that cannot be reached at all (refused, gone, no such
    file) is ``"unreachable"``. Both answer 503 ``database_unavailable``.
    """
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        state = "timeout" if isinstance(exc, DatabaseTimeout) else "unreachable"
        unavailable = AppError(
            f"the database is unavailable ({type(exc).__name__}); retry shortly",
            code=Code.DATABASE_UNAVAILABLE,
        )
        return JsonResponse(error_body(unavailable, status="error", database=state), status=503)
    return JsonResponse({"status": "ok", "database": connection.vendor})
