"""Writes for messages: send, claim-once pop and cancel.

Every surface (JSON API, MCP, CLI through the API) calls these, so the rules live here
once: access, scrubbing and caps, the inbox bound, the claim and the audit trail.
"""

from __future__ import annotations

import contextlib
import functools
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from aimemory_site.lib.decisions import (
    Decision,
    ReplyVia,
    deadline_resolve,
    deadline_text,
    decision_parse,
    decision_reply_parse,
)
from aimemory_site.lib.errors import BadRequest, Code, Conflict
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.scrubbing import CleanText, scrubber_configured, text_clean
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
    message_topic,
    message_topic_sql,
    once_per_call,
    wait_for,
    wait_seconds_parse,
    wake_publish,
    wake_unheard_sql,
)
from messaging.admission import admission_decide, admission_observe
from messaging.admission_config import MESSAGE_CANCEL, MESSAGE_POP, MESSAGE_SEND
from messaging.answer_selectors import reply_accepted, reply_verdict
from messaging.arguments import (
    expires_in_parse,
    idempotency_key_parse,
    in_reply_to_parse,
    message_id_parse,
    request_id_parse,
)
from messaging.limits import (
    BODY_MAX_CHARS,
    MAX_PENDING_PER_INBOX,
    RETRY_WINDOW,
    SUBJECT_MAX_CHARS,
)
from messaging.models import (
    PENDING_IN_INBOX_NOW_PARAM,
    PENDING_IN_INBOX_SQL,
    Message,
    PopRequest,
    pending_in_inbox_params,
)
from messaging.register_services import decision_register_record
from messaging.tasks import question_task_row, wake_schedule
from messaging.wake_webhooks import wake_needed_params, wake_needed_sql
from projects.access import (
    Level,
    project_access,
    project_access_again,
    project_from_values,
    projects_access,
)
from projects.models import Activity, AgentSession, Project, Workspace
from projects.services import activity_new, activity_record, session_agent

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def subject_clean(subject: str | None) -> CleanText:
    """Flatten to one line, scrub and cap a subject; a missing one is empty.

    Flattened first: a credential split over two lines ("password:\nhunter2") would pass
    the scrubber, whose patterns stop at a line break, and be joined by the flattening.
    """
    if subject is None:
        return CleanText("")
    line, redactions = scrubber_configured().scrub_counted(_CONTROL_CHARS.sub(" ", subject))
    line = line.strip()
    if len(line) > SUBJECT_MAX_CHARS:
        # One line by contract, so no multi-line marker: an ellipsis marks the cut.
        line = line[: SUBJECT_MAX_CHARS - 1].rstrip() + "…"
    return CleanText(line, redactions=redactions)


def body_clean(body: str) -> CleanText:
    """Scrub then cap a body (8,000 chars); an empty one is refused."""
    if not body.strip():
        raise BadRequest("body must not be empty", code=Code.EMPTY_BODY)
    return text_clean(body, cap=BODY_MAX_CHARS, label="message body")


def _actor(principal: Principal, agent: str) -> str:
    return f"{principal.display_name} ({agent})"


@dataclass(frozen=True)
class Sent:
    """A send's outcome: the message, and whether a retry with its key replayed it."""

    message: Message
    replay: bool = False


