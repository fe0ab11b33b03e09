"""/web/a/<token>/: the answer links of notifications (docs/reference.md#answer-links).

With authentication on, the mailbox is alice's restricted ``default/operator`` and the
asker her restricted ``default/orchestrator``; alice writes both, bob reads both, charlie
has nothing. Tests that need other levels set them.
"""

from __future__ import annotations

import hashlib
import re
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.core import signing
from django.http import HttpResponse
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper
from pytest_django.live_server_helper import LiveServer

from aimemory_site.lib.principal import Principal
from messaging.answer_links import (
    ANSWER_LINK_MAX_AGE,
    ANSWER_LINK_SALT,
    AnswerLinksOff,
    answer_link_make,
    answer_link_read,
    answer_link_url,
)
from messaging.answer_services import decision_answer
from messaging.models import Message
from messaging.services import message_cancel, message_pop
from projects.models import Grant, Project
from tests.conftest import Persona, make_project
from tests.decision_examples import FLAKE_OPTIONS as OPTIONS
from tests.decision_examples import FLAKE_QUESTION as QUESTION
from tests.decision_examples import question_send
from tests.webui.conftest import element, page, text_of

ROOT = Principal.root()
NOT_FOUND = "There is no page at this address."


def ask(*, requires_root: bool = False, **fields: Any) -> Message:
    """The asker's question in default/operator's inbox, sent as root."""
    question = fields.pop("question", QUESTION)
    return question_send(question, OPTIONS, requires_root=requires_root, **fields)


def link(question: Message, option: str, persona: Persona | User) -> str:
    user = persona.user if isinstance(persona, Persona) else persona
    return f"/web/a/{answer_link_make(question, option, user)}/"


def replies() -> list[Message]:
    return list(
        Message.objects.filter(subject__startswith="decision-reply:").order_by("created_at")
    )


def post(client: Client, path: str, comment: str = "") -> HttpResponse:
    response = client.post(path, {"comment": comment})
    assert isinstance(response, HttpResponse)
    return response


def has_form(html: str) -> bool:
    return 'id="link-form"' in html


def outcome(html: str) -> str:
    return text_of(element(html, "link-outcome"))


@pytest.fixture
def mailbox(auth_on: str, alice: Persona, bob: Persona, charlie: Persona) -> Project:
    operator = make_project(alice, "default", "operator", restricted=True)
    orchestrator = make_project(alice, "default", "orchestrator", restricted=True)
    Grant.objects.create(user=bob.user, project=operator, level=Grant.Level.READ)
    Grant.objects.create(user=bob.user, project=orchestrator, level=Grant.Level.READ)
    return operator


def signed_in(client: Client, persona: Persona | User) -> Client:
    client.force_login(persona.user if isinstance(persona, Persona) else persona)
    return client


# GET shows, POST answers ----------------------------------------------------------------


