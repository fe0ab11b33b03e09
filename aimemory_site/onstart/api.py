"""JSON API routes of the on-start composition: the session start, the session wake, the
briefing and the hook block. Thin adapters: each calls the service or selector that holds the rule."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import Router

from aimemory_site.lib.api import NameText, errors, principal_of, wait_said
from aimemory_site.lib.fetch_metadata import browser_marks_cross_site
from aimemory_site.lib.wakeups import CLIENT_GONE
from aimemory_site.onstart.schemas import (
    BriefingOut,
    OnStartOut,
    SessionIdQuery,
    SessionStartIn,
    SessionWaitIn,
    SessionWaitOut,
)
from aimemory_site.onstart.selectors import briefing_get
from aimemory_site.onstart.services import onstart_for_hook, onstart_for_session_start
from aimemory_site.onstart.wake_services import session_wait
from projects.scope import scope_resolve

router = Router(tags=["sessions"])
hooks_router = Router(tags=["hooks"])


@router.post("/sessions", response={200: OnStartOut, **errors(404, 409, body=True)})
def sessions_start(request: HttpRequest, payload: SessionStartIn) -> HttpResponse:
    """Register a lifecycle-hook session (creating the project if new); return the on-start
    block. Only a new session claims the project's next handoff: not a ``resume``,
    ``compact`` or ``init`` start, nor a session id that started before."""
    block = onstart_for_session_start(
        principal=principal_of(request),
        workspace=payload.workspace,
        project=payload.project,
        session_id=payload.session_id,
        agent=payload.agent,
        source=payload.source,
        inject_brief=payload.inject_brief,
        cross_site=browser_marks_cross_site(request),
    )
    return JsonResponse(block)


@router.post("/sessions/wait", response={200: SessionWaitOut, **errors(404, body=True)})
def sessions_wait(request: HttpRequest, payload: SessionWaitIn) -> HttpResponse:
    """Wait until mail this session has not been told about is pending in the project, and
    announce it (counts and the inbox notice, never a body, never a pop); or answer when
    the time is up, or when a newer wait of the session supersedes this one. The session
    id must be one this caller registered, else 404 ``session_not_found``. The header
    ``X-Memory-Wait-Seconds`` says the wait used, clamped to 0..60."""
    answer = session_wait(
        principal=principal_of(request),
        workspace=payload.workspace,
        project=payload.project,
        session_id=payload.session_id,
        wait_seconds=payload.wait_seconds,
        client_gone=request.META.get(CLIENT_GONE),
    )
    return wait_said(JsonResponse(answer), payload.wait_seconds)


@router.get("/briefing", response={200: BriefingOut, **errors(404)}, tags=["messages"])
def briefing(request: HttpRequest, workspace: NameText, project: NameText) -> HttpResponse:
    """The project's briefing: its scope, how many messages wait, and its brief."""
    principal = principal_of(request)
    scope = scope_resolve(
        principal=principal, workspace=workspace, project=project, session_id=None
    )
    return JsonResponse(briefing_get(principal=principal, scope=scope))


@hooks_router.get("/handoff", response={200: OnStartOut, **errors(404)})
def handoff(
    request: HttpRequest, workspace: NameText, project: NameText, session_id: SessionIdQuery = ""
) -> HttpResponse:
    """The on-start block for an existing project; creates no project. Without a
    ``session_id`` it claims nothing; with one it is that session's start, and a writer's
    new session claims the next handoff, except from a page a browser marks cross-site."""
    block = onstart_for_hook(
        principal=principal_of(request),
        workspace=workspace,
        project=project,
        session_id=session_id,
        cross_site=browser_marks_cross_site(request),
    )
    return JsonResponse(block)
