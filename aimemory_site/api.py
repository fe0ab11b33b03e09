"""The django-ninja API objects, with the app routers mounted.

``api`` is the JSON API at ``/api/v1/``; ``hooks_api`` carries the lifecycle-hook route
``GET /handoff`` at the root. Both share authentication (an anonymous caller is
confirmed as late as it can be: ``projects.auth.OpenServerCheck``) and the error mapping
of ``aimemory_site.lib.api``, so every error body is ``{"detail": "<message>", "code":
"..."}``.
"""

from __future__ import annotations

from ninja import NinjaAPI

from aimemory_site.lib.api import BearerAuth, error_handlers_install
from aimemory_site.onstart.api import hooks_router
from aimemory_site.onstart.api import router as onstart_router
from messaging.api import router as messaging_router
from projects.api import router as projects_router
from projects.auth import principal_from_authorization_deferred

api = NinjaAPI(
    title="ai-memory server",
    version="1",
    description=(
        "Claim-once cross-project inboxes for coding agents. Every error answers "
        '`{"detail": "...", "code": "..."}`.'
    ),
    auth=BearerAuth(principal_from_authorization_deferred),
    urls_namespace="api",
)
error_handlers_install(api)
api.add_router("", onstart_router)
api.add_router("", projects_router)
api.add_router("", messaging_router)

hooks_api = NinjaAPI(
    title="ai-memory lifecycle hooks",
    version="1",
    auth=BearerAuth(principal_from_authorization_deferred),
    urls_namespace="hooks",
    docs_url=None,
    openapi_url=None,
)
error_handlers_install(hooks_api)
hooks_api.add_router("", hooks_router)