def message_send(
    *,
    principal: Principal,
    to_workspace: str,
    to_project: str,
    from_workspace: str,
    from_project: str,
    body: str,
    subject: str | None = None,
    from_session: AgentSession | None = None,
    in_reply_to: str | None = None,
    idempotency_key: str | None = None,
    expires_in_seconds: int | None = None,
    reply_via: ReplyVia = "message",
) -> Sent:
    """Put a message in the recipient's inbox, or raise and write nothing.

    Needs write on the recipient, which must exist (a typo is rejected, never turned into
    a dead inbox), and write on the sender: signing as a project is acting as it.
    ``in_reply_to`` must name a message the sending project sent or received. A send
    whose ``idempotency_key`` the same principal used from the sending project within 24
    hours writes nothing and answers that first message (``replay``), whatever its body;
    racing retries are decided by a unique constraint, not by a read. Another principal's
    key, on a project both may write, is a new send. Deciding admission webhooks run before
    anything is written, so this must not be called inside ``transaction.atomic`` (on
    SQLite the durable block raises ``RuntimeError`` if it is). Three statements: the
    access query, then the guarded insert and the two activity rows (SQLite), or the
    inbox lock and one statement doing both, sent together without BEGIN and COMMIT
    (PostgreSQL); a key adds the look-up of an earlier send, a decision reply the look-up
    of its question, and one sent without ``in_reply_to`` the check of the question's id
    as its ``in_reply_to`` (linked when valid, silently not otherwise). The message expires
    ``expires_in_seconds`` after it is sent (default ``AI_MEMORY_MESSAGE_TTL``; None:
    never). A decision reply records ``reply_via``, the route it came by; an accepted one,
    once committed, is recorded in the decisions register (``decision_register_record``:
    its question's look-up and its page's create, a failure logged, never raised), which
    no other send touches. Nothing reads
    ``principal`` before the access query, which confirms an
    anonymous caller not yet confirmed (``principal_of(request, access_confirms=True)``).
    """
    reply_to = in_reply_to_parse(in_reply_to)
    idempotency_key = idempotency_key_parse(idempotency_key)
    expires_in = expires_in_parse(expires_in_seconds)
    if expires_in is None:
        expires_in = settings.AI_MEMORY_MESSAGE_TTL
    recipient, sender = projects_access(
        principal, [(to_workspace, to_project), (from_workspace, from_project)], need=Level.WRITE
    )
    if idempotency_key is not None:
        earlier = _send_of_key(sender, principal, idempotency_key)
        if earlier is not None:
            return Sent(earlier, replay=True)
    clean_body = body_clean(body)
    clean_subject = subject_clean(subject)
    if reply_to is not None:
        _reply_check(sender, reply_to)
    reply = decision_reply_parse(clean_subject.text, clean_body.text)
    if reply_to is None and reply is not None:
        reply_to = _question_link(sender, reply["question_id"])
    agent = session_agent(from_session)
    now = timezone.now()
    decision = decision_parse(clean_subject.text, clean_body.text)
    expires_at = None if expires_in is None else now + timedelta(seconds=expires_in)
    if decision is not None:
        expires_at = _decision_deadline(decision, now) or expires_at
    admission_decide(MESSAGE_SEND, principal=principal, project=recipient, session=from_session)
    message = Message(
        created_at=now,
        expires_at=expires_at,
        to_project=recipient,
        from_project=sender,
        from_agent=agent,
        from_owner_user=principal.owner_name or "",
        from_session=from_session,
        subject=clean_subject.text,
        body=clean_body.text,
        in_reply_to=reply_to,
        decision=decision,
        # Whether a decision reply counts is decided once, here, for every surface.
        decision_reply=reply_verdict(principal, sender, recipient, reply, reply_via),
        omitted_chars=clean_body.omitted,
        redactions=clean_body.redactions + clean_subject.redactions,
        idempotency_key=idempotency_key,
        idempotency_principal=None if idempotency_key is None else principal.key,
    )
    actor = _actor(principal, agent)
    activities = [
        activity_new(
            project=sender,
            kind=Activity.Kind.MESSAGE_SENT,
            actor=actor,
            summary="message sent",
            counterpart=recipient,
        ),
        activity_new(
            project=recipient,
            kind=Activity.Kind.MESSAGE_RECEIVED,
            actor=actor,
            summary="message received",
            counterpart=sender,
        ),
    ]
    try:
        _send_commit(principal, message, activities, from_session)
    except IntegrityError:
        if idempotency_key is None:
            raise
        # A retry with the same key won the race: answer its message.
        earlier = _send_of_key(sender, principal, idempotency_key)
        if earlier is not None:
            return Sent(earlier, replay=True)
        # The key's holder is older than the window and not purged yet: free the key.
        Message.objects.filter(
            from_project=sender,
            idempotency_key=idempotency_key,
            idempotency_principal=principal.key,
        ).update(idempotency_key=None, idempotency_principal=None)
        _send_commit(principal, message, activities, from_session)
    message._state.adding = False
    message._state.db = DEFAULT_DB_ALIAS
    if reply_accepted(message):
        # After the commit, off the send's statements (docs/reference.md#the-decisions-register).
        decision_register_record(message, actor=actor)
    return Sent(message)  # its to_project and from_project carry their workspaces already


