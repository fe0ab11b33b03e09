"""Answering an operator decision: the rule of docs/reference.md#operator-decisions, enforced once.

The mailbox is alice's restricted ``default/operator``; the asker is her restricted
``default/orchestrator``. Each test grants the other personas what it needs.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from pytest_django.fixtures import Settings as SettingsWrapper

from aimemory_site.lib.decisions import decision_reply_parse
from aimemory_site.lib.errors import AppError, BadRequest, Conflict, Forbidden, NotFound
from aimemory_site.lib.principal import Principal
from messaging.admission import AdmissionRefused
from messaging.answer_selectors import decision_replies
from messaging.answer_services import decision_answer
from messaging.models import Message
from messaging.services import message_cancel, message_pop, message_send
from projects.models import Grant, Project
from tests.conftest import Persona, make_project
from tests.decision_examples import question_send
from tests.servers import free_port

ROOT = Principal.root()
ANON = Principal.anonymous()


@pytest.fixture
def operator(alice: Persona) -> Project:
    return make_project(alice, "default", "operator", restricted=True)


@pytest.fixture
def orchestrator(alice: Persona) -> Project:
    return make_project(alice, "default", "orchestrator", restricted=True)


def ask(
    *,
    requires_root: bool = False,
    reply_project: str = "default/orchestrator",
    to: str = "operator",
    sender: str = "orchestrator",
) -> Message:
    """The asker's question, sent from ``default/<sender>`` to ``default/<to>`` as root."""
    return question_send(
        to=f"default/{to}",
        sender=f"default/{sender}",
        requires_root=requires_root,
        reply_project=reply_project,
    )


def answer(
    principal: Principal, question: Message, option: str = "accept", **extra: Any
) -> Message:
    return decision_answer(
        principal=principal,
        workspace="default",
        project="operator",
        question_id=question.pk,
        option=option,
        **extra,
    ).message


def grant(persona: Persona, project: Project, level: str) -> None:
    Grant.objects.update_or_create(user=persona.user, project=project, defaults={"level": level})


def replies() -> list[Message]:
    return list(Message.objects.filter(subject__startswith="decision-reply:"))


def refused(principal: Principal, question: Message, error: type[AppError], code: str) -> str:
    """Answer, expect ``error`` with ``code``, check nothing was sent; return the text."""
    with pytest.raises(error) as raised:
        answer(principal, question)
    assert raised.value.code == code
    assert replies() == []
    return raised.value.message


# The answer ----------------------------------------------------------------------------


