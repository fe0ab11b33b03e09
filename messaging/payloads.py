"""The JSON of a message, the same on every surface (docs/reference.md#messages)."""

from __future__ import annotations

from collections.abc import Container
from typing import Any
from uuid import UUID

from django.utils import timezone

from aimemory_site.lib.decisions import DECISION_FIELDS
from aimemory_site.lib.timestamps import rfc3339
from messaging.models import Message
from messaging.notices import SECURITY_NOTICE
from messaging.search import SearchHit
from messaging.services import Sent
from projects.models import Project

# What a reply stored before the server judged replies at send says: it is not taken.
UNJUDGED_REPLY_REFUSAL = (
    "this reply was sent before the server checked who may answer, so it is not taken."
)


def decision_reply_payload(stored: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stored reply in its fixed key order (PostgreSQL's jsonb keeps none); only an
    explicit ``accepted: true`` counts as accepted."""
    if stored is None:
        return None
    accepted = stored.get("accepted") is True
    return {
        "question_id": stored.get("question_id"),
        "option": stored.get("option"),
        "comment": stored.get("comment", ""),
        "accepted": accepted,
        "refusal": None if accepted else stored.get("refusal") or UNJUDGED_REPLY_REFUSAL,
        # Stored since the server records the route; a reply from before came as a send.
        "via": stored.get("via") or "message",
    }


def decision_payload(stored: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stored question in its fixed fields (its deadline shows as ``expires_at``)."""
    if stored is None:
        return None
    return {field: stored.get(field) for field in DECISION_FIELDS}


def message_payload(message: Message, shown: Container[UUID]) -> dict[str, Any]:
    """``message`` as JSON. Callers select_related both projects and their workspaces.

    ``shown`` holds the projects the caller may see named (``names_shown``): a project
    outside it is named as nothing, its names and ids null, as a project that does not
    exist would be (docs/reference.md#messages). Its ``state`` is the one it has now: a
    pending message past its ``expires_at`` is ``expired``, whether or not the background
    has stored it so yet."""
    return {
        "id": str(message.id),
        "state": message.state_at(timezone.now()),
        **_project_fields("to", message.to_project, shown),
        **_project_fields("from", message.from_project, shown),
        "from_agent": message.from_agent,
        "from_owner_user": message.from_owner_user or None,
        "subject": message.subject or None,
        "in_reply_to": str(message.in_reply_to) if message.in_reply_to else None,
        # Read from the subject and body at send (docs/reference.md#operator-decisions): untrusted text,
        # like the body.
        "decision": decision_payload(message.decision),
        "decision_reply": decision_reply_payload(message.decision_reply),
        "body": message.body,
        "created_at": rfc3339(message.created_at),
        "claimed_at": rfc3339(message.claimed_at),
        "expires_at": rfc3339(message.expires_at),
    }


def _project_fields(side: str, project: Project, shown: Container[UUID]) -> dict[str, Any]:
    """The four fields that name one end of a message, null when it is not ``shown``."""
    if project.pk not in shown:
        return dict.fromkeys(
            (f"{side}_workspace", f"{side}_project", f"{side}_workspace_id", f"{side}_project_id")
        )
    return {
        f"{side}_workspace": project.workspace.name,
        f"{side}_project": project.name,
        f"{side}_workspace_id": str(project.workspace_id),
        f"{side}_project_id": str(project.id),
    }


def pop_payload(message: Message | None, shown: Container[UUID]) -> dict[str, Any]:
    """``{"security_notice": ..., "message": ...}``, or exactly ``{"message": None}``.

    The notice comes first and the provenance before the body: some clients hand the
    model only the serialised JSON, which it then reads in this order.
    """
    if message is None:
        return {"message": None}
    return {"security_notice": SECURITY_NOTICE, "message": message_payload(message, shown)}


def send_payload(sent: Sent) -> dict[str, Any]:
    """What arrived: the id, the chars the cap dropped, the secrets scrubbed, a replay."""
    return {
        "message_id": str(sent.message.id),
        "omitted_chars": sent.message.omitted_chars,
        "redactions": sent.message.redactions,
        "idempotent_replay": sent.replay,
    }


def message_head_payload(message: Message, shown: Container[UUID]) -> dict[str, Any]:
    """``message`` as JSON without its body: a row of a thread, and what a status and a
    search hit start from."""
    payload = message_payload(message, shown)
    del payload["body"]
    return payload


def search_hit_payload(hit: SearchHit, shown: Container[UUID]) -> dict[str, Any]:
    """A search hit: the message without its body, then the snippet around the match
    (docs/reference.md#search-and-threads)."""
    payload = message_head_payload(hit.message, shown)
    payload["snippet"] = hit.snippet
    return payload


def status_payload(message: Message, shown: Container[UUID]) -> dict[str, Any]:
    """The message without its body, with how its delivery went (docs/reference.md#status-replies-and-retries)."""
    payload = message_head_payload(message, shown)
    payload["cancelled_at"] = rfc3339(message.cancelled_at)
    payload["claimed_by_agent"] = message.claimed_by_agent or None
    return payload
