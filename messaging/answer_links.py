"""Where a person answers a question away from the asking agent
(docs/reference.md#decisions-reach-the-person): the answer page's public URL.

URLs here are absolute, made from ``AI_MEMORY_PUBLIC_URL``: they go into notifications and
tool results read far from any request. Without it they are None, and whoever shows them
says that links need ``AI_MEMORY_PUBLIC_URL``.
"""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse

from messaging.models import Message

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
