"""Threads (docs/reference.md#search-and-threads): the message an ``in_reply_to`` chain
starts from and every answer to it, oldest first, only the caller's project's mail."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from aimemory_site.lib.errors import BadRequest, Code, NotFound
from aimemory_site.lib.principal import Principal
from messaging.models import Message
from messaging.search import message_thread
from projects.models import Project
from tests.conftest import Persona, make_project
from tests.messaging.conftest import ANON, send

pytestmark = pytest.mark.django_db


def _thread(
    message: Message | str, project: str = "project-b", principal: Principal = ANON
) -> list[Message]:
    message_id = message if isinstance(message, str) else str(message.pk)
    return message_thread(principal, workspace="default", project=project, message_id=message_id)


def _reply(to: Message, body: str, *, sender: str, recipient: str, **extra: object) -> Message:
    return send(body, to=recipient, sender=sender, in_reply_to=str(to.pk), **extra)  # type: ignore[arg-type]


@pytest.fixture
def chain(project_a: Project, project_b: Project) -> list[Message]:
    """a asks b, b answers, a answers the answer, b answers the question again."""
    question = send("question", to="project-b", sender="project-a")
    answer = _reply(question, "answer", sender="project-b", recipient="project-a")
    follow_up = _reply(answer, "follow-up", sender="project-a", recipient="project-b")
    second = _reply(question, "second answer", sender="project-b", recipient="project-a")
    return [question, answer, follow_up, second]


def test_the_thread_starts_at_the_chain_start_oldest_first(chain: list[Message]) -> None:
    for member in chain:
        assert _thread(member) == chain
        assert _thread(member, project="project-a") == chain


def test_a_message_without_replies_is_a_thread_of_one(
    project_a: Project, project_b: Project
) -> None:
    alone = send("alone")
    assert _thread(alone) == [alone]


def test_the_thread_comes_with_its_projects(chain: list[Message]) -> None:
    thread = _thread(chain[2])
    with CaptureQueriesContext(connection) as queries:
        names = [(m.from_project.workspace.name, m.to_project.name) for m in thread]
    assert len(queries.captured_queries) == 0
    assert names[0] == ("default", "project-b")


def test_only_the_callers_projects_messages_are_shown(
    chain: list[Message], project_c: Project
) -> None:
    # b forwards the question to c, c answers b, and b answers a.
    to_c = _reply(chain[0], "asked c", sender="project-b", recipient="project-c")
    from_c = _reply(to_c, "c says", sender="project-c", recipient="project-b")
    to_a = _reply(from_c, "c said", sender="project-b", recipient="project-a")
    assert _thread(chain[1], project="project-b") == [*chain, to_c, from_c, to_a]
    assert _thread(chain[1], project="project-a") == [*chain, to_a]
    assert _thread(from_c, project="project-c") == [to_c, from_c]


def test_an_unknown_or_unseen_message_is_the_status_404(
    chain: list[Message], project_c: Project
) -> None:
    for message_id, project in (
        ("0190f3a0-0000-7000-8000-000000000000", "project-b"),
        (str(chain[0].pk), "project-c"),
    ):
        with pytest.raises(NotFound) as caught:
            _thread(message_id, project=project)
        assert caught.value.code == Code.MESSAGE_NOT_FOUND
        assert str(message_id) in caught.value.message


def test_a_malformed_id_is_a_bad_request(project_b: Project) -> None:
    with pytest.raises(BadRequest) as caught:
        _thread("not-an-id")
    assert caught.value.code == Code.INVALID_MESSAGE_ID


def test_a_purged_start_leaves_the_rest_of_the_thread(chain: list[Message]) -> None:
    Message.objects.filter(pk=chain[0].pk).delete()
    assert _thread(chain[2]) == [chain[1], chain[2]]
    assert _thread(chain[3]) == [chain[3]]


def test_a_thread_is_bounded(
    project_a: Project, project_b: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from messaging import search

    monkeypatch.setattr(search, "THREAD_MAX_MESSAGES", 5)
    now = timezone.now()
    messages = [send("start")]
    for n in range(9):
        sender, recipient = ("project-b", "project-a") if n % 2 == 0 else ("project-a", "project-b")
        messages.append(_reply(messages[-1], f"reply {n}", sender=sender, recipient=recipient))
    for n, message in enumerate(messages):
        Message.objects.filter(pk=message.pk).update(created_at=now + timedelta(seconds=n))
    thread = _thread(messages[-1])
    # Five up from the last (its start is out of reach), five down from there.
    assert len(thread) == 5
    assert thread == sorted(thread, key=lambda m: (m.created_at, m.pk))


# Personas: a chain through a project the caller cannot read.


def test_a_chain_through_a_project_alice_cannot_read_shows_only_hers(
    alice: Persona, bob: Persona, charlie: Persona
) -> None:
    make_project(alice, "default", "mine", restricted=True)
    make_project(bob, "default", "bobs", restricted=True)
    make_project(charlie, "default", "open-desk")  # open: both may write to it
    root = Principal.root()
    # bob's private project asks the open desk, which asks alice's project; alice answers
    # the desk, the desk answers bob.
    first = send("bob's private question", to="open-desk", sender="bobs", principal=root)
    relay = _reply(first, "desk asks mine", sender="open-desk", recipient="mine", principal=root)
    alice_answer = _reply(
        relay, "mine answers", sender="mine", recipient="open-desk", principal=root
    )
    to_bob = _reply(
        alice_answer, "desk tells bob", sender="open-desk", recipient="bobs", principal=root
    )
    thread = message_thread(
        alice.principal, workspace="default", project="mine", message_id=str(alice_answer.pk)
    )
    assert thread == [relay, alice_answer]
    shown = " ".join(f"{m.body} {m.subject} {m.from_project} {m.to_project}" for m in thread)
    assert "bob" not in shown
    # bob's own view of the same thread, from a message alice never saw.
    assert message_thread(
        bob.principal, workspace="default", project="bobs", message_id=str(to_bob.pk)
    ) == [first, to_bob]
    with pytest.raises(NotFound) as caught:
        message_thread(
            alice.principal, workspace="default", project="mine", message_id=str(first.pk)
        )
    assert caught.value.code == Code.MESSAGE_NOT_FOUND


def test_charlie_gets_the_project_404_for_a_thread(
    alice: Persona, charlie: Persona, alices_restricted: Project
) -> None:
    message = send("private", to="alpha", sender="alpha", principal=alice.principal)
    with pytest.raises(NotFound) as restricted:
        message_thread(
            charlie.principal, workspace="default", project="alpha", message_id=str(message.pk)
        )
    with pytest.raises(NotFound) as missing:
        message_thread(
            charlie.principal, workspace="default", project="nowhere", message_id=str(message.pk)
        )
    assert restricted.value.code == missing.value.code == Code.PROJECT_NOT_FOUND
