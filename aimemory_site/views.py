from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from aimemory_site.lib.errors import AppError, Code, error_body


@csrf_exempt  # a POST gets the honest 405, not a CSRF 403: there is nothing to forge
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness plus a database round trip."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        unavailable = AppError(
            f"the database is unavailable ({type(exc).__name__}); retry shortly",
            code=Code.DATABASE_UNAVAILABLE,
        )
        return JsonResponse(
            error_body(unavailable, status="error", database="unreachable"), status=503
        )
    return JsonResponse({"status": "ok", "database": connection.vendor})
