"""Session wakes (docs/reference.md#waiting-and-waking): which pending messages a session
has been told about, and the wait that answers as soon as there is mail it has not.

A session is told about mail by its session start (the on-start block's inbox notice) and
by a wake; each message at most once, recorded as ``messaging.models.Announcement`` rows.
A wake never pops and never carries message text: it answers counts and the notice.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from aimemory_site.lib.errors import Code, NotFound
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.wakeups import (
    inbox_topic,
    once_per_call,
    session_topic,
    wait_for,
    wait_seconds_parse,
    wake_publish,
)
from aimemory_site.onstart.selectors import session_of_principal
from messaging.models import (
    PENDING_IN_INBOX_SQL,
    Announcement,
    Message,
    SessionWait,
    pending_in_inbox_params,
)
from messaging.notices import inbox_notice
from messaging.selectors import message_pending_count
from messaging.wake_webhooks import PARKED_GRACE
from projects.access import Level, project_access, project_access_again
from projects.models import AgentSession, Project
from projects.services import session_id_parse


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


def _wake_answer(*, project: Project, new: int, pending: int, superseded: bool) -> dict[str, Any]:
    context = None
    if new:
        context = inbox_notice(
            count=pending, workspace=project.workspace.name, project=project.name
        )
    return {
        "new_message_count": new,
        "pending_message_count": pending,
        "context": context,
        "superseded": superseded,
    }


def _newest_wait_record(session: AgentSession, project: Project, wait: float) -> uuid.UUID:
    """Make a new wait the session's newest, parked on ``project`` for ``wait`` seconds
    (and ``PARKED_GRACE``; none for a wait of 0), which every process and host reads
    (``messaging.wake_webhooks.session_parked``); return its token. One upsert, committed."""
    token = uuid.uuid4()
    parked_until = timezone.now() + timedelta(seconds=wait) + PARKED_GRACE if wait > 0 else None
    SessionWait.objects.bulk_create(
        [SessionWait(session=session, token=token, project=project, parked_until=parked_until)],
        update_conflicts=True,
        unique_fields=["session"],
        update_fields=["token", "project", "parked_until"],
    )
    return token


def _wait_ended_record(session: AgentSession, token: uuid.UUID) -> None:
    """The wait ``token`` of ``session`` ended: it counts as parked ``PARKED_GRACE`` more
    (its waiter parks again within it), then no longer. A newer wait's record is left."""
    SessionWait.objects.filter(session=session, token=token, parked_until__isnull=False).update(
        parked_until=timezone.now() + PARKED_GRACE
    )


def session_wait(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    session_id: str,
    wait_seconds: object = None,
    client_gone: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """``POST /api/v1/sessions/wait``: answer as soon as mail the session has not been told
    about is pending in the project (announcing it), or when ``wait_seconds`` (clamped to
    0..60; not an integer: 400 ``invalid_wait_seconds``) have passed, or when a newer
    wait of the same session supersedes this one. Once ``client_gone`` says the caller has
    gone, it announces nothing more: mail it would have told stays new to the session.

    Needs read on the project, checked first, so a caller learns nothing of a project it
    may not read. The session id must be one ``principal`` registered: any other (unknown,
    or another principal's) is 404 ``session_not_found`` and changes nothing. Must not be
    called inside ``transaction.atomic``: it parks, holding no connection (``wait_for``).
    """
    wait = wait_seconds_parse(wait_seconds)
    found = project_access(principal, workspace, project, need=Level.READ)
    session_id = session_id_parse(session_id)
    session = session_of_principal(principal, session_id)
    if session is None:
        raise NotFound(
            f"no session {session_id[:200]!r} registered by this caller: start it with "
            "POST /api/v1/sessions first",
            code=Code.SESSION_NOT_FOUND,
        )
    topic = session_topic(session.session_id)

    def newest() -> uuid.UUID:
        token = _newest_wait_record(session, found, wait)
        # Committed: an older wait of this session, in any process, wakes and finds it
        # is no longer the newest.
        wake_publish([topic])
        return token

    # Once per call: a later run of this call (after a wake) is the same wait.
    token = once_per_call(newest, client_gone)

    def look() -> dict[str, Any] | None:
        if not SessionWait.objects.filter(session=session, token=token).exists():
            pending = message_pending_count(project=found)
            return _wake_answer(project=found, new=0, pending=pending, superseded=True)
        announced = pending_announce(session=session, project=found)
        if not announced.new:
            return None
        return _wake_answer(
            project=found, new=announced.new, pending=announced.pending, superseded=False
        )

    answer = wait_for(
        look,
        topics=[inbox_topic(found.pk), topic],
        wait_seconds=wait,
        caller=principal.wait_key,
        recheck=lambda: project_access_again(principal, workspace, project, need=Level.READ),
        # A newer wait of this session takes its older one's place under the caps.
        place=f"session:{session.pk}",
        client_gone=client_gone,
    )
    if wait > 0:
        _wait_ended_record(session, token)
    if answer is not None:
        return answer
    return _wake_answer(
        project=found, new=0, pending=message_pending_count(project=found), superseded=False
    )
