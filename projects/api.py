"""JSON API routes of the projects app: session start, the hook block and the briefing."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from aimemory_site.lib.api import errors, principal_of
from projects.access import Level, project_access
from projects.briefing import briefing_get
from projects.onstart import onstart_block
from projects.schemas import BriefingOut, OnStartOut, SessionStartIn
from projects.scope import scope_resolve
from projects.services import session_start

router = Router(tags=["sessions"])
hooks_router = Router(tags=["hooks"])


@router.post("/sessions", response={200: OnStartOut, **errors(404, 409, body=True)})
def sessions_start(request: HttpRequest, payload: SessionStartIn) -> dict[str, Any]:
    """Register a lifecycle-hook session (creating the project if new); return the on-start block."""
    started = session_start(
        principal=principal_of(request),
        workspace=payload.workspace,
        project=payload.project,
        session_id=payload.session_id,
        agent=payload.agent,
    )
    return onstart_block(project=started.project, session_id=started.session.session_id)


@router.get("/briefing", response={200: BriefingOut, **errors(404)}, tags=["messages"])
def briefing(request: HttpRequest, workspace: str, project: str) -> dict[str, Any]:
    """The project's briefing: its scope and how many messages wait in its inbox."""
    principal = principal_of(request)
    scope = scope_resolve(
        principal=principal, workspace=workspace, project=project, session_id=None
    )
    return briefing_get(principal=principal, scope=scope)


@hooks_router.get("/handoff", response={200: OnStartOut, **errors(404)})
def handoff(
    request: HttpRequest, workspace: str, project: str, session_id: str = ""
) -> dict[str, Any]:
    """The on-start block for an existing project. A read: creates and claims nothing."""
    found = project_access(principal_of(request), workspace, project, need=Level.READ)
    return onstart_block(project=found, session_id=session_id)
