"""message_pop: claim once, only from the caller's own inbox."""

from __future__ import annotations

from uuid import UUID

import pytest

from aimemory_site.lib.errors import Forbidden
from messaging.models import Message
from messaging.services import message_pop
from projects.models import Activity, Project
from tests.conftest import Persona
from tests.messaging.conftest import ANON, send


def _text(message_id: UUID | None) -> str | None:
    return None if message_id is None else str(message_id)


def pop(project: str = "project-b", message_id: UUID | None = None) -> Message | None:
    return message_pop(
        principal=ANON, workspace="default", project=project, message_id=_text(message_id)
    )


def test_send_then_pop_delivers_exactly_once(project_a: Project, project_b: Project) -> None:
    sent = send("do the thing", subject="thing")
    claimed = pop()
    assert claimed is not None
    assert claimed.id == sent.id
    assert claimed.state == Message.State.CLAIMED
    assert claimed.claimed_at is not None
    assert (claimed.body, claimed.subject) == ("do the thing", "thing")
    assert claimed.from_project == project_a


def test_second_pop_returns_nothing(project_a: Project, project_b: Project) -> None:
    send()
    assert pop() is not None
    assert pop() is None


def test_pop_takes_the_oldest_first(project_a: Project, project_b: Project) -> None:
    first, second = send("first"), send("second")
    assert pop() == first
    assert pop() == second


def test_a_message_is_only_visible_to_its_recipient(
    project_a: Project, project_b: Project, project_c: Project
) -> None:
    sent = send()
    assert pop("project-c") is None
    assert pop("project-c", message_id=sent.id) is None
    assert pop("project-a") is None
    assert pop("project-b") == sent


def test_pop_can_target_a_specific_message_id(project_a: Project, project_b: Project) -> None:
    first, second = send("first"), send("second")
    assert pop(message_id=second.id) == second
    assert Message.objects.get(pk=first.pk).state == Message.State.PENDING
    assert pop() == first


def test_pop_of_a_cancelled_message_returns_nothing(project_a: Project, project_b: Project) -> None:
    sent = send()
    Message.objects.filter(pk=sent.pk).update(state=Message.State.CANCELLED)
    assert pop(message_id=sent.id) is None
    assert pop() is None


def test_pop_records_the_claimer(project_a: Project, project_b: Project, alice: Persona) -> None:
    send()
    claimed = message_pop(principal=alice.principal, workspace="default", project="project-b")
    assert claimed is not None
    assert claimed.claimed_by_user == "alice"
    entry = Activity.objects.get(kind=Activity.Kind.MESSAGE_CLAIMED)
    assert entry.project == project_b
    assert entry.counterpart == project_a
    assert entry.created_at == claimed.claimed_at  # one moment, taken with the claim


def test_pop_needs_write_on_the_inbox(
    alice: Persona, bob: Persona, alices_restricted: Project, alices_open: Project
) -> None:
    send(to="alpha", sender="commons", principal=alice.principal)
    with pytest.raises(Forbidden):
        message_pop(principal=bob.principal, workspace="default", project="alpha")
    assert Message.objects.get().state == Message.State.PENDING