def _decision_deadline(decision: Decision, sent_at: datetime) -> datetime | None:
    """The deadline of a question sent at ``sent_at``, written into ``decision`` as an
    RFC 3339 instant (docs/reference.md#deadlines), or None without one. A deadline that
    does not parse or falls outside 60 s .. 30 days, or an ``on_deadline`` the question
    does not offer or without a deadline, refuses the send (BadRequest)."""
    written, fallback = decision.get("deadline"), decision.get("on_deadline")
    if fallback is not None and fallback not in [option["id"] for option in decision["options"]]:
        offered = ", ".join(option["id"] for option in decision["options"]) or "none"
        raise BadRequest(
            f"on_deadline {fallback[:60]!r} is not an option this question offers "
            f"(offered: {offered}); nothing was sent",
            code=Code.INVALID_DECISION,
        )
    if written is None:
        if fallback is not None:
            raise BadRequest(
                "on_deadline needs a deadline; nothing was sent", code=Code.INVALID_DECISION
            )
        return None
    try:
        deadline = deadline_resolve(written, sent_at)
    except ValueError as exc:
        raise BadRequest(f"{exc}; nothing was sent", code=Code.INVALID_DECISION) from None
    decision["deadline"] = deadline_text(deadline)
    return deadline


def _send_commit(
    principal: Principal,
    message: Message,
    activities: list[Activity],
    session: AgentSession | None,
) -> None:
    recipient = message.to_project
    # Built before the transaction: on SQLite every writer waits for the one before it
    # to commit, so nothing but the statements themselves belongs inside.
    statements = _send_statements(message, activities)
    with _write_block(one_query=True):
        inserted, heard, wake = _insert_within_bound(statements)
        if not inserted:
            raise Conflict(
                f"the inbox of {recipient} is full: {MAX_PENDING_PER_INBOX} messages are "
                "pending. Retry after its agents pop some, or cancel messages you sent there.",
                code=Code.INBOX_FULL,
            )
        admission_observe(MESSAGE_SEND, principal=principal, project=recipient, session=session)
    if heard:
        wake_publish([inbox_topic(recipient.pk)])
    if wake:
        # After the commit, in a transaction of its own (docs/reference.md#wake-webhooks).
        wake_schedule(recipient.pk)


def _write_block(*, one_query: bool) -> contextlib.AbstractContextManager[Any]:
    """The transaction a send's or a pop's writes run in: ``transaction.atomic(durable=
    True)``, or none where they are ``one_query`` on PostgreSQL, which the server runs as
    one implicit transaction: no BEGIN and COMMIT, two round trips fewer. (Observers,
    outside a transaction, then hear of it at once: it has committed.) Inside a
    transaction (a test's) the durable block is a savepoint, which keeps a failed
    statement (a racing retry's key) from aborting the outer one."""
    if one_query and connection.vendor == "postgresql" and not connection.in_atomic_block:
        return contextlib.nullcontext()
    return transaction.atomic(durable=True)


def _send_of_key(sender: Project, principal: Principal, key: str) -> Message | None:
    """The message ``principal`` sent as ``sender`` with ``key`` within the retry window,
    if any."""
    return (
        Message.objects.filter(
            from_project=sender,
            idempotency_key=key,
            idempotency_principal=principal.key,
            created_at__gte=timezone.now() - RETRY_WINDOW,
        )
        .only("id", "omitted_chars", "redactions")
        .first()
    )


def _reply_valid(sender: Project, in_reply_to: uuid.UUID) -> bool:
    """A reply must answer a message its sending project sent or received."""
    return (
        Message.objects.filter(pk=in_reply_to)
        .filter(Q(from_project=sender) | Q(to_project=sender))
        .exists()
    )


def _question_link(sender: Project, question_id: str) -> uuid.UUID | None:
    """The ``in_reply_to`` a decision reply sent without one gets: its question's id, when
    that is a valid ``in_reply_to`` for ``sender`` (docs/reference.md#waiting-and-waking);
    else None, and the reply is sent unlinked."""
    try:
        question = uuid.UUID(question_id)
    except ValueError:
        return None
    return question if _reply_valid(sender, question) else None


def _reply_check(sender: Project, in_reply_to: uuid.UUID) -> None:
    if not _reply_valid(sender, in_reply_to):
        raise BadRequest(
            f"in_reply_to {in_reply_to} names no message that {sender} sent or received",
            code=Code.INVALID_IN_REPLY_TO,
        )


_Statement = tuple[str, list[Any]]