def test_a_writer_on_both_projects_sends_the_reply_from_the_mailbox_to_the_asker(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()
    reply = answer(alice.principal, question, comment="Accepting.\nThe flake is written down.")
    stored = Message.objects.select_related("to_project", "from_project").get(pk=reply.pk)
    assert (stored.to_project, stored.from_project) == (orchestrator, operator)
    assert stored.subject == f"decision-reply: {question.pk}"
    assert stored.in_reply_to == question.pk
    assert stored.from_owner_user == "alice"
    assert stored.decision_reply == {
        "question_id": str(question.pk),
        "option": "accept",
        "comment": "Accepting.\nThe flake is written down.",
        "accepted": True,
        "refusal": None,
        "via": "web",
    }
    assert decision_reply_parse(stored.subject, stored.body) == {
        key: stored.decision_reply[key] for key in ("question_id", "option", "comment")
    }


def test_answering_neither_pops_nor_cancels_the_question(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()
    answer(alice.principal, question)
    question.refresh_from_db()
    assert question.state == Message.State.PENDING
    assert question.claimed_at is None and question.cancelled_at is None


def test_the_comment_is_scrubbed_like_any_message_body(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    token = "ghp_" + "A1b2C3d4E5" * 4
    reply = answer(alice.principal, ask(), comment=f"use {token}")
    assert token not in reply.body
    assert "[REDACTED]" in reply.body
    assert reply.redactions == 1


def test_a_refusing_admission_webhook_refuses_the_answer(
    settings: SettingsWrapper, alice: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()
    port = free_port()  # a loopback port nobody listens on
    settings.AI_MEMORY_ADMISSION_WEBHOOKS_JSON = (
        f'[{{"name": "gate", "url": "http://127.0.0.1:{port}/gate", '
        '"events": ["message_send"], "failure_policy": "reject"}]'
    )
    with pytest.raises(AdmissionRefused):
        answer(alice.principal, question)
    assert replies() == []


# Who may answer ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("on_mailbox", "on_asker", "named"),
    [
        ("read", "write", "default/operator"),
        ("write", "read", "default/orchestrator"),
        ("read", "read", "default/operator"),
    ],
)
def test_write_on_both_projects_is_needed(
    bob: Persona,
    operator: Project,
    orchestrator: Project,
    on_mailbox: str,
    on_asker: str,
    named: str,
) -> None:
    grant(bob, operator, on_mailbox)
    grant(bob, orchestrator, on_asker)
    text = refused(bob.principal, ask(), Forbidden, "write_access_required")
    assert named in text


def test_write_on_both_projects_by_grant_is_enough(
    bob: Persona, operator: Project, orchestrator: Project
) -> None:
    grant(bob, operator, "write")
    grant(bob, orchestrator, "write")
    assert answer(bob.principal, ask()).from_owner_user == "bob"


def test_a_mailbox_the_caller_may_not_read_answers_like_a_missing_one(
    charlie: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()
    text = refused(charlie.principal, question, NotFound, "project_not_found")
    assert "operator" in text and "Accept" not in text


def test_a_reply_project_the_caller_may_not_read_answers_like_a_missing_one(
    charlie: Persona, operator: Project, orchestrator: Project
) -> None:
    grant(charlie, operator, "write")
    question = ask()
    unreadable = refused(charlie.principal, question, BadRequest, "reply_project_not_found")
    missing = ask(reply_project="default/nowhere")
    assert refused(
        charlie.principal, missing, BadRequest, "reply_project_not_found"
    ) == unreadable.replace("default/orchestrator", "default/nowhere")


def test_requires_root_refuses_a_writer_who_is_not_root(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    text = refused(alice.principal, ask(requires_root=True), Forbidden, "root_required")
    assert "AI_MEMORY_ROOT_USERNAME" in text


def test_requires_root_is_answered_by_a_superuser(operator: Project, orchestrator: Project) -> None:
    superuser = User.objects.create_superuser("operator-root", password="x" * 12)
    reply = answer(Principal.for_user(superuser), ask(requires_root=True))
    assert reply.from_owner_user == "operator-root"


def test_requires_root_is_answered_by_the_user_named_root(
    settings: SettingsWrapper, alice: Persona, operator: Project, orchestrator: Project
) -> None:
    settings.AI_MEMORY_ROOT_USERNAME = "alice"
    assert answer(alice.principal, ask(requires_root=True)).from_owner_user == "alice"


def test_requires_root_is_answered_by_the_root_token(
    settings: SettingsWrapper, operator: Project, orchestrator: Project
) -> None:
    settings.AI_MEMORY_ROOT_USERNAME = "ops"
    assert answer(ROOT, ask(requires_root=True)).from_owner_user == "ops"


# The anonymous server ------------------------------------------------------------------


@pytest.fixture
def anonymous_projects(db: None) -> None:
    make_project(None, "default", "operator")
    make_project(None, "default", "orchestrator")


def test_an_anonymous_server_does_not_answer_by_default(anonymous_projects: None) -> None:
    text = refused(ANON, ask(), Forbidden, "anonymous_answers_off")
    assert "AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS=1" in text


def test_an_anonymous_server_answers_when_allowed(
    settings: SettingsWrapper, anonymous_projects: None
) -> None:
    settings.AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS = True
    reply = answer(ANON, ask())
    assert reply.from_owner_user == ""
    assert reply.decision_reply is not None and reply.decision_reply["option"] == "accept"


def test_an_anonymous_server_never_answers_requires_root(
    settings: SettingsWrapper, anonymous_projects: None
) -> None:
    settings.AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS = True
    refused(ANON, ask(requires_root=True), Forbidden, "root_required")


# Bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["maybe", "", "ACCEPT", "accept "])
def test_an_option_the_question_does_not_offer_is_refused(
    alice: Persona, operator: Project, orchestrator: Project, option: str
) -> None:
    question = ask()
    with pytest.raises(BadRequest) as raised:
        answer(alice.principal, question, option=option)
    assert raised.value.code == "unknown_option"
    assert "accept, reject" in raised.value.message
    assert replies() == []


def _ordinary(alice: Persona) -> Message:
    return message_send(
        principal=ROOT,
        to_workspace="default",
        to_project="operator",
        from_workspace="default",
        from_project="orchestrator",
        subject="not a decision",
        body="question: looks like one\noptions:\n- id: accept",
    ).message


def _claimed(alice: Persona) -> Message:
    question = ask()
    message_pop(
        principal=ROOT, workspace="default", project="operator", message_id=str(question.pk)
    )
    return question


def _cancelled(alice: Persona) -> Message:
    question = ask()
    message_cancel(
        principal=ROOT, workspace="default", project="orchestrator", message_id=str(question.pk)
    )
    return question


def _elsewhere(alice: Persona) -> Message:
    return ask(to="orchestrator", sender="operator")


def _unknown(alice: Persona) -> Message:
    return Message(id=uuid.uuid4())


@pytest.mark.parametrize("target", [_ordinary, _claimed, _cancelled, _elsewhere, _unknown])
def test_only_a_pending_decision_in_the_mailbox_is_answered(
    alice: Persona, operator: Project, orchestrator: Project, target: Any
) -> None:
    question = target(alice)
    text = refused(alice.principal, question, BadRequest, "not_a_pending_decision")
    assert str(question.pk) in text


@pytest.mark.parametrize("reply_project", ["default/gone", "elsewhere/orchestrator"])
def test_a_reply_project_that_does_not_exist_is_refused(
    alice: Persona, operator: Project, orchestrator: Project, reply_project: str
) -> None:
    text = refused(
        alice.principal, ask(reply_project=reply_project), BadRequest, "reply_project_not_found"
    )
    assert reply_project in text


def test_a_reply_project_that_is_not_the_asker_is_refused(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    # The asker would never take an answer sent elsewhere: the server accepts a reply only
    # when it goes back to the project that asked.
    make_project(alice, "default", "bystander", restricted=True)
    text = refused(
        alice.principal,
        ask(reply_project="default/bystander"),
        BadRequest,
        "reply_project_not_found",
    )
    assert "reply_project default/bystander is not the project that asked it" in text


def test_a_question_without_a_usable_reply_project_is_refused(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    text = refused(
        alice.principal, ask(reply_project="orchestrator"), BadRequest, "reply_project_not_found"
    )
    assert "names no reply_project" in text


def test_a_comment_with_a_nul_is_refused(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()
    with pytest.raises(BadRequest) as raised:
        answer(alice.principal, question, comment="fine\x00")
    assert raised.value.code == "invalid_text"
    assert replies() == []


# A second answer -----------------------------------------------------------------------


def test_a_second_answer_must_be_confirmed_and_then_sends_a_second_reply(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()
    first = answer(alice.principal, question)
    with pytest.raises(Conflict) as raised:
        answer(alice.principal, question, option="reject")
    assert raised.value.code == "decision_already_answered"
    assert replies() == [first]
    second = answer(alice.principal, question, option="reject", again=True)
    assert second.pk != first.pk
    assert [reply.pk for reply in decision_replies(operator, question.pk)] == [second.pk, first.pk]
    assert {reply.in_reply_to for reply in replies()} == {question.pk}


def test_an_answer_sent_by_another_surface_counts_as_earlier(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()
    message_send(  # as `ai-memory decision answer` would, through the API
        principal=alice.principal,
        to_workspace="default",
        to_project="orchestrator",
        from_workspace="default",
        from_project="operator",
        subject=f"decision-reply: {question.pk}",
        body=f"question_id: {question.pk}\noption: reject\ncomment:",
    )
    with pytest.raises(Conflict):
        answer(alice.principal, question)


def test_a_reply_the_server_did_not_accept_does_not_count_as_earlier(
    settings: SettingsWrapper, bob: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask(requires_root=True)
    grant(bob, operator, "write")
    grant(bob, orchestrator, "write")
    forged = message_send(  # bob is not root
        principal=bob.principal,
        to_workspace="default",
        to_project="orchestrator",
        from_workspace="default",
        from_project="operator",
        subject=f"decision-reply: {question.pk}",
        body=f"question_id: {question.pk}\noption: reject\ncomment:",
    ).message
    settings.AI_MEMORY_ROOT_USERNAME = "ops"

    reply = answer(ROOT, question)

    assert forged.decision_reply is not None and forged.decision_reply["accepted"] is False
    assert reply.decision_reply is not None and reply.decision_reply["accepted"] is True


def test_the_same_form_submitted_twice_is_one_answer(
    alice: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()
    first = decision_answer(
        principal=alice.principal,
        workspace="default",
        project="operator",
        question_id=question.pk,
        option="accept",
        idempotency_key="form-1",
    )
    again = decision_answer(
        principal=alice.principal,
        workspace="default",
        project="operator",
        question_id=question.pk,
        option="accept",
        idempotency_key="form-1",
    )
    assert (first.replay, again.replay) == (False, True)
    assert again.message.pk == first.message.pk
    assert len(replies()) == 1


def test_another_users_answer_with_the_same_form_key_is_not_a_retry(
    alice: Persona, bob: Persona, operator: Project, orchestrator: Project
) -> None:
    question = ask()
    grant(bob, operator, "write")
    grant(bob, orchestrator, "write")
    answer(alice.principal, question, idempotency_key="form-1")

    # Keys belong to their principal: bob reusing alice's key is a second answer, which
    # must be confirmed like any other.
    with pytest.raises(Conflict):
        answer(bob.principal, question, option="reject", idempotency_key="form-1")
    assert len(replies()) == 1
