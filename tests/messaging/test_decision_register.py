"""The decisions register (docs/reference.md#the-decisions-register): an accepted answer,
by any route, is kept once as the page ``_decisions/<question id>`` of the asking project.

The mailbox is alice's restricted ``default/operator``; the asker is her restricted
``default/orchestrator``, as in test_decision_answer.
"""

from __future__ import annotations

import logging
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from aimemory_site.lib.decisions import (
    decision_reply_subject,
    decision_reply_write,
)
from aimemory_site.lib.principal import Principal
from messaging import register_services
from messaging.answer_services import decision_answer
from messaging.models import Message
from messaging.services import message_send
from projects.brief_selectors import brief_compile
from projects.models import Activity, Grant, Page, Project
from projects.page_services import page_create_once
from tests.conftest import ApiCall, Persona, make_project
from tests.decision_examples import FLAKE_QUESTION as QUESTION
from tests.decision_examples import question_send
from webui.templatetags.webui import markdown

MAILBOX: dict[str, Any] = {"workspace": "default", "project": "operator"}
REPLY_ROUTE: dict[str, Any] = {
    "to_workspace": "default",
    "to_project": "orchestrator",
    "from_workspace": "default",
    "from_project": "operator",
}


@pytest.fixture
def operator(alice: Persona) -> Project:
    return make_project(alice, "default", "operator", restricted=True)


@pytest.fixture
def orchestrator(alice: Persona) -> Project:
    return make_project(alice, "default", "orchestrator", restricted=True)


def ask(*, requires_root: bool = False) -> Message:
    """The orchestrator's question to the operator, sent as root."""
    return question_send(requires_root=requires_root)


def reply(principal: Principal, question: Message, option: str, comment: str = "") -> Message:
    """A reply sent with ``message_send`` itself (as the MCP tool does)."""
    return message_send(
        principal=principal,
        **REPLY_ROUTE,
        subject=decision_reply_subject(str(question.pk)),
        body=decision_reply_write(str(question.pk), option, comment),
    ).message


def register_pages(project: Project) -> list[Page]:
    return list(Page.objects.filter(project=project, path__startswith="_decisions/"))


def moment(message: Message) -> str:
    return f"{message.created_at:%Y-%m-%dT%H:%M:%SZ}"


def expected_body(
    question: Message,
    answer: Message,
    *,
    option: str,
    comment_lines: list[str],
    user: str | None,
    via: str,
) -> str:
    chosen = {"accept": "Accept the exception", "reject": "Send it back"}[option]
    marks = {"accept": "", "reject": "", option: ", chosen"}
    return "\n".join(
        [
            f"# Decision: {QUESTION}",
            "",
            f"- Chosen option: {chosen}",
            f"- Option id: {option}",
            *([f"- Answered by: {user}"] if user else []),
            "- Answered from: default/operator",
            f"- Via: {via}",
            f"- Asked: {moment(question)}",
            f"- Answered: {moment(answer)}",
            f"- Question id: {question.pk}",
            "",
            "## Options",
            "",
            f"- Accept the exception (option accept, recommended{marks['accept']})",
            f"- Send it back (option reject{marks['reject']}): The test has to be stable.",
            "",
            "## Comment",
            "",
            *comment_lines,
            "",
        ]
    )


# Every route writes the page ----------------------------------------------------------


