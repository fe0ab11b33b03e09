"""The decisions register (docs/reference.md#the-decisions-register): an accepted answer
to a decision question, kept as the page ``_decisions/<question id>`` of the project that
asked, once.

``message_send`` calls ``decision_register_record`` after an accepted reply's send has
committed, off the send's own statements; a send that is no accepted reply costs nothing
here. The page is written through the page services' create-only path, so the first
accepted answer stays and a later one (or a racing one) changes nothing.
"""

from __future__ import annotations

import logging
import uuid

from aimemory_site.lib.decision_register import RegisterEntry, register_body_write, register_path
from messaging.answer_selectors import decision_of, reply_accepted
from messaging.models import Message
from projects.page_services import page_create_once

logger = logging.getLogger(__name__)


def decision_register_record(reply: Message, *, actor: str) -> bool:
    """``decision_register_write``, with a failure logged rather than raised: the reply
    is sent whether or not its answer could be recorded. Whether it wrote the page."""
    try:
        return decision_register_write(reply, actor=actor)
    except Exception:
        logger.exception(
            "the decisions register could not record reply %s (the reply was sent)", reply.pk
        )
        return False


def decision_register_write(reply: Message, *, actor: str) -> bool:
    """Write the register page of the question ``reply`` answers in the project that asked
    (the reply's recipient), unless the question has one; whether this call wrote it.

    Records the question, its options, the chosen option, the comment, the answering user
    (the reply's ``from_owner_user``) and project (its sender), the route (``via``), and
    when the question was asked and the reply sent; ``actor`` is who Recent Activity says
    wrote the page. Nothing for a reply the server did not accept, or whose question is
    gone. One query (the question), then the page's create.

    Preconditions: ``reply`` was sent and its send committed, and it carries its
    ``to_project`` and ``from_project`` with their workspaces (``message_send``'s does).
    """
    if not reply_accepted(reply):
        return False
    judged = reply.decision_reply
    assert isinstance(judged, dict)
    try:
        question_pk = uuid.UUID(judged["question_id"])
    except ValueError:
        return False
    # The verdict found this question before the send; the same conditions find it again.
    question = (
        Message.objects.filter(
            pk=question_pk,
            to_project=reply.from_project_id,
            from_project=reply.to_project_id,
            decision__isnull=False,
        )
        .only("id", "created_at", "decision")
        .first()
    )
    if question is None:
        return False
    decision = decision_of(question)
    answerer = reply.from_project
    entry = RegisterEntry(
        question_id=str(question.pk),
        question=decision["question"],
        options=decision["options"],
        option=judged["option"],
        comment=judged["comment"],
        user=reply.from_owner_user,
        project=f"{answerer.workspace.name}/{answerer.name}",
        via=judged.get("via") or "message",
        asked_at=question.created_at,
        answered_at=reply.created_at,
    )
    return page_create_once(
        project=reply.to_project,
        path=register_path(entry.question_id),
        body=register_body_write(entry),
        actor=actor,
        agent=reply.from_agent,
        user=reply.from_owner_user,
    )