def _send_statements(message: Message, activities: list[Activity]) -> list[_Statement]:
    """The statements of a send, in order; the first decides whether it inserted.

    The count and the insert are one guarded ``INSERT ... SELECT ... WHERE (pending
    count) < bound``, which the ORM cannot say. Concurrent senders to one inbox must not
    both pass the count: on SQLite the IMMEDIATE transaction already holds the database's
    single write lock, and the activity rows follow in a second statement; on PostgreSQL
    a row lock on the recipient serialises them, taken by a statement of its own before
    the insert, so that the insert's snapshot (one per statement, under READ COMMITTED)
    sees every message committed before the lock was granted, and one statement does the
    guarded insert and the activity rows only if it inserted. The two go to PostgreSQL
    as one query string, one round trip and one implicit transaction: the lock is held to
    its end, and an error in the insert rolls back both. (That needs the simple query
    protocol, which Django's default client-side binding uses.)

    A question also inserts its background task's row (``question_task_row``) with the
    activity rows, only if the message was inserted: one commit, and the task exists if
    and only if the question does (docs/reference.md#notifications).

    The activity rows' statement also answers whether the recipient has an enabled wake
    webhook with no wake queued (``wake_needed_sql``; docs/reference.md#wake-webhooks):
    an index probe in a statement the send runs anyway (its ``RETURNING`` on SQLite),
    no statement more; the wake itself is queued after the commit.
    """
    task = None if message.decision is None else insert_parts([question_task_row(message)])[2][0]
    [values] = insert_parts([message])[2]
    activity_values = insert_parts(activities)[2]
    count_params = [
        *pending_in_inbox_params(message.to_project_id, message.created_at),
        MAX_PENDING_PER_INBOX,
    ]
    activity_params = [value for row in activity_values for value in row]
    if connection.vendor != "postgresql":
        sql = _send_sql(connection.vendor, len(activities), None, task is not None)
        wake_params = wake_needed_params(message.to_project_id)
        statements = [
            (sql[0], [*values, *count_params]),
            (sql[1], [*activity_params, *wake_params]),
        ]
        if task is not None:
            statements.append((sql[2], task))
        return statements
    unheard = wake_unheard_sql("%s")
    sql = _send_sql(connection.vendor, len(activities), unheard, task is not None)
    params = [message.to_project_id, *values, *count_params, *activity_params, *(task or [])]
    if unheard is not None:
        params.append(inbox_topic(message.to_project_id))
    params.extend(wake_needed_params(message.to_project_id))
    return [(sql[0], params)]


@functools.cache
def _send_sql(
    vendor: str, activity_count: int, unheard: str | None, with_task: bool
) -> tuple[str, ...]:
    """The statements of ``_send_statements`` on ``vendor``, built once: two on SQLite
    (three ``with_task``), the activity rows' answering whether a wake webhook is to be
    woken; one query string of two statements on PostgreSQL, whose answer is whether it
    inserted, with ``unheard`` (``wake_unheard_sql`` of the inbox's topic) whether no one
    can be waiting on the inbox, and whether a wake webhook is to be woken."""
    table, columns = insert_columns(Message)
    activity_table, activity_columns = insert_columns(Activity)
    count_sql = f"SELECT COUNT(*) FROM {table} WHERE {PENDING_IN_INBOX_SQL}"
    field_count = len(Message._meta.concrete_fields)
    if vendor != "postgresql":
        return (
            f"INSERT INTO {table} ({columns}) SELECT {placeholders(field_count)} "
            f"WHERE ({count_sql}) < %s",
            f"{insert_values_sql(Activity, activity_count)} RETURNING {wake_needed_sql()}",
            *([insert_values_sql(DBTaskResult)] if with_task else []),
        )
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
    activity_inserts = ", ".join(follow)
    return (
        f"SELECT 1 FROM {Project._meta.db_table} WHERE id = %s FOR NO KEY UPDATE; "
        f"WITH m AS (INSERT INTO {table} ({columns}) SELECT {typed_placeholders(Message)} "
        f"WHERE ({count_sql}) < %s RETURNING 1), {activity_inserts} "
        f"SELECT COUNT(*), {unheard or 'false'}, {wake_needed_sql()} FROM m",
    )


