"""Handoff reads: a project's handoffs as ``GET /api/v1/handoffs`` lists them, and a
claimed one as the on-start block shows it. Reading never claims; the writes are
``projects.handoff_services``."""

from __future__ import annotations

from typing import Any

from django.db.models.functions import Length
from django.utils import timezone

from aimemory_site.lib.ages import age_text
from aimemory_site.lib.limits import HANDOFF_LIST_LIMIT
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.timestamps import rfc3339
from projects.access import Level, project_access
from projects.models import Handoff


def handoff_list(*, principal: Principal, workspace: str, project: str) -> list[Handoff]:
    """The project's handoffs, newest first, at most 50. Needs read; never claims."""
    target = project_access(principal, workspace, project, need=Level.READ)
    return list(
        Handoff.objects.filter(project=target)
        .defer("body")
        .annotate(chars=Length("body"))
        .order_by("-created_at", "-id")[:HANDOFF_LIST_LIMIT]
    )


def handoff_state(handoff: Handoff) -> str:
    """``open``, ``claimed`` or ``expired`` (an open handoff past its time is expired)."""
    if handoff.state == Handoff.State.OPEN and handoff.expires_at <= timezone.now():
        return Handoff.State.EXPIRED
    return handoff.state


def handoff_row(handoff: Handoff) -> dict[str, Any]:
    """A handoff of ``handoff_list`` as ``GET /api/v1/handoffs`` lists it: no body."""
    chars: int = handoff.chars  # type: ignore[attr-defined]  # annotated by handoff_list
    return {
        "id": str(handoff.id),
        "state": handoff_state(handoff),
        "created_at": rfc3339(handoff.created_at),
        "expires_at": rfc3339(handoff.expires_at),
        "claimed_at": rfc3339(handoff.claimed_at),
        "from_agent": handoff.from_agent,
        "chars": chars,
    }


def handoff_payload(handoff: Handoff) -> dict[str, Any]:
    """A claimed handoff in the on-start JSON (its body included: it is the point)."""
    return {
        "id": str(handoff.id),
        "body": handoff.body,
        "created_at": rfc3339(handoff.created_at),
        "expires_at": rfc3339(handoff.expires_at),
        "from_agent": handoff.from_agent,
        "from_owner_user": handoff.from_owner_user or None,
    }


def handoff_text(handoff: Handoff, *, workspace: str, project: str) -> str:
    """The handoff's part of the on-start block: who wrote it, how long ago, and the note."""
    age = age_text(handoff.created_at, timezone.now())
    return (
        f"🤝 ai-memory handoff for {workspace}/{project}, written {age} by "
        f"{handoff.from_agent}:\n{handoff.body}"
    )
