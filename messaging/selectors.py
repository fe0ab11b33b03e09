"""Reads for messages. None of them change state: listing never claims."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from time import monotonic

from django.db.models import Count, OuterRef, Prefetch, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from aimemory_site.lib.errors import BadRequest, Code, NotFound
from aimemory_site.lib.limits import limit_clamp
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.wakeups import message_topic, wait_for, wait_seconds_parse
from messaging.arguments import message_id_required
from messaging.models import Message
from projects.access import (
    Level,
    project_access,
    project_access_again,
    projects_with_grant,
    readable_among,
    readable_as_loaded,
)
from projects.models import Project

BOXES = ("inbox", "outbox")


def box_parse(box: str | None, boxes: tuple[str, ...] = BOXES) -> str:
    """``box`` (default ``inbox``) if it is one of ``boxes``, else 400 invalid_box."""
    value = (box or "").strip() or "inbox"
    if value not in boxes:
        named = " or ".join(f'"{name}"' for name in boxes)
        raise BadRequest(f'box must be {named}, got "{box}"', code=Code.INVALID_BOX)
    return value


def message_list(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    box: str | None = "inbox",
    limit: int | None = None,
) -> list[Message]:
    """Pending messages of a project's inbox or outbox, oldest first. Needs read.

    Nothing reads ``principal`` before the access query, which confirms an anonymous
    caller not yet confirmed (``principal_of(request, access_confirms=True)``).
    """
    which = box_parse(box)
    scope = project_access(principal, workspace, project, need=Level.READ)
    # Prefetched, not joined: a page of messages names few projects, and building one
    # Project and Workspace per row (select_related) cost more than the two extra queries.
    # Each comes with the caller's grant, so ``names_shown`` asks no more.
    with_workspace = projects_with_grant(principal)
    messages = Message.objects.pending().prefetch_related(
        Prefetch("to_project", queryset=with_workspace),
        Prefetch("from_project", queryset=with_workspace),
    )
    messages = messages.inbox_of(scope) if which == "inbox" else messages.outbox_of(scope)
    return list(messages.oldest_first()[: limit_clamp(limit)])


def names_shown(principal: Principal, messages: Iterable[Message]) -> set[uuid.UUID]:
    """The projects at either end of ``messages`` that ``principal`` may see named: the
    ones it may read. A message names any other as nothing, as it would a project that
    does not exist, on every surface (docs/operating.md#projects-and-grants); the web's
    pages decide by the same rule (``readable_among``).

    No query for root or an anonymous server, nor for projects that ``message_list``
    read (they come with the caller's grant); one for all the others together.
    Precondition: both projects of each message are loaded.
    """
    ends = {
        project.pk: project
        for message in messages
        for project in (message.to_project, message.from_project)
    }
    shown: set[uuid.UUID] = set()
    unknown: set[uuid.UUID] = set()
    for pk, project in ends.items():
        readable = readable_as_loaded(principal, project)
        if readable is None:
            unknown.add(pk)
        elif readable:
            shown.add(pk)
    return shown | readable_among(principal, unknown)


def message_pending_count(*, project: Project) -> int:
    """How many messages wait in ``project``'s inbox (the caller checked access)."""
    return Message.objects.pending().inbox_of(project).count()


def pending_count_expression() -> Coalesce:
    """How many messages wait in the inbox of each row of a ``Project`` queryset, as an
    expression to annotate it with: one count per project over the inbox index, in the
    same query. Counting in SQL spares the page a second query and a thousand project
    ids read back and matched in Python."""
    waiting = (
        Message.objects.pending()
        .inbox_of(OuterRef("pk"))
        .order_by()
        .values("to_project")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Coalesce(Subquery(waiting), 0)


def message_status(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    message_id: str,
    wait_seconds: object = None,
    client_gone: Callable[[], bool] | None = None,
) -> Message:
    """A message of any state whose sender or recipient is the caller's project.

    Needs read on that project. Any other message, or an unknown id, is the same
    ``message_not_found``, so a status never tells a third project that a message exists.
    With ``wait_seconds`` (clamped to 0..60) a pending message is waited on: the answer
    comes once it is no longer pending, or when the time is up (or ``client_gone`` says
    the caller left), as it then is (docs/reference.md#waiting-and-waking).
    """
    wanted = message_id_required(message_id)
    wait = wait_seconds_parse(wait_seconds)
    scope = project_access(principal, workspace, project, need=Level.READ)
    if not wait:
        return status_of(scope, wanted)

    now = timezone.now()
    first = status_of(scope, wanted)
    if not first.is_pending(now):
        return first
    # An expiry is no commit, so nothing publishes it: the wait ends at it by the clock.
    until = (
        None if first.expires_at is None else monotonic() + (first.expires_at - now).total_seconds()
    )

    def settled() -> Message | None:
        found = status_of(scope, wanted)
        return None if found.is_pending() else found

    answer = wait_for(
        settled,
        topics=[message_topic(wanted)],
        wait_seconds=wait,
        caller=principal.wait_key,
        recheck=lambda: project_access_again(principal, workspace, project, need=Level.READ),
        client_gone=client_gone,
        until=until,
    )
    return answer if answer is not None else status_of(scope, wanted)


def status_of(scope: Project, wanted: uuid.UUID) -> Message:
    """Message ``wanted`` if ``scope`` sent or received it, else 404 message_not_found:
    the one answer for a message a project may not see (status, thread)."""
    found = (
        Message.objects.filter(pk=wanted)
        .filter(Q(to_project=scope) | Q(from_project=scope))
        .select_related("to_project__workspace", "from_project__workspace")
        .first()
    )
    if found is None:
        raise NotFound(
            f"message {wanted} not found in the inbox or outbox of {scope}",
            code=Code.MESSAGE_NOT_FOUND,
        )
    return found
