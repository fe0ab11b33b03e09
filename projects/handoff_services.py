"""Handoff writes: leave a single-use note for the next session of a project, and claim
it, exactly once, at that session's start. The reads are ``projects.handoff_selectors``."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from aimemory_site.lib.errors import BadRequest, Code
from aimemory_site.lib.limits import HANDOFF_BODY_MAX_CHARS
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.scrubbing import text_clean
from aimemory_site.lib.sql import claim_oldest_sql, db_value
from projects.access import Level, project_access
from projects.models import Activity, AgentSession, Handoff, Project
from projects.services import activity_record, session_agent


def handoff_create(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    body: str,
    session: AgentSession | None = None,
) -> Handoff:
    """Leave a handoff for the next session of the project. Needs write.

    The body is scrubbed like a message body and capped at 8,000 characters; it expires
    after ``AI_MEMORY_HANDOFF_TTL_DAYS`` and is then never delivered.
    """
    target = project_access(principal, workspace, project, need=Level.WRITE)
    if not body.strip():
        raise BadRequest("body must not be empty", code=Code.EMPTY_BODY)
    clean = text_clean(body, cap=HANDOFF_BODY_MAX_CHARS, label="handoff body")
    agent = session_agent(session)
    now = timezone.now()
    with transaction.atomic():
        handoff = Handoff.objects.create(
            project=target,
            body=clean.text,
            created_at=now,
            expires_at=now + timedelta(days=settings.AI_MEMORY_HANDOFF_TTL_DAYS),
            from_session=session,
            from_agent=agent,
            from_owner_user=principal.owner_name or "",
        )
        activity_record(
            project=target,
            kind=Activity.Kind.HANDOFF_WRITTEN,
            actor=f"{principal.display_name} ({agent})",
            summary=f"handoff written ({len(clean.text):,} chars)",
        )
    return handoff


def handoff_claim(*, project: Project, session: AgentSession | None) -> Handoff | None:
    """Claim the oldest open, unexpired handoff of ``project`` for a starting session.

    Exactly once however many session starts race: the claim-once statement of
    ``claim_oldest_sql``, as a pop claims a message. The caller checked write access.
    """
    now = db_value(Handoff, "claimed_at", timezone.now())
    sql = claim_oldest_sql(
        Handoff,
        assignments=["state", "claimed_at", "claimed_by_session_id"],
        candidates="project_id = %s AND state = %s AND expires_at > %s",
    )
    params = [
        Handoff.State.CLAIMED,
        now,
        session.pk if session is not None else None,
        db_value(Handoff, "project", project.pk),
        Handoff.State.OPEN,
        now,
        Handoff.State.OPEN,
    ]
    with transaction.atomic():
        claimed = list(Handoff.objects.raw(sql, params))
        if not claimed:
            return None
        activity_record(
            project=project,
            kind=Activity.Kind.HANDOFF_CLAIMED,
            actor=session_agent(session),
            summary="handoff claimed by a session start",
        )
    handoff = claimed[0]
    handoff.project = project
    return handoff


def handoffs_purge(*, cutoff: datetime, batch: int, dry_run: bool = False) -> int:
    """Delete claimed handoffs claimed before ``cutoff`` and expired ones whose expiry came
    before it, ``batch`` at a time, each batch a short transaction of its own; never an
    open, unexpired one. Returns how many were deleted (on a ``dry_run``, how many would
    be, and nothing changes). Handoffs are one per session end, far fewer than messages,
    so this walks the table without an index of its own, which every write would pay for.
    """
    finished = Handoff.objects.filter(
        Q(state=Handoff.State.CLAIMED, claimed_at__lt=cutoff)
        | Q(state__in=[Handoff.State.OPEN, Handoff.State.EXPIRED], expires_at__lt=cutoff)
    )
    if dry_run:
        return finished.count()
    deleted = 0
    while True:
        ids = list(finished.order_by("created_at", "id").values_list("id", flat=True)[:batch])
        if not ids:
            return deleted
        # Still finished when deleted: an open handoff past ``cutoff`` cannot be claimed.
        count, _ = finished.filter(pk__in=ids).delete()
        deleted += count
        if len(ids) < batch:
            return deleted
