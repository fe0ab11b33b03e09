"""The on-start block a lifecycle hook prints into a new agent session (DESIGN.md 10)."""

from __future__ import annotations

from typing import Any

from messaging.notices import inbox_notice
from messaging.selectors import message_pending_count
from projects.models import Project


def onstart_block(*, project: Project, session_id: str) -> dict[str, Any]:
    """The hook answer: names, the ``context`` text and the pending count.

    The context only ever announces mail (a count and the inbox's names); it never holds
    message text and never pops.
    """
    count = message_pending_count(project=project)
    parts: list[str] = []
    if count:
        parts.append(
            inbox_notice(count=count, workspace=project.workspace.name, project=project.name)
        )
    return {
        "workspace": project.workspace.name,
        "project": project.name,
        "session_id": session_id,
        "context": "\n".join(parts),
        "pending_message_count": count,
    }
