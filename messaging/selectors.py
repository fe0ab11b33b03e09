"""Reads for messages. None of them change state: listing never claims."""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from django.db.models import Count, Prefetch

from aimemory_site.errors import BadRequest
from messaging.models import Message
from projects.access import Level, Principal, project_access
from projects.models import Project

LIST_LIMIT_DEFAULT = 50
LIST_LIMIT_MAX = 200
BOXES = ("inbox", "outbox")


def limit_clamp(limit: int | None) -> int:
    """Clamp a list limit to 1..200 (default 50): out-of-range values are clamped."""
    if limit is None:
        return LIST_LIMIT_DEFAULT
    return max(1, min(LIST_LIMIT_MAX, limit))


def box_parse(box: str | None) -> str:
    value = (box or "").strip() or "inbox"
    if value not in BOXES:
        raise BadRequest(f'box must be "inbox" or "outbox", got "{box}"', code="invalid_box")
    return value


def message_list(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    box: str | None = "inbox",
    limit: int | None = None,
) -> list[Message]:
    """Pending messages of a project's inbox or outbox, oldest first. Needs read."""
    which = box_parse(box)
    scope = project_access(principal, workspace, project, need=Level.READ)
    # Prefetched, not joined: a page of messages names few projects, and building one
    # Project and Workspace per row (select_related) cost more than the two extra queries.
    with_workspace = Project.objects.select_related("workspace")
    messages = Message.objects.filter(state=Message.State.PENDING).prefetch_related(
        Prefetch("to_project", queryset=with_workspace),
        Prefetch("from_project", queryset=with_workspace),
    )
    if which == "inbox":
        messages = messages.filter(to_project=scope)
    else:
        messages = messages.filter(from_project=scope)
    return list(messages.order_by("created_at", "id")[: limit_clamp(limit)])


def message_pending_count(*, project: Project) -> int:
    """How many messages wait in ``project``'s inbox (the caller checked access)."""
    return Message.objects.filter(to_project=project, state=Message.State.PENDING).count()


def pending_counts(project_ids: Iterable[UUID]) -> dict[UUID, int]:
    """Pending inbox counts for many projects in one grouped query; absent means 0."""
    rows = (
        Message.objects.filter(to_project_id__in=list(project_ids), state=Message.State.PENDING)
        .values("to_project_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {row["to_project_id"]: row["n"] for row in rows}
