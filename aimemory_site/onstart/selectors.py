"""``memory_briefing`` and ``GET /api/v1/briefing``: what an agent should know on arrival."""

from __future__ import annotations

from typing import Any

from aimemory_site.lib.principal import Principal
from messaging.selectors import message_pending_count
from projects.access import Level, project_access
from projects.brief_selectors import brief_compile
from projects.models import AgentSession
from projects.scope import ResolvedScope, scope_hint


def briefing_get(*, principal: Principal, scope: ResolvedScope) -> dict[str, Any]:
    """The briefing for a resolved scope: which project it is, its pending mail and its
    brief. Needs read. An inferred scope adds the hint that it was guessed."""
    project = project_access(principal, scope.workspace, scope.project, need=Level.READ)
    answer: dict[str, Any] = {
        "scope": {
            "workspace": project.workspace.name,
            "project": project.name,
            "resolved_by": scope.source.value,
        },
        "pending_message_count": message_pending_count(project=project),
        "brief": brief_compile(project),
    }
    if scope.inferred:
        answer["hint"] = scope_hint(scope)
    return answer


def session_of_principal(principal: Principal, session_id: str) -> AgentSession | None:
    """The lifecycle-hook session ``session_id`` if ``principal`` registered it, else None:
    another principal's session id counts as unknown (docs/reference.md#scope-resolution)."""
    return AgentSession.objects.filter(session_id=session_id, principal_key=principal.key).first()