def _insert_within_bound(statements: list[_Statement]) -> tuple[bool, bool, bool]:
    """Run a send's statements unless the inbox is full; say whether it inserted,
    whether a call may be waiting on the inbox (``wake_unheard_sql``: no publication is
    needed when its statement says none can be; else, or without one, it is), and
    whether a wake webhook of the recipient is to be woken (``wake_needed_sql``).

    On SQLite this must run inside the send's transaction; on PostgreSQL it is one.
    """
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            (insert, insert_params), (activity, activity_params), *following = statements
            cursor.execute(insert, insert_params)
            if cursor.rowcount != 1:
                return False, True, False
            cursor.execute(activity, activity_params)  # answers the wake webhook's question
            wake = any(row[0] for row in cursor.fetchall())
            for sql, params in following:  # a question's task
                cursor.execute(sql, params)
            return True, True, wake
        [(lock_and_insert, params)] = statements
        cursor.execute(lock_and_insert, params)
        cursor.nextset()  # past the lock's result, to the insert's count
        inserted, unheard, wake = cursor.fetchone()
        return inserted == 1, not unheard, inserted == 1 and bool(wake)


def message_pop(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    message_id: str | None = None,
    session: AgentSession | None = None,
    request_id: str | None = None,
    wait_seconds: object = None,
    in_reply_to: str | None = None,
    client_gone: Callable[[], bool] | None = None,
) -> Message | None:
    """Claim the oldest pending message in the caller's inbox (or the named one), once.

    The guarded ``UPDATE ... WHERE state='pending'`` decides the claim on every database;
    a caller that loses the race gets None and never sees the body. On PostgreSQL the
    candidate is also row-locked with SKIP LOCKED so concurrent poppers spread over the
    queue instead of queueing on its head. ``in_reply_to`` restricts the candidates to
    replies to that message. A pop whose ``request_id`` the same principal used on this
    inbox within 24 hours answers what that pop claimed (the message again, or None) and
    claims nothing new (another principal's id is a pop of its own); its record is
    written first in the claim's transaction, so a retry racing the first call waits on
    its unique constraint and then answers what that call claimed. Deciding admission
    webhooks run before the claim, and the claim is committed when this returns, so this
    must not be called inside ``transaction.atomic`` (where there is one, the durable
    block raises ``RuntimeError``). Three statements: the access query, the claim (which
    returns the row and its sender's names), and the activity row, which PostgreSQL
    writes in the claim's statement, outside any transaction block; a request id adds its
    look-up, and in one transaction with the claim its record and, when something was
    claimed, the record's message.

    ``wait_seconds`` (clamped to 0..60; 0 answers at once, as above) parks the call when
    nothing can be claimed, and every send to the inbox sends it back to try the claim
    once more, until it claims or the time is up (docs/reference.md#waiting-and-waking).
    Once ``client_gone`` says the caller has gone, it claims nothing more. A waiting pop
    with a request id records its claim with the claim, but "nothing" only when its time
    is up (a look that claims nothing rolls its record back), so a retry sent while it is
    still parked parks too: whichever claims first records the message and both answer
    it, and if the first's time runs out first, the retry answers None at its next look.
    A call whose client has gone records nothing: its retry waits afresh. Nothing reads
    ``principal`` before the access query, which confirms an anonymous caller not yet
    confirmed (``principal_of(request, access_confirms=True)``).
    """
    named = message_id_parse(message_id)
    reply_to = in_reply_to_parse(in_reply_to)
    request_id = request_id_parse(request_id)
    wait = wait_seconds_parse(wait_seconds)
    inbox = project_access(principal, workspace, project, need=Level.WRITE)
    if request_id is not None:
        seen, earlier = _pop_of_request(inbox, principal, request_id)
        if seen:
            return earlier
    # Decided once per call: a waiting pop's later runs (docs/serving.md#the-loop) are
    # its looks, not new pops.
    once_per_call(
        lambda: admission_decide(MESSAGE_POP, principal=principal, project=inbox, session=session),
        client_gone,
    )
    pop = _Pop(principal, inbox, named, reply_to, session, session_agent(session), request_id)
    if not wait:
        popped = pop.claim(keep_nothing=True)
        assert popped is not None  # "nothing" is kept, so it is an answer too
        return popped.message
    if client_gone is not None and client_gone():
        return None  # gone before it could look: a claim would be lost with the answer

    answer = wait_for(
        lambda: pop.claim(keep_nothing=False),
        topics=[inbox_topic(inbox.pk)],
        wait_seconds=wait,
        caller=principal.wait_key,
        recheck=lambda: project_access_again(principal, workspace, project, need=Level.WRITE),
        # Any plain pop can claim any message of the inbox, so a send wakes one of them;
        # a pop for one message, or for replies to one, is woken by every send.
        claimer=named is None and reply_to is None,
        client_gone=client_gone,
    )
    if answer is not None:
        return answer.message
    if request_id is None or (client_gone is not None and client_gone()):
        return None
    return pop.nothing_keep()