def test_a_get_shows_the_question_and_the_option_and_answers_nothing(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask(details="Failed once in forty runs.\n<script>alert(1)</script>")
    response = client.get(link(question, "reject", alice))
    assert response.status_code == 200
    html = response.content.decode()
    assert text_of(element(html, "link-question")) == QUESTION
    meta = text_of(element(html, "link-meta"))
    assert "asked by default/orchestrator" in meta and "in the mailbox of default/operator" in meta
    assert text_of(element(html, "link-option")).startswith("Send it back reject")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in element(html, "link-details")
    assert "<script>alert" not in html
    form = element(html, "link-form")
    assert 'name="csrfmiddlewaretoken"' in form and '<textarea id="link-comment"' in form
    assert "Send answer</button>" in form
    # Only the link's option: the form chooses nothing.
    assert 'name="option"' not in form
    assert "in the name of alice" in text_of(form)
    assert "default-src 'self'" in response["Content-Security-Policy"]
    # Nothing was sent, however often it is looked at.
    client.get(link(question, "reject", alice))
    assert replies() == []


def test_a_post_answers_as_the_links_user_once_with_via_link(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask()
    path = link(question, "reject", alice)
    response = post(client, path, comment="Stabilise it first.\nThen ask again.")
    assert response.status_code == 303 and response["Location"] == path
    [reply] = replies()
    assert reply.in_reply_to == question.pk
    assert reply.from_owner_user == "alice"
    assert (reply.from_project.name, reply.to_project.name) == ("operator", "orchestrator")
    assert reply.decision_reply == {
        "question_id": str(question.pk),
        "option": "reject",
        "comment": "Stabilise it first.\nThen ask again.",
        "accepted": True,
        "refusal": None,
        "via": "link",
    }
    html = page(client, path)
    assert outcome(html).startswith("answered: reject By alice from default/operator")
    assert str(reply.pk) in outcome(html)
    assert not has_form(html)
    # Used once: a second POST sends nothing.
    again = post(client, path, comment="again")
    assert again.status_code == 409
    assert outcome(again.content.decode()).startswith("answered: reject")
    assert len(replies()) == 1
    question.refresh_from_db()
    assert question.state == Message.State.PENDING  # answering never pops nor cancels


def test_two_posts_of_one_link_racing_in_the_service_are_one_answer(
    mailbox: Project, alice: Persona
) -> None:
    """The link's retry key: a second send with it replays the first, whatever arrived
    first at the page's own check."""
    question = ask()
    token = answer_link_make(question, "accept", alice.user)
    read = answer_link_read(token)
    assert read is not None
    sends = [
        decision_answer(
            principal=alice.principal,
            workspace="default",
            project="operator",
            question_id=question.pk,
            option="accept",
            idempotency_key=read.idempotency_key,
            via="link",
        )
        for _ in range(2)
    ]
    assert [sent.replay for sent in sends] == [False, True]
    assert sends[0].message.pk == sends[1].message.pk
    assert len(replies()) == 1


def test_a_post_without_the_csrf_token_is_refused(mailbox: Project, alice: Persona) -> None:
    client = Client(enforce_csrf_checks=True)
    question = ask()
    path = link(question, "accept", alice)
    refused = client.post(path, {"comment": ""})
    assert refused.status_code == 403
    assert replies() == []
    # The page's own form carries the token, and with it the same answer goes through.
    html = page(client, path)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', element(html, "link-form"))
    assert token is not None
    accepted = client.post(path, {"comment": "", "csrfmiddlewaretoken": token.group(1)})
    assert accepted.status_code == 303
    assert len(replies()) == 1


@pytest.mark.parametrize("method", ["put", "delete", "patch"])
def test_other_methods_are_refused_with_405(
    client: Client, mailbox: Project, alice: Persona, method: str
) -> None:
    response = getattr(client, method)(link(ask(), "accept", alice))
    assert response.status_code == 405
    assert replies() == []


# Tokens that name nothing ---------------------------------------------------------------


def _not_found(client: Client, path: str) -> None:
    for response in (client.get(path), post(client, path)):
        assert response.status_code == 404
        html = response.content.decode()
        assert NOT_FOUND in html
        assert "Accept" not in html and "operator" not in html and "alice" not in html


def _tampered(token: str) -> Iterator[str]:
    payload, _, signature = token.rpartition(":")
    flipped = "A" if signature[0] != "A" else "B"
    yield f"{payload}:{flipped}{signature[1:]}"  # the signature altered
    yield f"{payload[:-1]}{'A' if payload[-1] != 'A' else 'B'}:{signature}"  # the payload
    yield payload  # no signature at all
    yield token[:-1]


def test_a_tampered_token_is_a_404_that_tells_nothing(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask()
    token = answer_link_make(question, "accept", alice.user)
    for altered in _tampered(token):
        assert answer_link_read(altered) is None
        _not_found(client, f"/web/a/{altered}/")
    _not_found(client, "/web/a/not-a-token/")
    assert replies() == []


def test_a_forged_token_is_a_404(client: Client, mailbox: Project, alice: Persona) -> None:
    question = ask()
    claims = {"q": question.pk.hex, "o": "accept", "u": alice.user.pk, "e": 2**40}
    # Signed under another salt (another signed value of this server), or another key.
    for forged in (
        signing.dumps(claims, salt="messaging.answer_services.answer_state"),
        signing.dumps(claims, salt=ANSWER_LINK_SALT, key="another server's key"),
    ):
        _not_found(client, f"/web/a/{forged}/")
    # This server's key and salt, but what it names is not a link's shape.
    for odd in ([1, 2], {"q": "not-hex", "o": "accept", "u": 1, "e": 2**40}, {"q": 1}):
        _not_found(client, f"/web/a/{signing.dumps(odd, salt=ANSWER_LINK_SALT)}/")
    assert replies() == []


def test_a_token_for_a_question_or_user_that_is_gone_is_a_404(
    client: Client, mailbox: Project, alice: Persona, bob: Persona
) -> None:
    question = ask()
    for_alice = link(question, "accept", alice)
    for_bob = link(question, "accept", bob)
    bob.user.delete()
    _not_found(client, for_bob)
    Message.objects.filter(pk=question.pk).delete()
    _not_found(client, for_alice)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[datetime]:
    """``clock[0]`` is what ``timezone.now()`` answers; move it to move time."""
    moment = [timezone.now()]
    monkeypatch.setattr(timezone, "now", lambda: moment[0])
    return moment


def test_a_link_expires_after_seven_days(
    client: Client, mailbox: Project, alice: Persona, clock: list[datetime]
) -> None:
    question = ask()
    path = link(question, "accept", alice)
    clock[0] += ANSWER_LINK_MAX_AGE - timedelta(seconds=2)
    assert client.get(path).status_code == 200
    clock[0] += timedelta(seconds=2)
    _not_found(client, path)
    assert replies() == []


def test_a_link_expires_at_the_questions_deadline_when_that_is_sooner(
    client: Client, mailbox: Project, alice: Persona, clock: list[datetime]
) -> None:
    question = ask(deadline="2h")
    token = answer_link_make(question, "accept", alice.user)
    read = answer_link_read(token)
    assert read is not None and question.expires_at is not None
    assert read.expires_at == question.expires_at.replace(microsecond=0)
    clock[0] = question.expires_at + timedelta(seconds=1)
    _not_found(client, f"/web/a/{token}/")
    assert replies() == []


def test_a_deadline_later_than_seven_days_leaves_the_seven_days(
    mailbox: Project, alice: Persona
) -> None:
    question = ask(deadline="20d")
    read = answer_link_read(answer_link_make(question, "accept", alice.user))
    assert read is not None
    assert read.expires_at < timezone.now() + ANSWER_LINK_MAX_AGE + timedelta(seconds=1)
    assert read.expires_at > timezone.now() + ANSWER_LINK_MAX_AGE - timedelta(seconds=5)


# Who may use a link ---------------------------------------------------------------------


def test_signed_in_as_another_user_the_link_is_refused_with_403(
    client: Client, mailbox: Project, alice: Persona, bob: Persona
) -> None:
    question = ask()
    path = link(question, "accept", alice)
    signed_in(client, bob)
    viewed = client.get(path)
    assert viewed.status_code == 403
    html = viewed.content.decode()
    assert text_of(element(html, "link-blocked")).startswith(
        "This answer link is for alice, and you are signed in as bob."
    )
    assert not has_form(html) and QUESTION not in html
    assert post(client, path).status_code == 403
    assert replies() == []


def test_signed_in_as_the_links_user_the_link_answers(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask()
    path = link(question, "accept", alice)
    assert has_form(page(signed_in(client, alice), path))
    assert post(client, path).status_code == 303
    assert [reply.from_owner_user for reply in replies()] == ["alice"]


@pytest.fixture
def alice_is_root(settings: SettingsWrapper, mailbox: Project) -> None:
    settings.AI_MEMORY_ROOT_USERNAME = "alice"


def test_a_requires_root_link_asks_to_sign_in_as_its_user_first(
    client: Client, alice_is_root: None, alice: Persona
) -> None:
    question = ask(requires_root=True)
    path = link(question, "accept", alice)
    html = page(client, path)
    assert not has_form(html)
    prompt = element(html, "link-sign-in")
    assert text_of(prompt) == "This question requires root: sign in as alice to answer it."
    assert 'href="/accounts/login/?next=/web/a/' in prompt
    assert post(client, path).status_code == 403
    assert replies() == []
    # Signed in as alice, the same link answers.
    assert has_form(page(signed_in(client, alice), path))
    assert post(client, path).status_code == 303
    [reply] = replies()
    assert reply.decision_reply is not None and reply.decision_reply["accepted"] is True
    assert reply.decision_reply["via"] == "link"


def test_a_requires_root_link_refuses_anyone_else_signed_in(
    client: Client, alice_is_root: None, alice: Persona, bob: Persona
) -> None:
    root = User.objects.create_superuser("operator-root", password="x" * 12)
    path = link(ask(requires_root=True), "accept", alice)
    for other in (bob.user, root):
        signed_in(client, other)
        assert client.get(path).status_code == 403
        assert post(client, path).status_code == 403
    assert replies() == []


def test_a_requires_root_link_for_a_user_who_is_not_root_sends_nothing(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    path = link(ask(requires_root=True), "accept", alice)  # alice is not root here
    signed_in(client, alice)
    assert "this question is closed" in outcome(page(client, path))
    assert post(client, path).status_code == 409
    assert replies() == []


# Links that may no longer send -------------------------------------------------------------


def test_after_an_answer_through_the_answer_page_the_link_shows_it_and_sends_nothing(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask()
    path = link(question, "accept", alice)
    page_post = signed_in(Client(), alice).post(
        f"/web/w/default/operator/decisions/{question.pk}/", {"option": "reject"}
    )
    assert page_post.status_code == 303
    html = page(client, path)
    assert outcome(html).startswith("answered: reject By alice")
    assert not has_form(html)
    assert post(client, path).status_code == 409
    assert [reply.decision_reply["via"] for reply in replies()] == ["web"]  # type: ignore[index]


def test_an_answer_taken_by_the_asker_still_shows_on_the_link(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask()
    path = link(question, "accept", alice)
    assert post(client, path).status_code == 303
    [reply] = replies()
    message_pop(
        principal=ROOT, workspace="default", project="orchestrator", message_id=str(reply.pk)
    )
    message_cancel(
        principal=ROOT, workspace="default", project="orchestrator", message_id=str(question.pk)
    )
    assert outcome(page(client, path)).startswith("answered: accept")
    assert post(client, path).status_code == 409
    assert len(replies()) == 1


def _cancel(question: Message) -> None:
    message_cancel(
        principal=ROOT, workspace="default", project="orchestrator", message_id=str(question.pk)
    )


def _claim(question: Message) -> None:
    message_pop(
        principal=ROOT, workspace="default", project="operator", message_id=str(question.pk)
    )


def _expire(question: Message) -> None:
    Message.objects.filter(pk=question.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


@pytest.mark.parametrize("close", [_cancel, _claim, _expire])
def test_a_closed_question_shows_closed_and_sends_nothing(
    client: Client, mailbox: Project, alice: Persona, close: Any
) -> None:
    question = ask()
    path = link(question, "accept", alice)
    close(question)
    html = page(client, path)
    assert outcome(html).startswith("this question is closed Nothing was sent")
    assert not has_form(html)
    response = post(client, path)
    assert response.status_code == 409
    assert "this question is closed" in outcome(response.content.decode())
    assert replies() == []


@pytest.fixture
def bob_writes(mailbox: Project) -> None:
    Grant.objects.filter(project__name__in=["operator", "orchestrator"]).update(
        level=Grant.Level.WRITE
    )


def test_a_user_who_lost_write_gets_closed_and_nothing_is_sent(
    client: Client, bob_writes: None, bob: Persona
) -> None:
    question = ask()
    path = link(question, "accept", bob)
    assert has_form(page(client, path))
    Grant.objects.filter(user=bob.user, project__name="orchestrator").update(level=Grant.Level.READ)
    html = page(client, path)
    assert outcome(html).startswith("this question is closed")
    assert "bob may no longer answer it" in outcome(html)
    assert post(client, path).status_code == 409
    assert replies() == []


def test_a_user_who_lost_read_sees_only_that_it_is_closed(
    client: Client, bob_writes: None, bob: Persona
) -> None:
    question = ask()
    path = link(question, "accept", bob)
    Grant.objects.filter(user=bob.user).delete()
    html = page(client, path)
    assert outcome(html) == "this question is closed Nothing was sent."
    assert QUESTION not in html and "operator" not in html
    assert post(client, path).status_code == 409
    assert replies() == []


def test_a_deactivated_user_gets_closed_and_nothing_is_sent(
    client: Client, bob_writes: None, bob: Persona
) -> None:
    question = ask()
    path = link(question, "accept", bob)
    User.objects.filter(pk=bob.user.pk).update(is_active=False)
    assert outcome(page(client, path)).startswith("this question is closed")
    assert post(client, path).status_code == 409
    assert replies() == []


def test_a_failed_send_shows_the_reason_and_keeps_the_form(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    path = link(ask(), "accept", alice)
    response = post(client, path, comment="ok\x00")
    assert response.status_code == 400
    html = response.content.decode()
    assert "NUL character" in text_of(element(html, "link-error"))
    assert has_form(html)
    assert replies() == []


# Making links ------------------------------------------------------------------------------


def test_answer_link_url_is_absolute_under_the_public_url(
    settings: SettingsWrapper, mailbox: Project, alice: Persona
) -> None:
    question = ask()
    settings.AI_MEMORY_PUBLIC_URL = ""
    assert answer_link_url(question, "accept", alice.user) is None
    settings.AI_MEMORY_PUBLIC_URL = "https://memory.example.test"
    made = answer_link_url(question, "accept", alice.user)
    assert made is not None
    match = re.fullmatch(r"https://memory\.example\.test/web/a/([^/]+)/", made)
    assert match is not None
    read = answer_link_read(match.group(1))
    assert read is not None
    assert (read.question_id, read.option_id, read.user_id) == (
        question.pk,
        "accept",
        alice.user.pk,
    )
    assert read.idempotency_key.startswith("answer-link:")
    assert read.idempotency_key.endswith(hashlib.sha256(match.group(1).encode()).hexdigest()[:48])


def test_a_link_is_made_only_for_an_option_the_question_offers(
    mailbox: Project, alice: Persona
) -> None:
    with pytest.raises(ValueError, match="maybe"):
        answer_link_make(ask(), "maybe", alice.user)


def test_an_anonymous_server_never_makes_links_and_takes_none(
    client: Client, settings: SettingsWrapper, db: None
) -> None:
    settings.AI_MEMORY_PUBLIC_URL = "https://memory.example.test"
    make_project(None, "default", "operator")
    make_project(None, "default", "orchestrator")
    user = User.objects.create_user("dana", password="dana-password")  # no token: anonymous
    question = ask()
    assert answer_link_url(question, "accept", user) is None
    with pytest.raises(AnswerLinksOff):
        answer_link_make(question, "accept", user)
    # A token made while authentication was on takes nothing on an anonymous server.
    settings.AI_MEMORY_ROOT_TOKEN = "a-root-token-for-a-moment-0123456789"
    token = answer_link_make(question, "accept", user)
    settings.AI_MEMORY_ROOT_TOKEN = ""
    _not_found(client, f"/web/a/{token}/")
    assert replies() == []


# An answer link and the answer page racing ----------------------------------------------------


def _form_token(client: httpx.Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, response.text
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.text)
    assert found is not None
    return found.group(1)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_answer_link_and_the_answer_page_racing_send_one_accepted_answer(
    live_server: LiveServer, auth_on: str, alice: Persona
) -> None:
    make_project(alice, "default", "operator", restricted=True)
    make_project(alice, "default", "orchestrator", restricted=True)
    signed = Client()
    signed.force_login(alice.user)
    session = signed.cookies["sessionid"].value
    rounds = 6
    questions = [ask() for _ in range(rounds)]
    links = [link(question, "accept", alice) for question in questions]
    pages = [f"/web/w/default/operator/decisions/{question.pk}/" for question in questions]

    def one_round(n: int) -> list[int]:
        barrier = threading.Barrier(2)
        with (
            httpx.Client(base_url=live_server.url, timeout=60) as by_link,
            httpx.Client(base_url=live_server.url, timeout=60) as by_page,
        ):
            by_page.cookies.set("sessionid", session)
            link_form = _form_token(by_link, links[n])
            page_form = _form_token(by_page, pages[n])

            def send_link() -> int:
                barrier.wait()
                data = {"comment": "by link", "csrfmiddlewaretoken": link_form}
                return by_link.post(links[n], data=data).status_code

            def send_page() -> int:
                barrier.wait()
                data = {"option": "reject", "csrfmiddlewaretoken": page_form}
                return by_page.post(pages[n], data=data).status_code

            with ThreadPoolExecutor(max_workers=2) as pool:
                sent = [pool.submit(send_link), pool.submit(send_page)]
                return [future.result() for future in sent]

    outcomes = [one_round(n) for n in range(rounds)]

    for question, statuses in zip(questions, outcomes, strict=True):
        answers = [
            reply
            for reply in replies()
            if reply.decision_reply and reply.decision_reply["question_id"] == str(question.pk)
        ]
        accepted = [reply for reply in answers if reply.decision_reply["accepted"]]  # type: ignore[index]
        assert len(accepted) == 1 == len(answers), statuses
        # One was sent (See Other), the other refused: 409 answered.
        assert sorted(statuses) == [303, 409], statuses
        assert uuid.UUID(str(accepted[0].in_reply_to)) == question.pk
