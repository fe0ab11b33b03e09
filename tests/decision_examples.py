"""Operator decisions the tests share: one that the surface tests send and read back (its
question, the body the writer makes of it, and the decision every list and pop row must
carry), and the question most decision tests ask, with its send (``question_send``), and
the asker taking its answer (``answer_taken``)."""

from __future__ import annotations

from typing import Any

from aimemory_site.lib.decisions import decision_body_write, decision_subject
from aimemory_site.lib.principal import Principal
from messaging.models import Message
from messaging.services import message_cancel, message_pop, message_send

MERGE_QUESTION = "Merge the export branch?"
MERGE_SUBJECT = decision_subject(MERGE_QUESTION)
MERGE_BODY = decision_body_write(
    MERGE_QUESTION,
    [{"id": "merge", "label": "Merge: now", "recommended": True}, {"id": "wait"}],
    requires_root=True,
    reply_project="default/project-a",
)
# What the parser reads back: the options' defaults filled in.
MERGE_DECISION: dict[str, Any] = {
    "question": MERGE_QUESTION,
    "requires_root": True,
    "reply_project": "default/project-a",
    "options": [
        {"id": "merge", "label": "Merge: now", "description": None, "recommended": True},
        {"id": "wait", "label": "wait", "description": None, "recommended": False},
    ],
    "details": None,
    "links": [],
}


# The question most decision tests ask: an orchestrator stops for a person at the operator.
FLAKE_QUESTION = "Accept the known-flake exception on the export test?"
FLAKE_OPTIONS: list[dict[str, Any]] = [
    {"id": "accept", "label": "Accept the exception", "recommended": True},
    {"id": "reject", "label": "Send it back", "description": "The test has to be stable."},
]


def question_send(
    question: str = FLAKE_QUESTION,
    options: list[dict[str, Any]] = FLAKE_OPTIONS,
    *,
    subject: str = "Accept the known-flake exception?",
    to: str = "default/operator",
    sender: str = "default/orchestrator",
    requires_root: bool = False,
    reply_project: str = "default/orchestrator",
    **fields: Any,
) -> Message:
    """``question`` with ``options`` sent as root from ``sender`` to the mailbox ``to``,
    written by the one writer (``fields``: ``details``, ``links``, ``deadline``,
    ``on_deadline``)."""
    to_workspace, to_project = to.split("/")
    from_workspace, from_project = sender.split("/")
    return message_send(
        principal=Principal.root(),
        to_workspace=to_workspace,
        to_project=to_project,
        from_workspace=from_workspace,
        from_project=from_project,
        subject=decision_subject(subject),
        body=decision_body_write(
            question, options, requires_root=requires_root, reply_project=reply_project, **fields
        ),
    ).message


def answer_taken(question: Message, reply: Message, asker: str = "default/orchestrator") -> None:
    """The ``asker`` takes the answer ``reply`` to ``question`` as ``decision wait`` does:
    pops the reply and cancels the question (as root)."""
    workspace, project = asker.split("/")
    root = Principal.root()
    message_pop(principal=root, workspace=workspace, project=project, message_id=str(reply.pk))
    message_cancel(
        principal=root, workspace=workspace, project=project, message_id=str(question.pk)
    )
