"""Deadlines of questions (docs/reference.md#deadlines): checked at send, the question
expiring at its deadline, and the server's fallback answer, run on a clock the test
moves (the one real-clock test is in tests/serving/test_background_worker.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from aimemory_site.lib.decisions import decision_body_write
from aimemory_site.lib.errors import BadRequest, Code
from messaging.answer_services import decision_answer
from messaging.models import Message
from messaging.tasks import question_deadline_pass
from tests.conftest import ApiCall, Persona, make_project
from tests.decision_examples import FLAKE_QUESTION, question_send

OPTIONS: list[dict[str, Any]] = [
    {"id": "accept", "label": "Accept the exception", "recommended": True},
    {"id": "reject", "label": "Send it back"},
]


@pytest.fixture
def projects(alice: Persona, auth_on: str) -> None:
    make_project(alice, "default", "operator", restricted=True)
    make_project(alice, "default", "orchestrator", restricted=True)


def ask(**fields: Any) -> Message:
    return question_send(FLAKE_QUESTION, OPTIONS, **fields)


def _pass_deadline(question: Message) -> None:
    """Move the clock past ``question``'s deadline: its deadline and expiry are now."""
    passed = timezone.now() - timedelta(seconds=1)
    decision = dict(question.decision or {})
    decision["deadline"] = passed.strftime("%Y-%m-%dT%H:%M:%SZ")
    Message.objects.filter(pk=question.pk).update(expires_at=passed, decision=decision)


def test_a_deadline_sets_the_questions_expiry(projects: None) -> None:
    before = timezone.now()
    question = ask(deadline="2h", on_deadline="reject")

    assert question.expires_at is not None
    assert timedelta(hours=2) <= question.expires_at - before <= timedelta(hours=2, seconds=5)
    assert question.decision is not None and question.decision["on_deadline"] == "reject"
    assert question.decision["deadline"].endswith("Z")


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"deadline": "30s"}, "between 60 seconds and 30 days"),
        ({"deadline": "31d"}, "between 60 seconds and 30 days"),
        ({"deadline": "2000-01-01T00:00:00Z"}, "between 60 seconds and 30 days"),
        ({"deadline": "next tuesday"}, "neither an RFC 3339 time"),
        ({"deadline": "2030-01-01T10:00:00"}, "names no time zone"),
        ({"deadline": "2h", "on_deadline": "maybe"}, "not an option this question offers"),
        ({"on_deadline": "accept"}, "on_deadline needs a deadline"),
    ],
)
def test_a_deadline_the_server_cannot_keep_is_refused_and_nothing_is_sent(
    projects: None, extra: dict[str, str], said: str
) -> None:
    with pytest.raises(BadRequest) as refused:
        ask(**extra)

    assert refused.value.code == Code.INVALID_DECISION
    assert said in str(refused.value)
    assert not Message.objects.exists()


def test_rest_refuses_a_bad_deadline_with_invalid_decision(
    projects: None, api: ApiCall, auth_on: str
) -> None:
    body = decision_body_write(
        "Go?", OPTIONS, requires_root=False, reply_project="default/orchestrator", deadline="5s"
    )
    status, answer = api(
        "post",
        "/api/v1/messages",
        {
            "to_workspace": "default",
            "to_project": "operator",
            "from_workspace": "default",
            "from_project": "orchestrator",
            "subject": "decision: Go?",
            "body": body,
        },
        token=auth_on,
    )

    assert (status, answer["code"]) == (400, "invalid_decision")
    assert not Message.objects.exists()


@pytest.mark.django_db(transaction=True)  # the fallback is a send of its own
def test_at_the_deadline_the_server_sends_the_fallback_once_via_deadline(projects: None) -> None:
    question = ask(deadline="2h", on_deadline="reject")
    _pass_deadline(question)

    question_deadline_pass.call(str(question.pk))
    question_deadline_pass.call(str(question.pk))  # a second run sends nothing more

    [reply] = Message.objects.filter(in_reply_to=question.pk)
    assert reply.subject == f"decision-reply: {question.pk}"
    assert (reply.from_project.name, reply.to_project.name) == ("operator", "orchestrator")
    deadline = question.expires_at
    assert deadline is not None
    assert reply.decision_reply is not None
    assert reply.decision_reply["option"] == "reject"
    assert reply.decision_reply["accepted"] is True
    assert reply.decision_reply["via"] == "deadline"
    assert reply.decision_reply["comment"].startswith("no answer by the deadline (")
    assert reply.decision_reply["comment"].endswith("); the asker's fallback was taken.")


@pytest.mark.django_db(transaction=True)
def test_an_answer_in_time_means_no_fallback(projects: None, alice: Persona) -> None:
    question = ask(deadline="2h", on_deadline="reject")
    decision_answer(
        principal=alice.principal,
        workspace="default",
        project="operator",
        question_id=question.pk,
        option="accept",
    )
    _pass_deadline(question)

    question_deadline_pass.call(str(question.pk))

    replies = Message.objects.filter(in_reply_to=question.pk)
    assert [(m.decision_reply or {}).get("via") for m in replies] == ["web"]


@pytest.mark.django_db(transaction=True)
def test_without_a_fallback_nothing_is_sent(projects: None) -> None:
    question = ask(deadline="2h")
    _pass_deadline(question)

    question_deadline_pass.call(str(question.pk))

    assert not Message.objects.filter(in_reply_to=question.pk).exists()
    assert Message.objects.get(pk=question.pk).state_at(timezone.now()) == "expired"
