"""The JSON of a message, the same on every surface (DESIGN.md section 5)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from messaging.models import Message
from messaging.notices import SECURITY_NOTICE


def _rfc3339(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def message_payload(message: Message) -> dict[str, Any]:
    """``message`` as JSON. Callers select_related both projects and their workspaces."""
    to_project, from_project = message.to_project, message.from_project
    return {
        "id": str(message.id),
        "state": message.state,
        "to_workspace": to_project.workspace.name,
        "to_project": to_project.name,
        "to_workspace_id": str(to_project.workspace_id),
        "to_project_id": str(to_project.id),
        "from_workspace": from_project.workspace.name,
        "from_project": from_project.name,
        "from_workspace_id": str(from_project.workspace_id),
        "from_project_id": str(from_project.id),
        "from_agent": message.from_agent,
        "from_owner_user": message.from_owner_user or None,
        "subject": message.subject or None,
        "body": message.body,
        "created_at": _rfc3339(message.created_at),
        "claimed_at": _rfc3339(message.claimed_at),
    }


def pop_payload(message: Message | None) -> dict[str, Any]:
    """``{"message": ..., "security_notice": ...}``, or exactly ``{"message": None}``."""
    if message is None:
        return {"message": None}
    return {"message": message_payload(message), "security_notice": SECURITY_NOTICE}
