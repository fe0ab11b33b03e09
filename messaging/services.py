"""Writes for messages: send, claim-once pop and cancel.

Every surface (JSON API, MCP, CLI through the API) calls these, so the rules live here
once: access, scrubbing and caps, the inbox bound, the claim and the audit trail.
"""

from __future__ import annotations

import re
import uuid

from django.db import transaction
from django.utils import timezone

from aimemory_site.lib.errors import BadRequest, Code, Conflict
from aimemory_site.lib.limits import text_cap, truncation_marker
from aimemory_site.lib.principal import Principal
from messaging.admission import admission_decide, admission_observe
from messaging.admission_config import MESSAGE_CANCEL, MESSAGE_POP, MESSAGE_SEND
from messaging.limits import (
    BODY_MAX_CHARS,
    MAX_PENDING_PER_INBOX,
    SCRUB_MARGIN_CHARS,
    SCRUB_WINDOW_CHARS,
    SUBJECT_MAX_CHARS,
)
from messaging.models import Message
from messaging.scrubbing import scrubber_configured
from projects.access import Level, project_access
from projects.models import Activity, AgentSession, Project
from projects.services import activity_record, session_agent

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def message_id_parse(value: str | None) -> uuid.UUID | None:
    """Parse an optional message id, or raise BadRequest: ids are full UUIDs."""
    if value is None:
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        raise BadRequest(
            f"message_id must be a full UUID, got {value[:60]!r}", code=Code.INVALID_MESSAGE_ID
        ) from None


def subject_clean(subject: str | None) -> str:
    """Scrub, flatten to one line and cap a subject; a missing one is empty."""
    if subject is None:
        return ""
    line = _CONTROL_CHARS.sub(" ", scrubber_configured().scrub(subject)).strip()
    if len(line) > SUBJECT_MAX_CHARS:
        # One line by contract, so no multi-line marker: an ellipsis marks the cut.
        line = line[: SUBJECT_MAX_CHARS - 1].rstrip() + "…"
    return line


def body_clean(body: str) -> str:
    """Scrub then cap a body. Scrubbing first means a secret cut at the cap never leaks."""
    if not body.strip():
        raise BadRequest("body must not be empty", code=Code.EMPTY_BODY)
    scrubber = scrubber_configured()
    if len(body) <= SCRUB_WINDOW_CHARS:
        return text_cap(scrubber.scrub(body), BODY_MAX_CHARS, "message body")
    window = scrubber.scrub(body[:SCRUB_WINDOW_CHARS])
    kept = window[: min(BODY_MAX_CHARS, len(window) - SCRUB_MARGIN_CHARS)]
    omitted = len(window) - len(kept) + len(body) - SCRUB_WINDOW_CHARS
    return kept + truncation_marker("message body", omitted)


def _actor(principal: Principal, agent: str) -> str:
    return f"{principal.display_name} ({agent})"


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
) -> Message:
    """Put a message in the recipient's inbox, or raise and write nothing.

    Needs write on the recipient, which must exist (a typo is rejected, never turned into
    a dead inbox), and write on the sender: signing as a project is acting as it.
    Deciding admission webhooks run before anything is written, so this must not be
    called inside ``transaction.atomic`` (the durable block raises ``RuntimeError`` if it
    is).
    """
    recipient = project_access(principal, to_workspace, to_project, need=Level.WRITE)
    sender = project_access(principal, from_workspace, from_project, need=Level.WRITE)
    clean_body = body_clean(body)
    clean_subject = subject_clean(subject)
    agent = session_agent(from_session)
    admission_decide(MESSAGE_SEND, principal=principal, project=recipient, session=from_session)
    with transaction.atomic(durable=True):
        # Count-then-insert must not race. On PostgreSQL the row lock on the recipient
        # serialises senders to one inbox; on SQLite the IMMEDIATE transaction already
        # holds the database's single write lock.
        list(
            Project.objects.select_for_update(no_key=True)
            .filter(pk=recipient.pk)
            .values_list("pk", flat=True)
        )
        if Message.objects.pending().inbox_of(recipient).count() >= MAX_PENDING_PER_INBOX:
            raise Conflict(
                f"the inbox of {recipient} is full: {MAX_PENDING_PER_INBOX} messages are "
                "pending. Retry after its agents pop some, or cancel messages you sent there.",
                code=Code.INBOX_FULL,
            )
        message = Message.objects.create(
            to_project=recipient,
            from_project=sender,
            from_agent=agent,
            from_owner_user=principal.owner_name or "",
            from_session=from_session,
            subject=clean_subject,
            body=clean_body,
        )
        actor = _actor(principal, agent)
        activity_record(
            project=sender,
            kind=Activity.Kind.MESSAGE_SENT,
            actor=actor,
            summary="message sent",
            counterpart=recipient,
        )
        activity_record(
            project=recipient,
            kind=Activity.Kind.MESSAGE_RECEIVED,
            actor=actor,
            summary="message received",
            counterpart=sender,
        )
        admission_observe(
            MESSAGE_SEND, principal=principal, project=recipient, session=from_session
        )
    return message  # its to_project and from_project carry their workspaces already


