"""/web/w/<ws>/<proj>/decisions/<id>/: the decision answer page (docs/reference.md#operator-decisions).

With authentication on, the mailbox is alice's restricted ``default/operator`` and the
asker her restricted ``default/orchestrator``; bob reads the mailbox and writes the asker,
charlie has nothing. Tests that need other levels set them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.template.loader import render_to_string
from django.test import Client, RequestFactory
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from aimemory_site.lib.principal import Principal
from messaging.models import Message
from messaging.services import message_cancel, message_pop, message_send
from projects.models import Grant, Project
from tests.conftest import Persona, make_project
from tests.decision_examples import FLAKE_OPTIONS as OPTIONS
from tests.decision_examples import FLAKE_QUESTION as QUESTION
from tests.decision_examples import question_send
from tests.webui.conftest import deliver, element, page, text_of
from webui.selectors import ProjectName

NumQueries = Callable[[int], AbstractContextManager[object]]

ROOT = Principal.root()
NOT_FOUND = "There is no page at this address."


def ask(
    *,
    requires_root: bool = False,
    reply_project: str = "default/orchestrator",
    details: str | None = None,
    links: tuple[str, ...] = (),
) -> Message:
    """The asker's question in default/operator's inbox, sent as root."""
    return question_send(
        QUESTION,
        OPTIONS,
        requires_root=requires_root,
        reply_project=reply_project,
        details=details,
        links=links,
    )


def url(question: Message | str) -> str:
    key = question.pk if isinstance(question, Message) else question
    return f"/web/w/default/operator/decisions/{key}/"


def post(client: Client, question: Message, option: str = "accept", **fields: str) -> HttpResponse:
    response = client.post(url(question), {"option": option, "comment": "", **fields})
    assert isinstance(response, HttpResponse)
    return response


def replies() -> list[Message]:
    return list(
        Message.objects.filter(subject__startswith="decision-reply:").order_by("created_at")
    )


def has_form(html: str) -> bool:
    return 'id="decision-form"' in html


def refusal(html: str) -> str:
    return text_of(element(html, "decision-refusal"))


@pytest.fixture
def mailbox(auth_on: str, alice: Persona, bob: Persona, charlie: Persona) -> Project:
    operator = make_project(alice, "default", "operator", restricted=True)
    orchestrator = make_project(alice, "default", "orchestrator", restricted=True)
    Grant.objects.create(user=bob.user, project=operator, level=Grant.Level.READ)
    Grant.objects.create(user=bob.user, project=orchestrator, level=Grant.Level.WRITE)
    return operator


def signed_in(client: Client, persona: Persona | User) -> Client:
    client.force_login(persona.user if isinstance(persona, Persona) else persona)
    return client


# What the page shows -------------------------------------------------------------------


def test_the_page_shows_the_question_details_links_and_options(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask(
        details="Failed once in forty runs.\n<script>alert(1)</script>",
        links=(
            "https://example.test/pull/12",
            "javascript:alert(document.cookie)",
            "http://example.test/a b",
            "see the ticket",
        ),
    )
    html = page(signed_in(client, alice), url(question))
    assert "<title>Decision · default/operator · ai-memory</title>" in html
    assert text_of(element(html, "decision-question")) == QUESTION
    meta = text_of(element(html, "decision-meta"))
    assert "from default/orchestrator" in meta and "answers go to default/orchestrator" in meta
    assert "requires root" not in meta
    details = element(html, "decision-details")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in details
    assert "Failed once in forty runs.\n" in details  # shown with its line breaks (CSS)
    links = element(html, "decision-links")
    assert (
        '<a href="https://example.test/pull/12" rel="noopener noreferrer nofollow">'
        "https://example.test/pull/12</a>"
    ) in links
    assert links.count("<a ") == 1
    assert "<code>javascript:alert(document.cookie)</code>" in links
    assert "<code>http://example.test/a b</code>" in links
    assert "<code>see the ticket</code>" in links
    assert "<script>" not in html
    form = element(html, "decision-form")
    assert 'name="csrfmiddlewaretoken"' in form
    assert re.findall(r'type="radio" name="option" value="(\w+)" required', form) == [
        "accept",
        "reject",
    ]
    assert text_of(form).startswith(
        "Choose an option Accept the exception accept (recommended)"
        " Send it back reject The test has to be stable."
    )
    assert "<textarea" in form and 'name="answer_key"' in form
    assert 'name="again"' not in form


def test_a_requires_root_question_is_marked(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    html = page(signed_in(client, alice), url(ask(requires_root=True)))
    assert "requires root" in text_of(element(html, "decision-meta"))


def test_a_question_row_of_the_mailbox_links_to_its_answer_page(rf: RequestFactory) -> None:
    row = {
        "subject": "decision: Merge?",
        "snippet": "",
        "created_at": timezone.now(),
        "decision": {"question": "Merge?", "requires_root": False, "options": []},
    }
    name = ProjectName("default", "operator")

    def rendered(**extra: object) -> str:
        return render_to_string(
            "webui/_message_row.html", {"row": {**row, **extra}, "name": name}, rf.get("/")
        )

    assert (
        '<a href="/web/w/default/operator/decisions/0190b6a4-0000-7000-8000-000000000001/">'
        "Answer this question</a>"
    ) in rendered(id="0190b6a4-0000-7000-8000-000000000001")
    # A row without an id (MailboxRow has none yet) renders no link rather than a broken one.
    assert "decisions/" not in rendered()


def test_the_mailbox_links_a_pending_question_to_its_answer_page(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask()
    html = page(signed_in(client, alice), "/web/w/default/operator/")
    assert f'href="{url(question)}"' in html


# Who may answer ------------------------------------------------------------------------


def test_a_reader_sees_the_question_and_is_refused_with_403(
    client: Client, mailbox: Project, bob: Persona
) -> None:
    question = ask()
    html = page(signed_in(client, bob), url(question))
    assert text_of(element(html, "decision-question")) == QUESTION
    assert not has_form(html)
    assert "answer is sent as default/operator, and you have read access" in refusal(html)
    assert "<code>accept</code> Accept the exception" in element(html, "decision-options")
    response = post(client, question)
    assert response.status_code == 403
    assert "you have read access to it, not write" in text_of(
        element(response.content.decode(), "decision-error")
    )
    assert replies() == []


def test_a_writer_on_both_answers_and_sees_the_outcome(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask()
    response = post(signed_in(client, alice), question, comment="Flake is known.")
    assert response.status_code == 303
    [reply] = replies()
    assert response["Location"] == f"{url(question)}?answered={reply.pk}"
    html = page(client, response["Location"])
    outcome = text_of(element(html, "decision-answered"))
    assert outcome.startswith("answered: accept")
    assert f"Reply {reply.pk} was sent from default/operator to default/orchestrator" in outcome
    # The form stays, with the warning that an answer exists.
    assert has_form(html) and 'id="decision-again-notice"' in html


def test_the_reply_carries_in_reply_to_and_the_user_and_the_question_stays_pending(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask()
    post(signed_in(client, alice), question, comment="one\ntwo")
    [reply] = replies()
    assert reply.in_reply_to == question.pk
    assert reply.from_owner_user == "alice"
    assert reply.to_project.name == "orchestrator" and reply.from_project.name == "operator"
    assert reply.decision_reply == {
        "question_id": str(question.pk),
        "option": "accept",
        "comment": "one\ntwo",
        "accepted": True,
        "refusal": None,
        "via": "web",
    }
    question.refresh_from_db()
    assert question.state == Message.State.PENDING


@pytest.mark.parametrize(
    ("on_mailbox", "on_asker"), [("write", "read"), ("read", "write"), ("write", None)]
)
def test_write_on_only_one_project_is_refused_with_403(
    client: Client, mailbox: Project, bob: Persona, on_mailbox: str, on_asker: str | None
) -> None:
    Grant.objects.filter(user=bob.user).delete()
    Grant.objects.create(user=bob.user, project=mailbox, level=on_mailbox)
    if on_asker is not None:
        asker = Project.objects.get(name="orchestrator")
        Grant.objects.create(user=bob.user, project=asker, level=on_asker)
    question = ask()
    html = page(signed_in(client, bob), url(question))
    assert not has_form(html)
    response = post(client, question)
    # No access at all to the asker reads as a missing reply_project: 400, never its name.
    assert response.status_code == (403 if on_asker else 400)
    assert replies() == []


def test_requires_root_refuses_a_writer_who_is_not_root(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask(requires_root=True)
    html = page(signed_in(client, alice), url(question))
    assert not has_form(html)
    assert "only a superuser, or the user named by AI_MEMORY_ROOT_USERNAME" in refusal(html)
    assert post(client, question).status_code == 403
    assert replies() == []


def test_requires_root_is_answered_by_a_superuser(client: Client, mailbox: Project) -> None:
    root = User.objects.create_superuser("operator-root", password="x" * 12)
    question = ask(requires_root=True)
    assert has_form(page(signed_in(client, root), url(question)))
    assert post(client, question).status_code == 303
    assert [reply.from_owner_user for reply in replies()] == ["operator-root"]


def test_requires_root_is_answered_by_the_user_named_root(
    client: Client, settings: SettingsWrapper, mailbox: Project, alice: Persona
) -> None:
    settings.AI_MEMORY_ROOT_USERNAME = "alice"
    question = ask(requires_root=True)
    assert has_form(page(signed_in(client, alice), url(question)))
    assert post(client, question).status_code == 303
    assert [reply.from_owner_user for reply in replies()] == ["alice"]


def test_a_viewer_who_may_not_read_the_mailbox_gets_a_404_showing_nothing(
    client: Client, mailbox: Project, charlie: Persona
) -> None:
    question = ask()
    signed_in(client, charlie)
    for response in (client.get(url(question)), post(client, question)):
        assert response.status_code == 404
        html = response.content.decode()
        assert NOT_FOUND in html
        assert "operator" not in html and "Accept" not in html and str(question.pk) not in html
    assert replies() == []


def test_signed_out_the_page_sends_to_the_login_page_and_sends_nothing(
    client: Client, mailbox: Project
) -> None:
    question = ask()
    for response in (client.get(url(question)), post(client, question)):
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")
    assert replies() == []


@pytest.mark.parametrize("method", ["put", "delete", "patch"])
def test_other_methods_are_refused_with_405(
    client: Client, mailbox: Project, alice: Persona, method: str
) -> None:
    question = ask()
    response = getattr(signed_in(client, alice), method)(url(question))
    assert response.status_code == 405
    assert replies() == []


# CSRF ----------------------------------------------------------------------------------


def test_a_post_without_the_csrf_token_is_refused(mailbox: Project, alice: Persona) -> None:
    client = signed_in(Client(enforce_csrf_checks=True), alice)
    question = ask()
    refused = client.post(url(question), {"option": "accept"})
    assert refused.status_code == 403
    assert replies() == []
    # The page's own form carries the token, and with it the same answer goes through.
    html = page(client, url(question))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', element(html, "decision-form"))
    assert token is not None
    accepted = client.post(
        url(question), {"option": "accept", "csrfmiddlewaretoken": token.group(1)}
    )
    assert accepted.status_code == 303
    assert len(replies()) == 1


# The anonymous server ------------------------------------------------------------------


@pytest.fixture
def anonymous_mailbox(db: None) -> Project:
    make_project(None, "default", "orchestrator")
    return make_project(None, "default", "operator")


def test_an_anonymous_server_shows_the_page_read_only(
    client: Client, anonymous_mailbox: Project
) -> None:
    question = ask()
    html = page(client, url(question))
    assert text_of(element(html, "decision-question")) == QUESTION
    assert not has_form(html)
    assert "AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS=1" in refusal(html)
    assert post(client, question).status_code == 403
    assert replies() == []


def test_an_anonymous_server_answers_when_allowed(
    client: Client, settings: SettingsWrapper, anonymous_mailbox: Project
) -> None:
    settings.AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS = True
    question = ask()
    assert has_form(page(client, url(question)))
    response = post(client, question)
    assert response.status_code == 303
    assert "answered: accept" in text_of(page(client, response["Location"]))
    assert [reply.from_owner_user for reply in replies()] == [""]


def test_an_anonymous_server_never_answers_requires_root(
    client: Client, settings: SettingsWrapper, anonymous_mailbox: Project
) -> None:
    settings.AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS = True
    question = ask(requires_root=True)
    html = page(client, url(question))
    assert not has_form(html)
    assert "never answered anonymously" in refusal(html)
    assert post(client, question).status_code == 403
    assert replies() == []


# Bad input -----------------------------------------------------------------------------


def test_an_unknown_option_is_a_400_with_the_reason(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask()
    response = post(signed_in(client, alice), question, option="maybe", comment="kept")
    assert response.status_code == 400
    html = response.content.decode()
    assert "option 'maybe' is not one this question offers (offered: accept, reject)" in text_of(
        element(html, "decision-error")
    )
    # The question and the form are still there, the comment as typed.
    assert has_form(html) and ">kept</textarea>" in html
    assert replies() == []


def test_no_option_chosen_is_a_400_with_the_reason(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    response = post(signed_in(client, alice), ask(), option="")
    assert response.status_code == 400
    assert "choose one of the options" in text_of(
        element(response.content.decode(), "decision-error")
    )
    assert replies() == []


def _ordinary() -> Message:
    return deliver("default/operator", "default/orchestrator", "hello", subject="decision? no")


def _claimed() -> Message:
    question = ask()
    message_pop(
        principal=ROOT, workspace="default", project="operator", message_id=str(question.pk)
    )
    return question


def _cancelled() -> Message:
    question = ask()
    message_cancel(
        principal=ROOT, workspace="default", project="orchestrator", message_id=str(question.pk)
    )
    return question


@pytest.mark.parametrize("target", [_ordinary, _claimed, _cancelled])
def test_an_id_that_is_not_a_pending_decision_is_404_to_view_and_400_to_answer(
    client: Client, mailbox: Project, alice: Persona, target: Callable[[], Message]
) -> None:
    message = target()
    signed_in(client, alice)
    viewed = client.get(url(message))
    assert viewed.status_code == 404 and NOT_FOUND in viewed.content.decode()
    response = post(client, message)
    assert response.status_code == 400
    reason = text_of(element(response.content.decode(), "decision-error"))
    assert f"message {message.pk} is not a pending decision question" in reason
    assert replies() == []


def test_an_id_that_is_no_uuid_is_a_404(client: Client, mailbox: Project, alice: Persona) -> None:
    response = signed_in(client, alice).get(url("not-a-uuid"))
    assert response.status_code == 404


def test_a_reply_project_that_does_not_exist_is_a_400_with_the_reason(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask(reply_project="default/gone")
    html = page(signed_in(client, alice), url(question))
    assert not has_form(html)
    assert "reply_project default/gone was not found" in refusal(html)
    response = post(client, question)
    assert response.status_code == 400
    assert "reply_project default/gone was not found" in text_of(
        element(response.content.decode(), "decision-error")
    )
    assert replies() == []


def test_a_comment_with_a_nul_is_a_400(client: Client, mailbox: Project, alice: Persona) -> None:
    response = post(signed_in(client, alice), ask(), comment="ok\x00")
    assert response.status_code == 400
    assert replies() == []


# A second answer -----------------------------------------------------------------------


def test_the_page_warns_before_a_second_answer_and_a_confirmed_one_sends_a_second_reply(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask()
    signed_in(client, alice)
    assert post(client, question).status_code == 303
    html = page(client, url(question))
    notice = text_of(element(html, "decision-again-notice"))
    assert notice.startswith("This question already has 1 answer from default/operator.")
    form = element(html, "decision-form")
    assert 'type="checkbox" name="again" value="1" required' in form
    assert "Send another answer</button>" in form
    assert "accept by alice" in text_of(element(html, "decision-earlier"))
    # Unconfirmed: refused, with the reason.
    unconfirmed = post(client, question, option="reject")
    assert unconfirmed.status_code == 409
    assert "answered already" in text_of(element(unconfirmed.content.decode(), "decision-error"))
    assert len(replies()) == 1
    # Confirmed: a second reply.
    confirmed = post(client, question, option="reject", again="1")
    assert confirmed.status_code == 303
    assert [reply.decision_reply["option"] for reply in replies()] == ["accept", "reject"]  # type: ignore[index]


def test_a_form_submitted_twice_sends_one_answer(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask()
    html = page(signed_in(client, alice), url(question))
    key = re.search(r'name="answer_key" value="([^"]+)"', html)
    assert key is not None
    first = post(client, question, answer_key=key.group(1))
    second = post(client, question, answer_key=key.group(1))
    assert first["Location"] == second["Location"]
    assert len(replies()) == 1


def test_the_outcome_still_shows_after_the_asker_cancelled_the_question(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    question = ask()
    landing = post(signed_in(client, alice), question)["Location"]
    message_cancel(
        principal=ROOT, workspace="default", project="orchestrator", message_id=str(question.pk)
    )
    html = page(client, landing)
    assert text_of(element(html, "decision-answered")).startswith("answered: accept")
    assert not has_form(html)
    # Without the landing's reply id too: an accepted answer exists.
    assert text_of(element(page(client, url(question)), "decision-answered")).startswith(
        "answered: accept by alice from default/operator"
    )


# A question whose answer was taken ------------------------------------------------------


def answer_by(principal: Principal, question: Message, option: str, comment: str = "") -> Message:
    """A reply sent from the mailbox to the asker as ``principal``, as the CLI sends it."""
    return message_send(
        principal=principal,
        to_workspace="default",
        to_project="orchestrator",
        from_workspace="default",
        from_project="operator",
        subject=f"decision-reply: {question.pk}",
        body=f"question_id: {question.pk}\noption: {option}\ncomment: {comment}",
    ).message


def take(reply: Message, question: Message) -> None:
    """What ``ai-memory decision wait`` does: pop the reply, cancel the question."""
    message_pop(
        principal=ROOT, workspace="default", project="orchestrator", message_id=str(reply.pk)
    )
    message_cancel(
        principal=ROOT, workspace="default", project="orchestrator", message_id=str(question.pk)
    )


def test_a_taken_answer_shows_the_option_and_who_answered_to_a_reader(
    client: Client, mailbox: Project, alice: Persona, bob: Persona
) -> None:
    question = ask()
    reply = answer_by(alice.principal, question, "reject", "Not yet.")
    take(reply, question)

    html = page(signed_in(client, bob), url(question))

    outcome = text_of(element(html, "decision-answered"))
    assert outcome.startswith("answered: reject by alice from default/operator")
    assert f"Reply {reply.pk} is claimed; the question is cancelled" in outcome
    assert text_of(element(html, "decision-question")) == QUESTION
    assert not has_form(html) and 'id="decision-refusal"' not in html


def test_a_taken_answer_is_marked_answered_not_cancelled(
    client: Client, mailbox: Project, alice: Persona, bob: Persona
) -> None:
    question = ask()
    take(answer_by(alice.principal, question, "reject", "Not yet."), question)

    meta = element(page(signed_in(client, bob), url(question)), "decision-meta")

    assert '<span class="badge badge--answered">answered</span>' in meta
    assert "cancelled" not in meta and "badge--state" not in meta


def test_a_taken_answer_is_still_a_404_to_a_viewer_who_may_not_read_the_mailbox(
    client: Client, mailbox: Project, alice: Persona, charlie: Persona
) -> None:
    question = ask()
    take(answer_by(alice.principal, question, "reject"), question)

    response = signed_in(client, charlie).get(url(question))

    assert response.status_code == 404
    assert NOT_FOUND in response.content.decode()
    assert QUESTION not in response.content.decode()


def test_only_an_accepted_reply_counts_as_answered(
    client: Client, mailbox: Project, alice: Persona, bob: Persona
) -> None:
    question = ask(requires_root=True)
    Grant.objects.filter(user=bob.user, project=mailbox).update(level=Grant.Level.WRITE)
    forged = answer_by(bob.principal, question, "accept")  # bob is not root
    unknown = answer_by(ROOT, question, "maybe")
    signed_in(client, alice)
    pending = page(client, url(question))
    take(forged, question)

    # Pending: the refused replies are listed as not taken, and no second answer is asked
    # to be confirmed.
    earlier = text_of(element(pending, "decision-earlier"))
    assert "maybe" in earlier and "not taken: option 'maybe' is not one" in earlier
    assert "not taken: the question requires root" in earlier
    assert 'id="decision-again-notice"' not in pending
    # Taken and withdrawn, but with no accepted answer: nothing to show.
    assert client.get(url(question)).status_code == 404
    assert client.get(f"{url(question)}?answered={unknown.pk}").status_code == 404


def test_an_answer_page_refuses_a_question_whose_reply_project_is_not_the_asker(
    client: Client, mailbox: Project, alice: Persona
) -> None:
    make_project(alice, "default", "bystander", restricted=True)
    question = ask(reply_project="default/bystander")

    html = page(signed_in(client, alice), url(question))
    response = post(client, question)

    assert "reply_project default/bystander is not the project that asked it" in refusal(html)
    assert not has_form(html)
    assert response.status_code == 400
    assert replies() == []


# Queries -------------------------------------------------------------------------------

# Signed in: the session and the user; the mailbox among the readable projects; the
# question with its sender; the earlier answers; the reply_project; the viewer's grants on
# it and on the mailbox (one query); whether the viewer may read the sender.
DECISION_PAGE_QUERIES_USER = 8


@pytest.mark.parametrize("earlier", [0, 3])
def test_the_page_runs_a_fixed_number_of_queries(
    client: Client,
    mailbox: Project,
    bob: Persona,
    django_assert_num_queries: NumQueries,
    earlier: int,
) -> None:
    question = ask()
    for n in range(earlier):
        message_send(
            principal=ROOT,
            to_workspace="default",
            to_project="orchestrator",
            from_workspace="default",
            from_project="operator",
            subject=f"decision-reply: {question.pk}",
            body=f"question_id: {question.pk}\noption: accept\ncomment: {n}",
        )
    signed_in(client, bob)
    with django_assert_num_queries(DECISION_PAGE_QUERIES_USER):
        html = page(client, url(question))
    assert html.count('class="answers__entry"') == earlier


def test_the_askers_mailbox_marks_a_reply_the_server_did_not_accept(
    client: Client, mailbox: Project, alice: Persona, bob: Persona
) -> None:
    question = ask(requires_root=True)
    Grant.objects.filter(user=bob.user, project=mailbox).update(level=Grant.Level.WRITE)
    answer_by(bob.principal, question, "accept", "Looks fine to me.")  # bob is not root
    answer_by(ROOT, question, "reject", "Hold it.")

    html = page(signed_in(client, alice), "/web/w/default/orchestrator/")

    forged, accepted = (
        text_of(row) for row in re.findall(r'<li class="message">.*?</li>', html, re.S)
    )
    assert "answer: accept not accepted the question requires root" in forged
    assert "Looks fine to me." in forged
    assert "answer: reject" in accepted and "not accepted" not in accepted
    assert "Hold it." in accepted
    assert "question_id:" not in html  # the raw body