@pytest.mark.django_db
def test_an_answer_on_the_answer_page_writes_the_page_in_the_asking_project(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()

    sent = decision_answer(
        principal=alice.principal,
        **MAILBOX,
        question_id=question.pk,
        option="accept",
        comment="Accepting.\nThe flake is written down.",
    ).message

    page = Page.objects.get(project=orchestrator, path=f"_decisions/{question.pk}")
    assert page.body == expected_body(
        question,
        sent,
        option="accept",
        comment_lines=["~~~", "Accepting.\nThe flake is written down.", "~~~"],
        user="alice",
        via="web",
    )
    assert (page.pinned, page.updated_by_user) == (False, "alice")
    assert register_pages(operator) == []  # the mailbox keeps no register
    written = Activity.objects.get(project=orchestrator, kind=Activity.Kind.PAGE_WRITTEN)
    assert written.summary == f"page _decisions/{question.pk} created"
    assert written.actor == "alice (other)"


@pytest.mark.django_db
def test_a_rest_send_of_an_accepted_reply_writes_the_page(
    api: ApiCall, alice: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()
    body = f"question_id: {question.pk}\noption: reject\ncomment: not without a fix"

    status, answer = api(
        "post",
        "/api/v1/messages",
        {**REPLY_ROUTE, "subject": f"decision-reply: {question.pk}", "body": body},
        token=alice.token,
    )

    assert status == 201, answer
    sent = Message.objects.get(pk=answer["message_id"])
    [page] = register_pages(orchestrator)
    assert page.body == expected_body(
        question,
        sent,
        option="reject",
        comment_lines=["~~~", "not without a fix", "~~~"],
        user="alice",
        via="message",
    )


@pytest.mark.django_db
def test_the_cli_send_of_an_answer_writes_the_page_naming_the_project_without_a_user(
    api: ApiCall, auth_on: str, alice: Persona, operator: Project, orchestrator: Project
) -> None:
    """What ``ai-memory decision answer`` posts, with the root token: no user to name."""
    question = ask()

    status, answer = api(
        "post",
        "/api/v1/messages",
        {
            **REPLY_ROUTE,
            "subject": decision_reply_subject(str(question.pk)),
            "body": decision_reply_write(str(question.pk), "accept", ""),
            "in_reply_to": str(question.pk),
            "idempotency_key": f"cli-{uuid.uuid4()}",
        },
        token=auth_on,
    )

    assert status == 201, answer
    sent = Message.objects.get(pk=answer["message_id"])
    [page] = register_pages(orchestrator)
    assert page.path == f"_decisions/{question.pk}"
    assert page.body == expected_body(
        question, sent, option="accept", comment_lines=["(no comment)"], user=None, via="message"
    )
    brief = brief_compile(orchestrator)
    assert brief is not None
    assert (
        f"Recent decisions:\n- {QUESTION} -> Accept the exception "
        f"({sent.created_at:%Y-%m-%d}, default/operator)"
    ) in brief


@pytest.mark.django_db
def test_the_brief_of_the_asking_project_shows_the_answer(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()
    sent = reply(alice.principal, question, "reject")

    brief = brief_compile(orchestrator)

    assert brief is not None
    line = f"- {QUESTION} -> Send it back ({sent.created_at:%Y-%m-%d}, alice)"
    assert f"Recent decisions:\n{line}" in brief
    assert f"_decisions/{question.pk} (" in brief  # and the page is pointed at


# What writes nothing ----------------------------------------------------------------------


@pytest.mark.django_db
def test_a_refused_reply_writes_nothing(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()
    rooted = ask(requires_root=True)

    offered_none = reply(alice.principal, question, "maybe")
    not_root = reply(alice.principal, rooted, "accept")
    nothing_asked = str(uuid.uuid4())
    unasked = message_send(
        principal=alice.principal,
        **REPLY_ROUTE,
        subject=decision_reply_subject(nothing_asked),
        body=decision_reply_write(nothing_asked, "accept"),
    ).message

    for refused in (offered_none, not_root, unasked):
        assert isinstance(refused.decision_reply, dict)
        assert refused.decision_reply["accepted"] is False
    assert Page.objects.count() == 0
    assert not Activity.objects.filter(kind=Activity.Kind.PAGE_WRITTEN).exists()


@pytest.mark.django_db
def test_sends_that_are_no_accepted_reply_never_touch_the_pages(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()
    page_table = Page._meta.db_table

    with CaptureQueriesContext(connection) as plain:
        message_send(principal=alice.principal, **REPLY_ROUTE, body="a plain note")
        reply(alice.principal, question, "maybe")
    with CaptureQueriesContext(connection) as accepted:
        reply(alice.principal, question, "accept")

    assert not [q for q in plain.captured_queries if page_table in q["sql"]]
    touching = [q for q in accepted.captured_queries if page_table in q["sql"]]
    assert len(touching) == 1 and touching[0]["sql"].startswith("INSERT")


@pytest.mark.django_db
def test_a_later_accepted_answer_does_not_overwrite_the_first(
    alice: Persona, bob: Persona, operator: Project, orchestrator: Project
) -> None:
    for project in (operator, orchestrator):
        Grant.objects.create(user=bob.user, project=project, level=Grant.Level.WRITE)
    question = ask()
    first = decision_answer(
        principal=alice.principal, **MAILBOX, question_id=question.pk, option="accept"
    ).message
    [page] = register_pages(orchestrator)

    later = decision_answer(
        principal=bob.principal,
        **MAILBOX,
        question_id=question.pk,
        option="reject",
        comment="changed my mind",
        again=True,
    ).message

    assert isinstance(later.decision_reply, dict) and later.decision_reply["accepted"] is True
    [kept] = register_pages(orchestrator)
    assert (kept.body, kept.updated_at) == (page.body, page.updated_at)
    assert f"- Answered: {moment(first)}" in kept.body
    assert "changed my mind" not in kept.body
    assert Activity.objects.filter(kind=Activity.Kind.PAGE_WRITTEN).count() == 1


@pytest.mark.django_db
def test_a_failed_register_write_is_logged_and_the_reply_is_still_sent(
    alice: Persona,
    operator: Project,
    orchestrator: Project,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    question = ask()

    def broken(**_: Any) -> bool:
        raise DatabaseError("the page table is gone")

    monkeypatch.setattr(register_services, "page_create_once", broken)
    with caplog.at_level(logging.ERROR, logger="messaging.register_services"):
        sent = reply(alice.principal, question, "accept")

    assert Message.objects.filter(pk=sent.pk).exists()
    assert register_pages(orchestrator) == []
    [record] = caplog.records
    assert record.getMessage() == (
        f"the decisions register could not record reply {sent.pk} (the reply was sent)"
    )


# Untrusted text ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_comment_can_neither_add_fields_nor_escape_its_block(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()
    comment = (
        "~~~\n- Chosen option: Send it back\n## Injected\n<script>alert(1)</script>\n"
        "[click](javascript:alert(1))\n~~~~"
    )
    sent = reply(alice.principal, question, "accept", comment)

    [page] = register_pages(orchestrator)
    assert page.body.endswith(f"## Comment\n\n~~~~~\n{comment}\n~~~~~\n")
    line = f"- {QUESTION} -> Accept the exception ({sent.created_at:%Y-%m-%d}, alice)"
    assert f"Recent decisions:\n{line}\n\n" in (brief_compile(orchestrator) or "")
    html = str(markdown(page.body))
    assert "<script>" not in html and "<h3>Injected" not in html
    assert 'href="javascript' not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# Racing answers ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_two_accepted_answers_racing_leave_one_page_with_the_first(
    alice: Persona, bob: Persona, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(alice, "default", "operator", restricted=True)
    orchestrator = make_project(alice, "default", "orchestrator", restricted=True)
    for project in Project.objects.all():
        Grant.objects.create(user=bob.user, project=project, level=Grant.Level.WRITE)
    answerers = [(alice, "accept", "alice says yes"), (bob, "reject", "bob says no")]
    create = page_create_once
    attempts: list[tuple[str, bool]] = []

    def recorded(**fields: Any) -> bool:
        created = create(**fields)
        attempts.append((fields["body"], created))
        return created

    monkeypatch.setattr(register_services, "page_create_once", recorded)

    for _round in range(3):
        attempts.clear()
        question = ask()
        barrier = threading.Barrier(2)

        def answer(n: int, question: Message = question, barrier: Any = barrier) -> Message:
            persona, option, comment = answerers[n]
            try:
                barrier.wait()
                return reply(persona.principal, question, option, comment)
            finally:
                connection.close()

        with ThreadPoolExecutor(max_workers=2) as pool:
            sent = list(pool.map(answer, range(2)))

        assert all(
            isinstance(m.decision_reply, dict) and m.decision_reply["accepted"] for m in sent
        )
        [page] = Page.objects.filter(project=orchestrator, path=f"_decisions/{question.pk}")
        bodies = [
            expected_body(
                question,
                m,
                option=option,
                comment_lines=["~~~", comment, "~~~"],
                user=persona.user.username,
                via="message",
            )
            for m, (persona, option, comment) in zip(sent, answerers, strict=True)
        ]
        assert sorted(body for body, _ in attempts) == sorted(bodies)  # both tried
        [first] = [body for body, created in attempts if created]
        assert page.body == first  # the insert that came first, whole; the other wrote nothing
        assert page.updated_at == page.created_at
    assert Activity.objects.filter(kind=Activity.Kind.PAGE_WRITTEN).count() == 3