def message_pop(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    message_id: uuid.UUID | None = None,
    session: AgentSession | None = None,
) -> Message | None:
    """Claim the oldest pending message in the caller's inbox (or the named one), once.

    The guarded ``UPDATE ... WHERE state='pending'`` decides the claim on every database;
    a caller that loses the race gets None and never sees the body. On PostgreSQL the
    candidate is also row-locked with SKIP LOCKED so concurrent poppers spread over the
    queue instead of queueing on its head. Deciding admission webhooks run before the
    claim, so this must not be called inside ``transaction.atomic`` (the durable
    block raises ``RuntimeError`` if it is).
    """
    inbox = project_access(principal, workspace, project, need=Level.WRITE)
    admission_decide(MESSAGE_POP, principal=principal, project=inbox, session=session)
    agent = session_agent(session)
    while True:
        with transaction.atomic(durable=True):
            candidates = Message.objects.pending().inbox_of(inbox)
            if message_id is not None:
                candidates = candidates.filter(pk=message_id)
            candidate = (
                candidates.oldest_first()
                .select_for_update(skip_locked=True, no_key=True)
                .values_list("pk", flat=True)
                .first()
            )
            if candidate is None:
                return None
            # The guard: only a row still pending changes, so exactly one caller wins it.
            won = (
                Message.objects.pending()
                .filter(pk=candidate)
                .update(
                    state=Message.State.CLAIMED,
                    claimed_at=timezone.now(),
                    claimed_by_session=session,
                    claimed_by_agent=agent,
                    claimed_by_user=principal.owner_name or "",
                )
            )
            if won == 1:
                claimed = Message.objects.select_related("from_project__workspace").get(
                    pk=candidate
                )
                claimed.to_project = inbox  # already loaded, with its workspace
                activity_record(
                    project=inbox,
                    kind=Activity.Kind.MESSAGE_CLAIMED,
                    actor=_actor(principal, agent),
                    summary="message claimed",
                    counterpart=claimed.from_project,
                )
                admission_observe(MESSAGE_POP, principal=principal, project=inbox, session=session)
                return claimed
        if message_id is not None:
            return None  # the named message went to another caller
        # Lost the race for this candidate: another caller claimed it. Try the next one;
        # each lap means one more message left the queue, so this ends.


def message_cancel(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    message_id: uuid.UUID | None = None,
) -> int:
    """Cancel pending messages sent from the caller's project: one by id, else all.

    Returns how many changed state. Only the sender's coordinate matches, so a recipient
    cancelling gets 0; a claimed message is never touched. Deciding admission webhooks
    run before the cancel, so this must not be called inside ``transaction.atomic`` (the durable
    block raises ``RuntimeError`` if it is).
    """
    outbox = project_access(principal, workspace, project, need=Level.WRITE)
    # No session reaches cancel, so admission sees the agent as "other".
    admission_decide(MESSAGE_CANCEL, principal=principal, project=outbox, session=None)
    with transaction.atomic(durable=True):
        pending = Message.objects.pending().outbox_of(outbox)
        if message_id is not None:
            pending = pending.filter(pk=message_id)
        cancelled = pending.update(state=Message.State.CANCELLED, cancelled_at=timezone.now())
        if cancelled:
            noun = "message" if cancelled == 1 else "messages"
            activity_record(
                project=outbox,
                kind=Activity.Kind.MESSAGE_CANCELLED,
                actor=principal.display_name,
                summary=f"{cancelled} {noun} cancelled",
            )
            admission_observe(MESSAGE_CANCEL, principal=principal, project=outbox, session=None)
    return cancelled
