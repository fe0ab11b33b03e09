"""The SQL of a send, a claim and a cancel, in both dialects, and how each runs.

``messaging.services`` holds the rules and calls these; what lives here is what the ORM
cannot say in the few round trips the hot path allows (docs/hot-path.md): a guarded
``INSERT ... SELECT`` bounded by the inbox's pending count, a claim-once ``UPDATE ...
RETURNING`` with its activity row, a cancel that returns what it cancelled. Every
statement is built once per shape (``functools.cache``) and its parameters are bound by
name at the moment it runs (``Send.params``, ``Claim.params``), never by position.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from aimemory_site.lib.sql import (
    claim_oldest_sql,
    compiled_where,
    db_value,
    insert_columns,
    insert_parts,
    insert_values_sql,
    model_from_row,
    placeholders,
    typed_placeholders,
    uuid_of,
)
from aimemory_site.lib.wakeups import (
    inbox_topic,
    message_topic_sql,
    wake_unheard_sql,
)
from messaging.limits import MAX_PENDING_PER_INBOX
from messaging.models import PENDING_IN_INBOX_SQL, Message, pending_in_inbox_params
from messaging.tasks import question_task_row
from messaging.wake_webhooks import wake_needed_params, wake_needed_sql
from projects.access import project_from_values
from projects.models import Activity, Project, Workspace


def write_block(*, one_query: bool) -> contextlib.AbstractContextManager[Any]:
    """The transaction a send's or a pop's writes run in: ``transaction.atomic(durable=
    True)``, or none where they are ``one_query`` on PostgreSQL, which the server runs as
    one implicit transaction: no BEGIN and COMMIT, two round trips fewer. (Observers,
    outside a transaction, then hear of it at once: it has committed.) Inside a
    transaction (a test's) the durable block is a savepoint, which keeps a failed
    statement (a racing retry's key) from aborting the outer one."""
    if one_query and connection.vendor == "postgresql" and not connection.in_atomic_block:
        return contextlib.nullcontext()
    return transaction.atomic(durable=True)


# -- send ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SendOutcome:
    """What a send's statements answered."""

    inserted: bool  # false: the inbox was full, nothing was written
    heard: bool  # a call may be waiting on the inbox (``wake_unheard_sql``)
    wake: bool  # a wake webhook of the recipient is to be woken (``wake_needed_sql``)


@dataclass(frozen=True)
class Send:
    """The statements of one send: the message, its activity rows and, for a question,
    its background task's row, each already as the connection stores it.

    The count and the insert are one guarded ``INSERT ... SELECT ... WHERE (pending
    count) < bound``. Concurrent senders to one inbox must not both pass the count: on
    SQLite the IMMEDIATE transaction already holds the database's single write lock, and
    the activity rows follow in a second statement; on PostgreSQL a row lock on the
    recipient serialises them, taken by a statement of its own before the insert, so that
    the insert's snapshot (one per statement, under READ COMMITTED) sees every message
    committed before the lock was granted, and one statement does the guarded insert and
    the activity rows only if it inserted. The two go to PostgreSQL as one query string,
    one round trip and one implicit transaction: the lock is held to its end, and an error
    in the insert rolls back both. (That needs the simple query protocol, which Django's
    default client-side binding uses.)

    A question's task row goes with the activity rows, only if the message was inserted:
    one commit, and the task exists if and only if the question does
    (docs/reference.md#notifications). The activity rows' statement also answers whether
    the recipient has an enabled wake webhook with no wake queued
    (docs/reference.md#wake-webhooks): an index probe in a statement the send runs anyway.
    """

    message: Message
    message_values: list[Any]
    activity_values: list[list[Any]]
    task_values: list[Any] | None

    @classmethod
    def of(cls, message: Message, activities: list[Activity]) -> Send:
        """Built before the transaction: on SQLite every writer waits for the one before
        it to commit, so nothing but the statements themselves belongs inside."""
        task = None
        if message.decision is not None:
            [task] = insert_parts([question_task_row(message)])[2]
        [values] = insert_parts([message])[2]
        return cls(message, values, insert_parts(activities)[2], task)

    def run(self) -> SendOutcome:
        """Run the statements unless the inbox is full. On SQLite this must run inside
        the send's transaction (``write_block``); on PostgreSQL it is one."""
        recipient_id = self.message.to_project_id
        count = [
            *pending_in_inbox_params(recipient_id, self.message.created_at),
            MAX_PENDING_PER_INBOX,
        ]
        activities = [value for row in self.activity_values for value in row]
        wake = wake_needed_params(recipient_id)
        with_task = self.task_values is not None
        with connection.cursor() as cursor:
            if connection.vendor != "postgresql":
                insert, activity, task = _send_sql_sqlite(len(self.activity_values), with_task)
                cursor.execute(insert, [*self.message_values, *count])
                if cursor.rowcount != 1:
                    return SendOutcome(inserted=False, heard=True, wake=False)
                cursor.execute(activity, [*activities, *wake])
                wake_needed = any(row[0] for row in cursor.fetchall())
                if task is not None:
                    cursor.execute(task, self.task_values)
                return SendOutcome(inserted=True, heard=True, wake=wake_needed)
            unheard = wake_unheard_sql("%s")
            sql = _send_sql_postgresql(len(self.activity_values), unheard, with_task)
            topic = [] if unheard is None else [inbox_topic(recipient_id)]
            cursor.execute(
                sql,
                [
                    recipient_id,  # the lock
                    *self.message_values,
                    *count,
                    *activities,
                    *(self.task_values or []),
                    *topic,
                    *wake,
                ],
            )
            cursor.nextset()  # past the lock's result, to the insert's answer
            inserted, unheard_now, wake_needed = cursor.fetchone()
            return SendOutcome(
                inserted=inserted == 1,
                heard=not unheard_now,
                wake=inserted == 1 and bool(wake_needed),
            )


def _count_sql() -> str:
    return f"SELECT COUNT(*) FROM {Message._meta.db_table} WHERE {PENDING_IN_INBOX_SQL}"


@functools.cache
def _send_sql_sqlite(activity_count: int, with_task: bool) -> tuple[str, str, str | None]:
    """The guarded insert (parameters: the message's values, the count's, the bound);
    the activity rows, answering whether a wake webhook is to be woken (their values,
    then ``wake_needed_params``); and the task's row ``with_task``."""
    table, columns = insert_columns(Message)
    field_count = len(Message._meta.concrete_fields)
    return (
        f"INSERT INTO {table} ({columns}) SELECT {placeholders(field_count)} "
        f"WHERE ({_count_sql()}) < %s",
        f"{insert_values_sql(Activity, activity_count)} RETURNING {wake_needed_sql()}",
        insert_values_sql(DBTaskResult) if with_task else None,
    )


@functools.cache
def _send_sql_postgresql(activity_count: int, unheard: str | None, with_task: bool) -> str:
    """One query string of two statements: the recipient's lock (its id), then the
    guarded insert (the message's values, the count's, the bound) with the activity rows
    (their values) and ``with_task`` the task's row (its values), answering whether it
    inserted, whether no one can be waiting on the inbox (``unheard``, whose parameter is
    the inbox's topic, or false) and whether a wake webhook is to be woken
    (``wake_needed_params``)."""
    table, columns = insert_columns(Message)
    activity_table, activity_columns = insert_columns(Activity)
    typed_activity = typed_placeholders(Activity)
    follow = [
        f"a{n} AS (INSERT INTO {activity_table} ({activity_columns}) "
        f"SELECT {typed_activity} FROM m)"
        for n in range(activity_count)
    ]
    if with_task:
        task_table, task_columns = insert_columns(DBTaskResult)
        follow.append(
            f"t AS (INSERT INTO {task_table} ({task_columns}) "
            f"SELECT {typed_placeholders(DBTaskResult)} FROM m)"
        )
    return (
        f"SELECT 1 FROM {Project._meta.db_table} WHERE id = %s FOR NO KEY UPDATE; "
        f"WITH m AS (INSERT INTO {table} ({columns}) SELECT {typed_placeholders(Message)} "
        f"WHERE ({_count_sql()}) < %s RETURNING 1), {', '.join(follow)} "
        f"SELECT COUNT(*), {unheard or 'false'}, {wake_needed_sql()} FROM m"
    )


# -- claim --------------------------------------------------------------------------------

# Where an activity row holds the values the claim fills in.
_ACTIVITY_COLUMN = {field.attname: n for n, field in enumerate(Activity._meta.concrete_fields)}
_MESSAGE_ID_COLUMN = [field.attname for field in Message._meta.concrete_fields].index("id")
_FROM_PROJECT_COLUMN = [field.attname for field in Message._meta.concrete_fields].index(
    "from_project_id"
)
_IN_REPLY_TO_COLUMN = Message._meta.get_field("in_reply_to").column


@dataclass(frozen=True)
class Claim:
    """The claim of the oldest pending message of ``inbox`` (or ``message_id``; only a
    reply to ``reply_to`` if given) on behalf of a session, an agent and a user, with the
    activity row that records it. ``claim_oldest_sql`` holds the rule."""

    inbox: Project
    message_id: uuid.UUID | None
    reply_to: uuid.UUID | None
    session_id: Any
    agent: str
    user: str
    activity_values: list[Any]
    sql: str

    @classmethod
    def of(
        cls,
        inbox: Project,
        message_id: uuid.UUID | None,
        reply_to: uuid.UUID | None,
        *,
        session_id: Any,
        agent: str,
        user: str,
        activity: Activity,
        sender_access: bool,
    ) -> Claim:
        """Built before the transaction, as a send's statements are: on SQLite every
        writer waits while this one holds the write lock, so only the statements run
        inside, and the claimed row is read into a Message after the commit.
        ``sender_access``: the row also brings the sender's access mode and creator, for
        a caller whose right to see the sender named depends on them."""
        sql = _claim_sql(
            connection.vendor,
            named=message_id is not None,
            reply=reply_to is not None,
            unheard=wake_unheard_sql(message_topic_sql("c.id")),
            sender_access=sender_access,
        )
        [values] = insert_parts([activity])[2]
        return cls(inbox, message_id, reply_to, session_id, agent, user, values, sql)

    def params(self, now: datetime) -> list[Any]:
        """The claim's parameters, in the order ``_claim_sql`` reads them, for a claim at
        ``now``."""
        return [
            # the assignments
            Message.State.CLAIMED,
            db_value(Message, "claimed_at", now),
            self.session_id,
            self.agent,
            self.user,
            # the candidates: pending, and not expired at the claim's moment
            *pending_in_inbox_params(self.inbox.pk, now),
            *([] if self.message_id is None else [db_value(Message, "id", self.message_id)]),
            *([] if self.reply_to is None else [db_value(Message, "in_reply_to", self.reply_to)]),
            # the guard
            Message.State.PENDING,
        ]

    def run(self) -> tuple[Sequence[Any] | None, bool]:
        """Claim; the claimed row (its columns, then its sender's names) or None when
        nothing was claimed, and whether a call may be waiting on the claimed message
        (``wake_unheard_sql``: no publication is needed when its statement says none can
        be; else, or without one, it is).

        Must run inside the pop's transaction, or on PostgreSQL in autocommit (one
        statement). The claim's moment, which the activity row shares, is taken here: on
        SQLite once the write lock is held, so it never comes before the claimed
        message's ``created_at``; on PostgreSQL just before the statement. The expiry is
        judged at that moment, inside the guarded statement: a message whose time has
        passed is never claimed, swept by ``messages_expire`` or not. On PostgreSQL the
        claim and the activity row are one statement; on SQLite (no ``INSERT`` inside a
        ``WITH``) the activity row follows, its counterpart the sender the claim
        returned.
        """
        now = timezone.now()
        activity = list(self.activity_values)
        activity[_ACTIVITY_COLUMN["created_at"]] = db_value(Activity, "created_at", now)
        counterpart = _ACTIVITY_COLUMN["counterpart_id"]
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                del activity[counterpart]  # the statement takes it from the claimed row
                cursor.execute(self.sql, [*self.params(now), *activity])
                answer = cursor.fetchone()
                return (None, False) if answer is None else (answer[:-1], not answer[-1])
            cursor.execute(self.sql, self.params(now))
            row: Sequence[Any] | None = cursor.fetchone()
            if row is None:
                return None, False
            activity[counterpart] = row[_FROM_PROJECT_COLUMN]
            cursor.execute(insert_values_sql(Activity), activity)
            return row, True


def claimed_id(row: Sequence[Any]) -> uuid.UUID:
    """The id of the message a claim's row holds."""
    return uuid_of(row[_MESSAGE_ID_COLUMN])


def claimed_message(row: Sequence[Any], inbox: Project) -> Message:
    """The Message of a claimed row, with its sender's project and workspace (which came
    back as extra columns of the row, with its access mode and creator when asked), so
    nothing is read again."""
    claimed, (sender_name, sender_workspace_id, sender_workspace_name, *access) = model_from_row(
        Message, row
    )
    claimed.from_project = project_from_values(
        project_id=claimed.from_project_id,
        workspace_id=sender_workspace_id,
        name=sender_name,
        workspace_name=sender_workspace_name,
        **(dict(zip(("access_mode", "created_by_id"), access, strict=True)) if access else {}),
    )
    claimed.to_project = inbox  # already loaded, with its workspace
    return claimed


@functools.cache
def _claim_sql(
    vendor: str, *, named: bool, reply: bool, unheard: str | None, sender_access: bool
) -> str:
    """The claim on ``vendor``, of the named message or the oldest (of the replies to a
    message, with ``reply``), returning the sender's names (and ``sender_access``, its
    access mode and creator), and on PostgreSQL the activity row with it and, last,
    ``unheard`` (``wake_unheard_sql`` of the claimed message's topic, or false); built
    once. Its parameters: ``Claim.params``, then on PostgreSQL the activity row's values
    but its counterpart."""
    table = Message._meta.db_table
    projects, workspaces = Project._meta.db_table, Workspace._meta.db_table
    assignments = [
        "state",
        "claimed_at",
        "claimed_by_session_id",
        "claimed_by_agent",
        "claimed_by_user",
    ]
    candidates = (
        PENDING_IN_INBOX_SQL
        + (" AND id = %s" if named else "")
        + (f" AND {_IN_REPLY_TO_COLUMN} = %s" if reply else "")
    )
    if vendor != "postgresql":
        sender = (
            f"(SELECT {{column}} FROM {projects} p JOIN {workspaces} w "
            f"ON w.id = p.workspace_id WHERE p.id = {table}.from_project_id)"
        )
        return claim_oldest_sql(
            Message,
            assignments=assignments,
            candidates=candidates,
            returning_extra=f", {sender.format(column='p.name')} AS sender_name, "
            f"{sender.format(column='w.id')} AS sender_workspace_id, "
            f"{sender.format(column='w.name')} AS sender_workspace_name"
            + (
                f", {sender.format(column='p.access_mode')} AS sender_access_mode, "
                f"{sender.format(column='p.created_by_id')} AS sender_created_by_id"
                if sender_access
                else ""
            ),
        )
    # The sender's names by one join after the claim, not three subqueries in its
    # RETURNING: PostgreSQL plans every statement anew (the binding is the client's), and
    # the subqueries cost a third of the claim's planning.
    claim = claim_oldest_sql(Message, assignments=assignments, candidates=candidates)
    activity_table, activity_columns = insert_columns(Activity)
    values = typed_placeholders(Activity, instead={"counterpart_id": "c.from_project_id"})
    return (
        f"WITH c AS ({claim}), a AS (INSERT INTO {activity_table} ({activity_columns}) "
        f"SELECT {values} FROM c) SELECT c.*, p.name, w.id, w.name, "
        f"{'p.access_mode, p.created_by_id, ' if sender_access else ''}{unheard or 'false'} "
        f"FROM c LEFT JOIN {projects} p ON p.id = c.from_project_id "
        f"LEFT JOIN {workspaces} w ON w.id = p.workspace_id"
    )


# -- cancel -------------------------------------------------------------------------------


def cancel_returning_ids(pending: QuerySet[Message]) -> list[uuid.UUID]:
    """Cancel the messages of ``pending``, in one ``UPDATE ... RETURNING id`` (which the
    ORM cannot say) of the queryset's own condition; the ids it cancelled."""
    table = Message._meta.db_table
    where, where_params = compiled_where(pending)
    sql = f"UPDATE {table} SET state = %s, cancelled_at = %s WHERE {where} RETURNING id"
    params = [
        Message.State.CANCELLED,
        db_value(Message, "cancelled_at", timezone.now()),
        *where_params,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [uuid_of(row[0]) for row in cursor.fetchall()]
