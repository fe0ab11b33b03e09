"""Writes for messages: send, claim-once pop and cancel.

Every surface (JSON API, MCP, CLI through the API) calls these, so the rules live here
once: access, scrubbing and caps, the inbox bound, the claim and the audit trail.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

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
from aimemory_site.lib.wakeups import (
    inbox_topic,
    message_topic,
    once_per_call,
    wait_for,
    wait_seconds_parse,
    wake_publish,
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
    Message,
    PopRequest,
)
from messaging.register_services import decision_register_record
from messaging.statements import (
    Claim,
    Send,
    cancel_returning_ids,
    claimed_id,
    claimed_message,
    write_block,
)
from messaging.tasks import wake_schedule
from projects.access import (
    Level,
    project_access,
    project_access_again,
    projects_access,
)
from projects.models import Activity, AgentSession, Project
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
    send = Send.of(message, activities)
    with write_block(one_query=True):
        outcome = send.run()
        if not outcome.inserted:
            raise Conflict(
                f"the inbox of {recipient} is full: {MAX_PENDING_PER_INBOX} messages are "
                "pending. Retry after its agents pop some, or cancel messages you sent there.",
                code=Code.INBOX_FULL,
            )
        admission_observe(MESSAGE_SEND, principal=principal, project=recipient, session=session)
    if outcome.heard:
        wake_publish([inbox_topic(recipient.pk)])
    if outcome.wake:
        # After the commit, in a transaction of its own (docs/reference.md#wake-webhooks).
        wake_schedule(recipient.pk)


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
        claim = Claim.of(
            inbox,
            self.named,
            self.reply_to,
            session_id=session.pk if session is not None else None,
            agent=self.agent,
            user=principal.owner_name or "",
            activity=activity_new(
                project=inbox,
                kind=Activity.Kind.MESSAGE_CLAIMED,
                actor=_actor(principal, self.agent),
                summary="message claimed",
            ),
            # Whether the caller may see the sender named (``names_shown``) then needs
            # no query when the sender is open or the caller's own.
            sender_access=principal.user is not None and not principal.sees_everything,
        )
        # A request id's record joins the claim in one transaction; without one, the
        # claim and its activity row are one statement on PostgreSQL. The record is
        # written before the claim: a racing retry of this pop then waits on its unique
        # index and reads what this one claimed. Written after, a retry that found every
        # row locked by in-flight claims (SKIP LOCKED) could commit "nothing" first and
        # take the id.
        try:
            with write_block(one_query=request_id is None):
                record = (
                    None
                    if request_id is None
                    else PopRequest.objects.create(
                        inbox=inbox, principal_key=principal.key, request_id=request_id
                    )
                )
                row, heard = claim.run()
                if record is not None and row is not None:
                    PopRequest.objects.filter(pk=record.pk).update(message_id=claimed_id(row))
                if row is None:
                    if record is not None and not keep_nothing:
                        raise _NothingClaimed  # rolls the record back
                    return _Popped(None) if keep_nothing else None
                admission_observe(MESSAGE_POP, principal=principal, project=inbox, session=session)
        except _NothingClaimed:
            return None
        claimed = claimed_message(row, inbox)
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
        cancelled_ids = cancel_returning_ids(pending)
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
