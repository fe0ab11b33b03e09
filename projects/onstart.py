"""The on-start block a lifecycle hook prints into a new agent session (DESIGN.md 10)."""

from __future__ import annotations

from typing import Any

from aimemory_site.lib.principal import Principal
from messaging.notices import inbox_notice
from messaging.selectors import message_pending_count
from projects.access import Level, project_access, project_level_of
from projects.brief import brief_compile
from projects.handoffs import handoff_claim, handoff_payload, handoff_text
from projects.models import AgentSession, Project


def scope_line(*, workspace: str, project: str) -> str:
    """The block's last line, always there: a static MCP client learns the names to pass."""
    return (
        f"ai-memory: this session's project is {workspace}/{project}. Pass workspace "
        f'"{workspace}" and project "{project}" (from_workspace and from_project when '
        "sending) to the memory_* tools."
    )


def onstart_block(
    *,
    project: Project,
    session_id: str,
    session: AgentSession | None = None,
    claim_handoff: bool = False,
    inject_brief: bool = False,
) -> dict[str, Any]:
    """The hook answer: names, the ``context`` text and what it is made of.

    In order, joined by a blank line: the handoff this call claimed (``claim_handoff``:
    the caller starts a session and holds write), the brief (``inject_brief``), the inbox
    notice (when mail waits), and always the scope line. It never holds message text and
    never pops; the mail is only counted and named.
    """
    workspace, name = project.workspace.name, project.name
    handoff = handoff_claim(project=project, session=session) if claim_handoff else None
    brief = brief_compile(project) if inject_brief else None
    count = message_pending_count(project=project)
    parts = []
    if handoff is not None:
        parts.append(handoff_text(handoff, workspace=workspace, project=name))
    if brief is not None:
        parts.append(brief)
    if count:
        parts.append(inbox_notice(count=count, workspace=workspace, project=name))
    parts.append(scope_line(workspace=workspace, project=name))
    return {
        "workspace": workspace,
        "project": name,
        "session_id": session_id,
        "context": "\n\n".join(parts),
        "handoff": handoff_payload(handoff) if handoff is not None else None,
        "brief": brief,
        "pending_message_count": count,
    }


def onstart_for_hook(
    *, principal: Principal, workspace: str, project: str, session_id: str
) -> dict[str, Any]:
    """The block ``GET /handoff`` answers for an existing project; creates nothing.

    Needs read. Without a ``session_id`` it only reports: no handoff is claimed. With the
    id of a session the caller registered and write access, it claims the next handoff
    for that session; a reader may look, never take the handoff away from the writers.
    """
    found = project_access(principal, workspace, project, need=Level.READ)
    claim = bool(session_id) and project_level_of(principal, found) >= Level.WRITE
    session = None
    if claim:
        session = AgentSession.objects.filter(
            session_id=session_id, principal_key=principal.key
        ).first()
    return onstart_block(project=found, session_id=session_id, session=session, claim_handoff=claim)
