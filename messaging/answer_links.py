"""Where a person answers a question away from the asking agent
(docs/reference.md#decisions-reach-the-person): the answer page's public URL, and the
answer links (docs/reference.md#answer-links).

URLs here are absolute, made from ``AI_MEMORY_PUBLIC_URL``: they go into notifications and
tool results read far from any request. Without it they are None, and whoever shows them
says that links need ``AI_MEMORY_PUBLIC_URL``.

An answer link's token names one question, one option and one user, signed with the
server's key (``SECRET_KEY``) under a salt of its own, so no other signed value of the
server passes for one; it carries its own expiry, so no table remembers links. Whether
the link may still send (answered, closed, the user's right) is read when it is used.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.urls import reverse
from django.utils import timezone

from messaging.answer_selectors import decision_of, question_deadline
from messaging.models import Message
from projects.auth import auth_enabled

#: What a notification or a tool result says in place of a link when there is no public URL.
LINKS_NEED_PUBLIC_URL = "links need AI_MEMORY_PUBLIC_URL (the address people reach this server at)"


def public_url(path: str) -> str | None:
    """``path`` (from ``reverse``) under ``AI_MEMORY_PUBLIC_URL``; None when it is unset."""
    base = settings.AI_MEMORY_PUBLIC_URL
    return f"{base}{path}" if base else None


def answer_page_url(question: Message) -> str | None:
    """The answer page of ``question`` (section "The answer page"), absolute; None without
    ``AI_MEMORY_PUBLIC_URL``. Precondition: ``question.to_project`` comes with its
    workspace."""
    mailbox = question.to_project
    return public_url(
        reverse(
            "webui:decision",
            kwargs={
                "workspace": mailbox.workspace.name,
                "project": mailbox.name,
                "question_id": question.pk,
            },
        )
    )


# Answer links -------------------------------------------------------------------------

ANSWER_LINK_SALT = "messaging.answer_links.answer_link"
#: A link lasts this long after it is made, or until the question's deadline if sooner.
ANSWER_LINK_MAX_AGE = timedelta(days=7)


class AnswerLinksOff(Exception):
    """An answer link was asked of an anonymous server, which never makes one."""


@dataclass(frozen=True)
class AnswerLink:
    """What a valid token names: answer ``question_id`` with ``option_id`` as the user
    ``user_id``, until ``expires_at``."""

    token: str
    question_id: uuid.UUID
    option_id: str
    user_id: int
    expires_at: datetime

    @property
    def idempotency_key(self) -> str:
        """The retry key of the one answer this link sends: two POSTs of one link (a
        double click, a resend) are one answer."""
        return f"answer-link:{hashlib.sha256(self.token.encode()).hexdigest()[:48]}"


def answer_link_make(question: Message, option_id: str, user: User) -> str:
    """The token of the answer link that answers ``question`` with ``option_id`` as
    ``user``: valid for ``ANSWER_LINK_MAX_AGE`` from now, or until the question's deadline
    if that comes first.

    Raises ``AnswerLinksOff`` on an anonymous server (links are never made there) and
    ValueError for an option the question does not offer. Whether ``user`` may answer is
    the caller's to know (who is told of a question: ``answer_refusal``) and is checked
    again when the link is used. Precondition: ``question`` is a question. At most one
    query (whether authentication is on).
    """
    if not auth_enabled():
        raise AnswerLinksOff("answer links are never made on a server without authentication")
    offered = [option["id"] for option in decision_of(question)["options"]]
    if option_id not in offered:
        raise ValueError(f"option {option_id!r} is not one the question offers ({offered})")
    expires_at = timezone.now() + ANSWER_LINK_MAX_AGE
    deadline = question_deadline(question)
    if deadline is not None:
        expires_at = min(expires_at, deadline)
    claims = {
        "q": question.pk.hex,
        "o": option_id,
        "u": user.pk,
        "e": int(expires_at.timestamp()),
    }
    return signing.dumps(claims, salt=ANSWER_LINK_SALT)


def answer_link_read(token: str) -> AnswerLink | None:
    """What ``token`` names, or None (the link is a 404 that tells nothing) when it was
    not made by this server's key and salt, was altered, is malformed, or has expired,
    and on an anonymous server. At most one query (whether authentication is on)."""
    try:
        claims = signing.loads(token, salt=ANSWER_LINK_SALT)
    except signing.BadSignature:
        return None
    if not isinstance(claims, dict):
        return None
    question, option, user, expires = (claims.get(key) for key in ("q", "o", "u", "e"))
    if not (
        isinstance(question, str)
        and isinstance(option, str)
        and isinstance(user, int)
        and isinstance(expires, int)
    ):
        return None
    try:
        question_id = uuid.UUID(hex=question)
    except ValueError:
        return None
    expires_at = datetime.fromtimestamp(expires, tz=UTC)
    if timezone.now() >= expires_at or not auth_enabled():
        return None
    return AnswerLink(
        token=token,
        question_id=question_id,
        option_id=option,
        user_id=user,
        expires_at=expires_at,
    )


def answer_link_url(question: Message, option_id: str, user: User) -> str | None:
    """The answer link of (``question``, ``option_id``, ``user``), absolute; None without
    ``AI_MEMORY_PUBLIC_URL`` and on an anonymous server, where links are never made.
    Raises ValueError for an option the question does not offer. Precondition:
    ``question`` is a question."""
    if not settings.AI_MEMORY_PUBLIC_URL:
        return None
    try:
        token = answer_link_make(question, option_id, user)
    except AnswerLinksOff:
        return None
    return public_url(reverse("webui:answer-link", kwargs={"token": token}))
