"""Answering an operator decision (docs/reference.md#operator-decisions, the answer page).

The answer is an ordinary send through ``message_send``: the mailbox project that holds
the question signs a ``decision-reply: <id>`` to the question's ``reply_project``, in the
answering user's name, so admission webhooks, scrubbing, the caps and the inbox bound
apply as to any message. Answering never pops or cancels the question: the asker does
that once it accepts the reply (``ai-memory decision wait``).
"""

from __future__ import annotations

import contextlib
import secrets
import uuid
from collections.abc import Iterator
from datetime import timedelta

from django.core import signing

from aimemory_site.lib.decisions import ReplyVia, decision_reply_subject, decision_reply_write
from aimemory_site.lib.errors import BadRequest, Code, Conflict
from aimemory_site.lib.key_locks import KeyLockTimeout, key_lock
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.text import text_invalid
from messaging.answer_selectors import (
    answer_refusal,
    decision_of,
    decision_pending,
    decision_replies,
    reply_accepted,
)
from messaging.arguments import idempotency_key_parse
from messaging.models import Message
from messaging.services import Sent, message_send
from projects.models import Project


def decision_answer(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    question_id: uuid.UUID,
    option: str,
    comment: str = "",
    again: bool = False,
    idempotency_key: str | None = None,
    via: ReplyVia = "web",
) -> Sent:
    """Send ``principal``'s answer to question ``question_id`` in the inbox of the mailbox
    ``workspace/project``, or raise and send nothing.

    Refused, in this order: a mailbox the caller may not read (NotFound, as if missing);
    an id that is not a pending decision question in its inbox (BadRequest); a caller
    ``answer_refusal`` refuses (Forbidden; BadRequest when the ``reply_project`` is
    missing); an option the question does not offer, or text no request may carry
    (BadRequest); an earlier accepted answer from this mailbox when ``again`` is not set
    (Conflict), so that a second answer is always a choice. The same ``idempotency_key``
    (one per rendered form) answers the first reply again and sends nothing, so a
    double-submitted form is one answer. Calls ``message_send``, so it must not run inside
    ``transaction.atomic``. ``via`` is the route the person answered by (the answer page,
    an answer link, an elicitation).
    """
    mailbox, question = decision_pending(principal, workspace, project, question_id)
    decision = decision_of(question)
    refusal = answer_refusal(principal, mailbox, question)
    if refusal is not None:
        raise refusal
    offered = [choice["id"] for choice in decision["options"]]
    if option not in offered:
        shown = ", ".join(offered) or "none"
        raise BadRequest(
            f"option {option[:60]!r} is not one this question offers (offered: {shown})"
            if option
            else f"choose one of the options this question offers ({shown})",
            code=Code.UNKNOWN_OPTION,
        )
    if text_invalid(comment):
        raise BadRequest(
            "the comment holds a NUL character or a lone surrogate, which no text here may "
            "contain; nothing was sent",
            code=Code.INVALID_TEXT,
        )
    key = idempotency_key_parse(idempotency_key)
    reply_workspace, _, reply_project = (decision["reply_project"] or "").partition("/")
    with _answer_turn(question_id):
        if not again:
            _answered_already_check(principal, mailbox, question_id, key)
        return message_send(
            principal=principal,
            to_workspace=reply_workspace,
            to_project=reply_project,
            from_workspace=workspace,
            from_project=project,
            subject=decision_reply_subject(str(question_id)),
            body=decision_reply_write(str(question_id), option, comment),
            in_reply_to=str(question_id),
            idempotency_key=key,
            reply_via=via,
        )


#: How long an answer waits while another answer to the same question is being sent.
ANSWER_TURN_SECONDS = 5.0


@contextlib.contextmanager
def _answer_turn(question_id: uuid.UUID) -> Iterator[None]:
    """Answers to one question are checked and sent one at a time, on every host
    (docs/reference.md#answer-links): whether an accepted answer exists is read by the
    holder, whose own send commits before the next holder reads, so racing first answers
    (an answer link and the answer page, two people) are one answer and one Conflict.
    Raises Conflict, sending nothing, when another answer holds the turn too long."""
    try:
        with key_lock(f"decision-answer:{question_id}", timeout=ANSWER_TURN_SECONDS):
            yield
    except KeyLockTimeout:
        raise Conflict(
            "another answer to this question is being sent at this moment; nothing was "
            "sent. Look at the question again in a moment: it may be answered already."
        ) from None


def decision_answerable(
    *, principal: Principal, workspace: str, project: str, question_id: uuid.UUID
) -> Message:
    """The pending question ``question_id`` in the inbox of ``workspace/project``, when
    ``principal`` may answer it now, for a form shown before the person chooses; else
    raise what ``decision_answer`` raises before it looks at the option: NotFound,
    BadRequest for no pending decision question, ``answer_refusal``'s error, Conflict
    for an earlier accepted answer from this mailbox. Sends nothing."""
    mailbox, question = decision_pending(principal, workspace, project, question_id)
    refusal = answer_refusal(principal, mailbox, question)
    if refusal is not None:
        raise refusal
    _answered_already_check(principal, mailbox, question_id, None)
    return question


