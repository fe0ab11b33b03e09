"""What a session has been told and what it waits on: the ``Announcement`` and
``SessionWait`` rows messaging keeps for session wakes (docs/reference.md#waiting-and-waking).

The session start and the session wait (``aimemory_site.onstart``) compose these; the
retention purge deletes a message's announcements with it, and a wake webhook stays quiet
while a session of its project is parked (``wake_webhooks.session_parked``).
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from messaging.models import (
    PENDING_IN_INBOX_SQL,
    Announcement,
    Message,
    SessionWait,
    pending_in_inbox_params,
)
from messaging.wake_webhooks import PARKED_GRACE
from projects.models import AgentSession, Project


@dataclass(frozen=True)
class Announced:
    """What one announcement did: how many pending messages were new to the session, and
    how many are pending in all, both as of one moment."""

    new: int
    pending: int


def pending_announce(*, session: AgentSession, project: Project) -> Announced:
    """Tell ``session`` about every message pending in ``project``'s inbox that it has not
    been told about; answer how many that was and how many are pending.

    The insert and the count see one moment, so the count never holds a message the
    session was not recorded as told about: on PostgreSQL they are one statement (one
    snapshot), which is also the only statement (it stands in for the plain count); on
    SQLite two, in one IMMEDIATE transaction, which holds the write lock from the first,
    so no send commits between them. Racing announcements to one session each insert a
    message's row or skip it on the unique constraint: it is new to exactly one of them.
    Must not be called inside another transaction on PostgreSQL (it commits on its own).
    """
    sql = _announce_sql(connection.vendor)
    inbox_params = pending_in_inbox_params(project.pk, timezone.now())
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(sql[0], [*inbox_params, session.pk])
            new, pending = cursor.fetchone()
    else:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql[0], [session.pk, *inbox_params])
            new = cursor.rowcount
            cursor.execute(sql[1], inbox_params)
            (pending,) = cursor.fetchone()
    return Announced(new=new, pending=pending)


@functools.cache
def _announce_sql(vendor: str) -> tuple[str, ...]:
    """The statements of ``pending_announce`` on ``vendor``, built once."""
    told = Announcement._meta.db_table
    messages = Message._meta.db_table
    session_field = Announcement._meta.get_field("session")
    session_column = session_field.column
    message_column = Announcement._meta.get_field("message").column
    insert = f"INSERT INTO {told} ({session_column}, {message_column}) "
    conflict = f"ON CONFLICT ({session_column}, {message_column}) DO NOTHING"
    if vendor == "postgresql":
        session_type = session_field.db_type(connection)
        return (
            f"WITH p AS (SELECT id FROM {messages} WHERE {PENDING_IN_INBOX_SQL}), "
            f"i AS ({insert}SELECT %s::{session_type}, id FROM p {conflict} RETURNING 1) "
            "SELECT (SELECT COUNT(*) FROM i), (SELECT COUNT(*) FROM p)",
        )
    return (
        f"{insert}SELECT %s, id FROM {messages} WHERE {PENDING_IN_INBOX_SQL} {conflict}",
        f"SELECT COUNT(*) FROM {messages} WHERE {PENDING_IN_INBOX_SQL}",
    )


def session_wait_newest(session: AgentSession, project: Project, wait: float) -> uuid.UUID:
    """Make a new wait the session's newest, parked on ``project`` for ``wait`` seconds
    (and ``PARKED_GRACE``; none for a wait of 0), which every process and host reads
    (``wake_webhooks.session_parked``); return its token. One upsert, committed."""
    token = uuid.uuid4()
    parked_until = timezone.now() + timedelta(seconds=wait) + PARKED_GRACE if wait > 0 else None
    SessionWait.objects.bulk_create(
        [SessionWait(session=session, token=token, project=project, parked_until=parked_until)],
        update_conflicts=True,
        unique_fields=["session"],
        update_fields=["token", "project", "parked_until"],
    )
    return token


def session_wait_ended(session: AgentSession, token: uuid.UUID) -> None:
    """The wait ``token`` of ``session`` ended: it counts as parked ``PARKED_GRACE`` more
    (its waiter parks again within it), then no longer. A newer wait's record is left."""
    SessionWait.objects.filter(session=session, token=token, parked_until__isnull=False).update(
        parked_until=timezone.now() + PARKED_GRACE
    )


def session_wait_current(session: AgentSession, token: uuid.UUID) -> bool:
    """Whether the wait ``token`` is still ``session``'s newest."""
    return SessionWait.objects.filter(session=session, token=token).exists()