@dataclass(frozen=True)
class _Popped:
    """What a pop answers: the message it claimed (or that its request id claimed), or
    None for nothing."""

    message: Message | None


@dataclass(frozen=True)
class _Pop:
    """One pop's claim, as ``message_pop`` tries it (once, or at every wake)."""

    principal: Principal
    inbox: Project
    named: uuid.UUID | None
    reply_to: uuid.UUID | None
    session: AgentSession | None
    agent: str
    request_id: str | None

    def claim(self, *, keep_nothing: bool) -> _Popped | None:
        """Try the claim once; its answer, or None when nothing was claimed and
        ``keep_nothing`` is false (no record kept: the caller may look again)."""
        try:
            return self._commit(keep_nothing)
        except IntegrityError:
            if self.request_id is None:
                raise
            seen, earlier = _pop_of_request(self.inbox, self.principal, self.request_id)
            if seen:
                return _Popped(earlier)  # a retry of this pop took the id first
            # The id's record is older than the window and not purged yet: free the id.
            self._records().delete()
            return self._commit(keep_nothing)

    def nothing_keep(self) -> Message | None:
        """Record that this pop claimed nothing (its wait ended empty); what a retry that
        recorded first claimed, if one did."""
        assert self.request_id is not None
        for _attempt in range(2):
            try:
                with transaction.atomic(durable=True):
                    PopRequest.objects.create(
                        inbox=self.inbox,
                        principal_key=self.principal.key,
                        request_id=self.request_id,
                    )
                return None
            except IntegrityError:
                seen, earlier = _pop_of_request(self.inbox, self.principal, self.request_id)
                if seen:
                    return earlier
                self._records().delete()  # older than the window, not purged yet
        return None

    def _records(self) -> Any:
        return PopRequest.objects.filter(
            inbox=self.inbox, principal_key=self.principal.key, request_id=self.request_id
        )

    def _commit(self, keep_nothing: bool) -> _Popped | None:
        principal, inbox, session, request_id = (
            self.principal,
            self.inbox,
            self.session,
            self.request_id,
        )
        # Built before the transaction, as a send's statements are: on SQLite every
        # writer waits while this one holds the write lock, so only the statements run
        # inside, and the claimed row is read into a Message after the commit.
        sql, params = _claim_statement(
            inbox, self.named, self.reply_to, session, self.agent, principal.owner_name or ""
        )
        activity = activity_new(
            project=inbox,
            kind=Activity.Kind.MESSAGE_CLAIMED,
            actor=_actor(principal, self.agent),
            summary="message claimed",
        )
        [activity_values] = insert_parts([activity])[2]
        # A request id's record joins the claim in one transaction; without one, the
        # claim and its activity row are one statement on PostgreSQL. The record is
        # written before the claim: a racing retry of this pop then waits on its unique
        # index and reads what this one claimed. Written after, a retry that found every
        # row locked by in-flight claims (SKIP LOCKED) could commit "nothing" first and
        # take the id.
        try:
            with _write_block(one_query=request_id is None):
                record = (
                    None
                    if request_id is None
                    else PopRequest.objects.create(
                        inbox=inbox, principal_key=principal.key, request_id=request_id
                    )
                )
                row, heard = _claim_run(sql, params, activity_values)
                if record is not None and row is not None:
                    PopRequest.objects.filter(pk=record.pk).update(
                        message_id=uuid_of(row[_MESSAGE_COLUMN["id"]])
                    )
                if row is None:
                    if record is not None and not keep_nothing:
                        raise _NothingClaimed  # rolls the record back
                    return _Popped(None) if keep_nothing else None
                admission_observe(MESSAGE_POP, principal=principal, project=inbox, session=session)
        except _NothingClaimed:
            return None
        claimed = _claimed_message(row, inbox)
        if heard:
            wake_publish([message_topic(claimed.id)])
        return _Popped(claimed)


