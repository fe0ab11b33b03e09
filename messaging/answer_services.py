"""Answering an operator decision (docs/reference.md#operator-decisions, the answer page).

The answer is an ordinary send through ``message_send``: the mailbox project that holds
the question signs a ``decision-reply: <id>`` to the question's ``reply_project``, in the
answering user's name, so admission webhooks, scrubbing, the caps and the inbox bound
apply as to any message. Answering never pops or cancels the question: the asker does
that once it accepts the reply (``ai-memory decision wait``).
"""

from __future__ import annotations

import uuid

from aimemory_site.lib.decisions import ReplyVia, decision_reply_subject, decision_reply_write
from aimemory_site.lib.errors import BadRequest, Code, Conflict
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.text import text_invalid
from messaging.answer_selectors import (
    answer_refusal,
    decision_of,
    decision_question,
    decision_replies,
    not_a_pending_decision,
    reply_accepted,
)
from messaging.arguments import idempotency_key_parse
from messaging.services import Sent, message_send
from projects.access import Level, project_access


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
    mailbox = project_access(principal, workspace, project, need=Level.READ)
    question = decision_question(mailbox, question_id)
    if question is None or not question.is_pending():
        raise not_a_pending_decision(mailbox, question_id)
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
    replies = decision_replies(mailbox, question_id)
    # A retry is this principal's own earlier answer with the same key: another user's
    # key is a different send, so it must not skip the already-answered check.
    is_retry = key is not None and any(
        reply.idempotency_key == key and reply.idempotency_principal == principal.key
        for reply in replies
    )
    # Only an accepted answer counts: a forged or refused reply answered nothing.
    earlier = [reply for reply in replies if reply_accepted(reply)]
    if earlier and not again and not is_retry:
        raise Conflict(
            f"this question was answered already ({len(earlier)} answer"
            f"{'' if len(earlier) == 1 else 's'} from {workspace}/{project}); confirm to "
            "send another, which the asker receives as a further reply",
            code=Code.DECISION_ALREADY_ANSWERED,
        )
    reply_workspace, _, reply_project = (decision["reply_project"] or "").partition("/")
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