def _answered_already_check(
    principal: Principal, mailbox: Project, question_id: uuid.UUID, key: str | None
) -> None:
    """Raise Conflict when an accepted answer to ``question_id`` left ``mailbox`` already,
    unless it is ``principal``'s own send with retry ``key``. Precondition: ``mailbox``
    comes with its workspace."""
    replies = decision_replies(mailbox, question_id)
    # A retry is this principal's own earlier answer with the same key: another user's
    # key is a different send, so it must not skip the already-answered check.
    is_retry = key is not None and any(
        reply.idempotency_key == key and reply.idempotency_principal == principal.key
        for reply in replies
    )
    # Only an accepted answer counts: a forged or refused reply answered nothing.
    earlier = [reply for reply in replies if reply_accepted(reply)]
    if earlier and not is_retry:
        raise Conflict(
            f"this question was answered already ({len(earlier)} answer"
            f"{'' if len(earlier) == 1 else 's'} from {mailbox.workspace.name}/{mailbox.name}); "
            "confirm to send another, which the asker receives as a further reply",
            code=Code.DECISION_ALREADY_ANSWERED,
        )


# The requestState of an answer form shown in the agent client
# (docs/reference.md#memory_decision_answer): signed under the server's key with a salt
# of its own, so no other signed value of the server passes for one.
ANSWER_STATE_SALT = "messaging.answer_services.answer_state"
ANSWER_STATE_MAX_AGE = timedelta(minutes=10)


def answer_state_issue(
    *, principal: Principal, workspace: str, project: str, question_id: uuid.UUID
) -> str:
    """The opaque state of one answer form for ``principal`` on question ``question_id``
    in the mailbox ``workspace/project``: signed, valid for ``ANSWER_STATE_MAX_AGE``,
    and good for one send (``decision_answer_by_form``). Precondition:
    ``decision_answerable`` let ``principal`` answer the question."""
    claims = {
        "p": principal.key,
        "m": f"{workspace}/{project}",
        "q": str(question_id),
        "n": secrets.token_urlsafe(16),
    }
    return signing.dumps(claims, salt=ANSWER_STATE_SALT, compress=True)


def answer_state_check(
    state: str, *, principal: Principal, workspace: str, project: str, question_id: uuid.UUID
) -> str:
    """The retry key of the one send ``state`` allows, or raise BadRequest
    (``invalid_request_state``) when ``state`` was altered, has expired, or was issued to
    another principal or for another question or mailbox. Whether it was spent is told
    by the send (``decision_answer_by_form``)."""
    try:
        claims = signing.loads(state, salt=ANSWER_STATE_SALT, max_age=ANSWER_STATE_MAX_AGE)
    except signing.SignatureExpired:
        raise BadRequest(
            "this answer form expired (a form lasts 10 minutes); nothing was sent. Call "
            "memory_decision_answer again to show the person a new one.",
            code=Code.INVALID_REQUEST_STATE,
        ) from None
    except signing.BadSignature:
        claims = None
    expected = {"p": principal.key, "m": f"{workspace}/{project}", "q": str(question_id)}
    nonce = claims.get("n") if isinstance(claims, dict) else None
    if not isinstance(nonce, str) or any(claims.get(k) != v for k, v in expected.items()):
        raise BadRequest(
            "requestState is not one this server issued to you for this question in "
            f"{workspace}/{project}; nothing was sent. Call memory_decision_answer again "
            "to show the person a new form.",
            code=Code.INVALID_REQUEST_STATE,
        )
    return f"elicitation:{nonce}"


def decision_answer_by_form(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    question_id: uuid.UUID,
    state: str,
    option: str,
    comment: str = "",
) -> Sent:
    """Send the answer a person gave in the form ``state`` belongs to, as ``principal``
    with ``via`` ``elicitation``, or raise and send nothing: ``answer_state_check``'s
    refusal, everything ``decision_answer`` refuses, and BadRequest
    (``invalid_request_state``) for a state that already sent its answer (its key
    replays that send, even under concurrent retries). Calls ``message_send``, so it must
    not run inside ``transaction.atomic``."""
    key = answer_state_check(
        state, principal=principal, workspace=workspace, project=project, question_id=question_id
    )
    sent = decision_answer(
        principal=principal,
        workspace=workspace,
        project=project,
        question_id=question_id,
        option=option,
        comment=comment,
        idempotency_key=key,
        via="elicitation",
    )
    if sent.replay:
        raise BadRequest(
            f"this answer form was answered already (reply {sent.message.pk}); a form "
            "answers once, so nothing was sent again.",
            code=Code.INVALID_REQUEST_STATE,
        )
    return sent