class _NothingClaimed(Exception):
    """Raised inside a waiting pop's transaction to roll back its request id's record."""


def _pop_of_request(
    inbox: Project, principal: Principal, request_id: str
) -> tuple[bool, Message | None]:
    """Whether ``principal`` popped ``inbox`` with ``request_id`` within the window, and
    what that pop claimed."""
    record = (
        PopRequest.objects.filter(
            inbox=inbox,
            principal_key=principal.key,
            request_id=request_id,
            created_at__gte=timezone.now() - RETRY_WINDOW,
        )
        .select_related("message__from_project__workspace")
        .first()
    )
    if record is None:
        return False, None
    claimed = record.message
    if claimed is not None:
        claimed.to_project = inbox  # already loaded, with its workspace
    return True, claimed


def retry_ids_purge() -> tuple[int, int]:
    """Forget send keys and pop request ids older than the retry window.

    Returns (keys cleared, request ids deleted). Run by ``manage.py purge_retry_ids``
    and by the server's housekeeping (``messaging.housekeeping``), off every request's
    path.
    """
    cutoff = timezone.now() - RETRY_WINDOW
    keys = Message.objects.filter(idempotency_key__isnull=False, created_at__lt=cutoff).update(
        idempotency_key=None, idempotency_principal=None
    )
    requests, _ = PopRequest.objects.filter(created_at__lt=cutoff).delete()
    return keys, requests


# Where a claim's row and an activity row hold the values the claim fills in.
_MESSAGE_COLUMN = {field.attname: n for n, field in enumerate(Message._meta.concrete_fields)}
_ACTIVITY_COLUMN = {field.attname: n for n, field in enumerate(Activity._meta.concrete_fields)}
_CLAIMED_AT_PARAM = 1  # in the claim's parameters, after the state
# The moment a candidate must not have expired by: the claim's own, after the 5 assignments.
_CLAIM_NOW_PARAM = 5 + PENDING_IN_INBOX_NOW_PARAM


def _claim_statement(
    inbox: Project,
    message_id: uuid.UUID | None,
    reply_to: uuid.UUID | None,
    session: AgentSession | None,
    agent: str,
    user: str,
) -> tuple[str, list[Any]]:
    """The claim of the oldest pending message of ``inbox`` (or ``message_id``; only a
    reply to ``reply_to`` if given) and its parameters; ``_claim_run`` fills in the
    claim's moment. ``claim_oldest_sql`` holds the rule."""
    params: list[Any] = [
        Message.State.CLAIMED,
        None,  # claimed_at
        session.pk if session is not None else None,
        agent,
        user,
        *pending_in_inbox_params(inbox.pk, None),  # its moment: ``_claim_run``'s
    ]
    if message_id is not None:
        params.append(db_value(Message, "id", message_id))
    if reply_to is not None:
        params.append(db_value(Message, "in_reply_to", reply_to))
    params.append(Message.State.PENDING)
    sql = _claim_sql(
        connection.vendor,
        named=message_id is not None,
        reply=reply_to is not None,
        unheard=wake_unheard_sql(message_topic_sql("c.id")),
    )
    return sql, params


def _claim_run(
    sql: str, params: list[Any], activity_values: list[Any]
) -> tuple[Sequence[Any] | None, bool]:
    """Claim, and record the claim in ``activity_values``'s row; the claimed row (its
    columns, then its sender's names) or None when nothing was claimed, and whether a
    call may be waiting on the claimed message (``wake_unheard_sql``: no publication is
    needed when its statement says none can be; else, or without one, it is).

    Must run inside the pop's transaction, or on PostgreSQL in autocommit (one statement).
    The claim's moment, which the activity row shares, is taken here: on SQLite once the
    write lock is held, so it never comes before the claimed message's ``created_at``;
    on PostgreSQL just before the statement. There the claim and the activity row are
    one statement; on SQLite (no ``INSERT`` inside a ``WITH``) the activity row follows,
    its counterpart the sender the claim returned.
    """
    moment = db_value(Message, "claimed_at", timezone.now())
    params[_CLAIMED_AT_PARAM] = moment
    # The expiry is judged at the claim's moment, inside its guarded statement: a message
    # whose time has passed is never claimed, swept by ``messages_expire`` or not.
    params[_CLAIM_NOW_PARAM] = moment
    activity_values[_ACTIVITY_COLUMN["created_at"]] = moment
    counterpart = _ACTIVITY_COLUMN["counterpart_id"]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            del activity_values[counterpart]  # the statement takes it from the claimed row
            cursor.execute(sql, [*params, *activity_values])
            answer = cursor.fetchone()
            return (None, False) if answer is None else (answer[:-1], not answer[-1])
        cursor.execute(sql, params)
        row: Sequence[Any] | None = cursor.fetchone()
        if row is None:
            return None, False
        activity_values[counterpart] = row[_MESSAGE_COLUMN["from_project_id"]]
        cursor.execute(insert_values_sql(Activity), activity_values)
        return row, True


