"""message_cancel: only the sender retracts, and only pending messages."""

from __future__ import annotations

from uuid import UUID

from messaging.models import Message
from messaging.services import message_cancel, message_pop
from projects.models import Activity, Project
from tests.messaging.conftest import ANON, send


def _text(message_id: UUID | None) -> str | None:
    return None if message_id is None else str(message_id)


def cancel(project: str, message_id: UUID | None = None) -> int:
    return message_cancel(
        principal=ANON, workspace="default", project=project, message_id=_text(message_id)
    )


def test_sender_can_cancel_a_pending_message_before_it_is_popped(
    project_a: Project, project_b: Project
) -> None:
    sent = send()
    assert cancel("project-a", message_id=sent.id) == 1
    assert Message.objects.get(pk=sent.pk).state == Message.State.CANCELLED
    assert message_pop(principal=ANON, workspace="default", project="project-b") is None


def test_cancel_all_clears_the_outbox(
    project_a: Project, project_b: Project, project_c: Project
) -> None:
    send("one")
    send("two", to="project-c")
    send("from b", to="project-c", sender="project-b")
    assert cancel("project-a") == 2
    assert Message.objects.filter(state=Message.State.PENDING).count() == 1
    assert Activity.objects.get(kind=Activity.Kind.MESSAGE_CANCELLED).summary == (
        "2 messages cancelled"
    )


def test_recipient_cannot_cancel_the_senders_outbox(project_a: Project, project_b: Project) -> None:
    send()
    assert cancel("project-b") == 0
    assert message_pop(principal=ANON, workspace="default", project="project-b") is not None


def test_recipient_cannot_cancel_a_specific_message_by_id(
    project_a: Project, project_b: Project
) -> None:
    sent = send()
    assert cancel("project-b", message_id=sent.id) == 0
    assert message_pop(principal=ANON, workspace="default", project="project-b") == sent


def test_a_claimed_message_cannot_be_cancelled(project_a: Project, project_b: Project) -> None:
    sent = send()
    message_pop(principal=ANON, workspace="default", project="project-b")
    assert cancel("project-a", message_id=sent.id) == 0
    assert cancel("project-a") == 0
    assert Message.objects.get(pk=sent.pk).state == Message.State.CLAIMED
    assert not Activity.objects.filter(kind=Activity.Kind.MESSAGE_CANCELLED).exists()