def _claimed_message(row: Sequence[Any], inbox: Project) -> Message:
    """The Message of a claimed row, with its sender's project and workspace (which came
    back as extra columns of the row), so nothing is read again."""
    claimed, (sender_name, sender_workspace_id, sender_workspace_name) = model_from_row(
        Message, row
    )
    claimed.from_project = project_from_values(
        project_id=claimed.from_project_id,
        workspace_id=sender_workspace_id,
        name=sender_name,
        workspace_name=sender_workspace_name,
    )
    claimed.to_project = inbox  # already loaded, with its workspace
    return claimed


@functools.cache
def _claim_sql(vendor: str, *, named: bool, reply: bool, unheard: str | None) -> str:
    """The claim of ``_claim_statement`` on ``vendor``, of the named message or the oldest
    (of the replies to a message, with ``reply``), and on PostgreSQL the activity row with
    it and, last, ``unheard`` (``wake_unheard_sql`` of the claimed message's topic, or
    false); built once."""
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
            f"{sender.format(column='w.name')} AS sender_workspace_name",
        )
    # The sender's names by one join after the claim, not three subqueries in its
    # RETURNING: PostgreSQL plans every statement anew (the binding is the client's), and
    # the subqueries cost a third of the claim's planning.
    claim = claim_oldest_sql(Message, assignments=assignments, candidates=candidates)
    activity_table, activity_columns = insert_columns(Activity)
    values = typed_placeholders(Activity, instead={"counterpart_id": "c.from_project_id"})
    return (
        f"WITH c AS ({claim}), a AS (INSERT INTO {activity_table} ({activity_columns}) "
        f"SELECT {values} FROM c) SELECT c.*, p.name, w.id, w.name, {unheard or 'false'} "
        f"FROM c LEFT JOIN {projects} p ON p.id = c.from_project_id "
        f"LEFT JOIN {workspaces} w ON w.id = p.workspace_id"
    )


_IN_REPLY_TO_COLUMN = Message._meta.get_field("in_reply_to").column


def message_cancel(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    message_id: str | None = None,
) -> int:
    """Cancel pending messages sent from the caller's project: one by id, else all.

    Returns how many changed state. Only the sender's coordinate matches, so a recipient
    cancelling gets 0; a claimed message is never touched. Deciding admission webhooks
    run before the cancel, so this must not be called inside ``transaction.atomic`` (the durable
    block raises ``RuntimeError`` if it is). Once committed, the status calls parked on
    the cancelled messages are woken.
    """
    named = message_id_parse(message_id)
    outbox = project_access(principal, workspace, project, need=Level.WRITE)
    # No session reaches cancel, so admission sees the agent as "other".
    admission_decide(MESSAGE_CANCEL, principal=principal, project=outbox, session=None)
    with transaction.atomic(durable=True):
        pending = Message.objects.pending().outbox_of(outbox)
        if named is not None:
            pending = pending.filter(pk=named)
        cancelled_ids = _cancel_returning_ids(pending)
        cancelled = len(cancelled_ids)
        if cancelled:
            noun = "message" if cancelled == 1 else "messages"
            activity_record(
                project=outbox,
                kind=Activity.Kind.MESSAGE_CANCELLED,
                actor=principal.display_name,
                summary=f"{cancelled} {noun} cancelled",
            )
            admission_observe(MESSAGE_CANCEL, principal=principal, project=outbox, session=None)
    wake_publish(message_topic(cancelled_id) for cancelled_id in cancelled_ids)
    return cancelled


def _cancel_returning_ids(pending: QuerySet[Message]) -> list[uuid.UUID]:
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
