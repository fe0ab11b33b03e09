"""The decision answer page in a real browser: Debian's Chromium driven by Playwright
against a live server. A person signs in, answers, sees the outcome, and answers again.

Saves light, dark and phone screenshots under ``test-artifacts/`` (git-ignored).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect
from pytest_django.live_server_helper import LiveServer

from aimemory_site.lib.decisions import decision_body_write, decision_subject
from aimemory_site.lib.principal import Principal
from messaging.answer_services import decision_answer
from messaging.models import Message
from messaging.services import message_send
from projects.models import Grant, Project
from tests.conftest import Persona, make_project
from tests.decision_examples import FLAKE_QUESTION, answer_taken, question_send
from tests.webui.conftest import needs_chromium

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    needs_chromium,
]

# Records violations of the Content-Security-Policy; init scripts run in each new
# document before the page's own and are not subject to its policy.
WATCH_CSP = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.cspViolations.push(`${event.violatedDirective} ${event.blockedURI}`);
});
"""


@pytest.fixture
def question(auth_on: str, alice: Persona) -> Message:
    """alice's restricted mailbox default/operator holds a question from default/orchestrator."""
    make_project(alice, "default", "operator", restricted=True)
    make_project(alice, "default", "orchestrator", restricted=True)
    return question_send(
        options=[
            {
                "id": "accept",
                "label": "Accept the exception",
                "description": "Land the change with the flake written down.",
                "recommended": True,
            },
            {
                "id": "reject",
                "label": "Send it back",
                "description": "The test has to be stable first.",
            },
        ],
        details="Failed once in forty CI runs.\nThe flake is timed in the export suite.",
        links=["https://example.test/pull/12", "javascript:alert(1)"],
    )


def shoot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_a_person_answers_a_question_through_the_page(
    question: Message, live_server: LiveServer, browser: Browser
) -> None:
    path = f"/web/w/default/operator/decisions/{question.pk}/"
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    page.add_init_script(WATCH_CSP)

    page.goto(f"{live_server.url}{path}")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next="))
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{live_server.url}{path}")
    expect(page).to_have_title("Decision · default/operator · ai-memory")
    expect(page.get_by_role("heading", level=1)).to_have_text(
        "Accept the known-flake exception on the export test?"
    )
    expect(page.get_by_role("link", name="https://example.test/pull/12")).to_be_visible()
    expect(page.locator("#decision-links code")).to_have_text("javascript:alert(1)")
    expect(page.locator(".choice--recommended")).to_contain_text("(recommended)")
    # Styled from the stylesheet, under the strict policy.
    expect(page.locator("#decision-details")).to_have_css("white-space", "pre-wrap")
    shoot(page, "web-decision-light")
    page.emulate_media(color_scheme="dark")
    shoot(page, "web-decision-dark")
    page.emulate_media(color_scheme="light")

    # The first answer.
    page.get_by_role("radio", name=re.compile("Send it back")).check()
    page.get_by_label("Comment (optional)").fill("Stabilise it first.\nThen ask again.")
    page.get_by_role("button", name="Send answer").click()
    expect(page).to_have_url(re.compile(rf"{re.escape(path)}\?answered={UUID}$"))
    outcome = page.locator("#decision-answered")
    expect(outcome).to_contain_text("answered: reject")
    reply_id = page.locator("#decision-reply-id").inner_text()
    assert re.fullmatch(UUID, reply_id)
    assert page.url.endswith(f"?answered={reply_id}")
    shoot(page, "web-decision-answered")

    # A second answer: the page warns first, and the box must be ticked to send it.
    expect(page.locator("#decision-again-notice")).to_contain_text("already has 1 answer")
    expect(page.locator("#decision-earlier")).to_contain_text("reject by alice")
    page.get_by_role("radio", name=re.compile("Accept the exception")).check()
    confirm = page.get_by_label("Send another answer anyway")
    assert confirm.evaluate("box => box.validity.valueMissing")  # the form will not submit
    confirm.check()
    page.get_by_role("button", name="Send another answer").click()
    expect(page.locator("#decision-answered")).to_contain_text("answered: accept")
    expect(page.locator("#decision-earlier li")).to_have_count(2)

    # Both replies arrived in the asker's inbox, and the question is still pending.
    page.goto(f"{live_server.url}/web/w/default/orchestrator/")
    mailbox = page.get_by_role("region", name="Mailbox")
    expect(mailbox.locator("#mailbox-count")).to_have_text("2 pending")
    expect(mailbox.locator(".message__subject").first).to_have_text(
        f"decision-reply: {question.pk}"
    )
    page.goto(f"{live_server.url}/web/w/default/operator/")
    expect(page.get_by_role("region", name="Mailbox").locator("#mailbox-count")).to_have_text(
        "1 pending"
    )
    assert page.evaluate("window.cspViolations") == []
    assert [line for line in console if "Content Security Policy" in line] == []


def test_the_answer_page_fits_a_phone_screen(
    question: Message, live_server: LiveServer, browser: Browser
) -> None:
    page = browser.new_page(viewport={"width": 390, "height": 844}, device_scale_factor=2)
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-password")
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{live_server.url}/web/w/default/operator/decisions/{question.pk}/")
    expect(page.get_by_role("button", name="Send answer")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shoot(page, "web-decision-phone-light")
    page.emulate_media(color_scheme="dark")
    shoot(page, "web-decision-phone-dark")


def sign_in(page: Page, live_server: LiveServer, name: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(f"{name}-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


@pytest.fixture
def root_question(question: Message) -> Message:
    """A second question in the mailbox, one that requires root."""
    return message_send(
        principal=Principal.root(),
        to_workspace="default",
        to_project="operator",
        from_workspace="default",
        from_project="orchestrator",
        subject=decision_subject("Merge the release?"),
        body=decision_body_write(
            "Merge the release branch now that CI is green?",
            [{"id": "merge", "label": "Merge now"}, {"id": "hold", "label": "Hold it"}],
            requires_root=True,
            reply_project="default/orchestrator",
        ),
    ).message


def test_the_mailbox_shows_each_question_once(
    root_question: Message, live_server: LiveServer, browser: Browser
) -> None:
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/web/w/default/operator/")
    mailbox = page.get_by_role("region", name="Mailbox")
    first, second = mailbox.locator(".message").all()

    expect(first.locator(".message__subject")).to_have_text(
        "Accept the known-flake exception on the export test?"
    )
    expect(first.get_by_text("Accept the known-flake exception", exact=False)).to_have_count(1)
    expect(first).not_to_contain_text("Accept the known-flake exception?")  # the subject
    expect(first).not_to_contain_text("reply_project")  # the raw body
    expect(first.locator(".decision__options li").first).to_have_text(
        "accept Accept the exception (recommended)"
    )
    expect(first.locator(".message__snippet")).to_have_text(
        "Failed once in forty CI runs. The flake is timed in the export suite."
    )
    expect(first.locator(".badge--root")).to_have_count(0)
    expect(second.locator(".message__subject")).to_have_text(
        "Merge the release branch now that CI is green? requires root"
    )
    expect(second).not_to_contain_text("Merge the release?")
    expect(second.locator(".decision__options li")).to_have_text(
        ["merge Merge now", "hold Hold it"]
    )
    expect(second.get_by_role("link", name="Answer this question")).to_have_attribute(
        "href", f"/web/w/default/operator/decisions/{root_question.pk}/"
    )
    shoot(page, "web-mailbox-decisions")


@pytest.fixture
def taken(question: Message, alice: Persona, bob: Persona) -> Message:
    """alice answered the question, and the asker took the answer as ``decision wait``
    does: popped the reply and cancelled the question. bob reads the mailbox."""
    operator = Project.objects.get(workspace__name="default", name="operator")
    Grant.objects.create(user=bob.user, project=operator, level=Grant.Level.READ)
    reply = decision_answer(
        principal=alice.principal,
        workspace="default",
        project="operator",
        question_id=question.pk,
        option="reject",
        comment="Stabilise it first.",
    ).message
    answer_taken(question, reply)
    return reply


def test_a_taken_answer_shows_what_was_answered_and_by_whom(
    taken: Message, question: Message, charlie: Persona, live_server: LiveServer, browser: Browser
) -> None:
    path = f"/web/w/default/operator/decisions/{question.pk}/"
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    sign_in(page, live_server, "bob")
    response = page.goto(f"{live_server.url}{path}")

    assert response is not None and response.status == 200
    outcome = page.locator("#decision-answered")
    expect(outcome.locator(".notice__title")).to_have_text("answered: reject")
    expect(page.locator("#decision-answered-by")).to_have_text("by alice from default/operator")
    expect(page.locator("#decision-reply-id")).to_have_text(str(taken.pk))
    expect(page.locator("#decision-form")).to_have_count(0)
    shoot(page, "web-decision-taken")

    # The question's own page says the same, in the green of a decision taken.
    page.goto(f"{live_server.url}/web/w/default/operator/messages/{question.pk}/")
    pill = page.locator("#message-meta .badge")
    expect(pill).to_have_text("answered")
    expect(pill).to_have_css("color", "rgb(27, 74, 52)")
    expect(page.locator("#message-answered .notice__title")).to_have_text("answered: reject")
    expect(page.locator("#message-answer-comment")).to_have_text("Stabilise it first.")
    shoot(page, "web-message-answered")

    other = browser.new_page()
    sign_in(other, live_server, "charlie")
    refused = other.goto(f"{live_server.url}{path}")
    assert refused is not None and refused.status == 404
    expect(other.locator("body")).not_to_contain_text("Accept the known-flake exception")
    expect(other.locator("body")).not_to_contain_text("reject")


# A word no line can break, as the anonymous answer page's refusal names it.
UNBROKEN = "AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS=1"
PHONE: ViewportSize = {"width": 390, "height": 844}

# The elements whose box reaches past the viewport's right edge, to name in a failure.
WIDER_THAN_VIEWPORT = """() => [...document.querySelectorAll("body *")]
  .filter((node) => node.getBoundingClientRect().right > document.documentElement.clientWidth)
  .map((node) => `${node.tagName.toLowerCase()}.${node.className}`)"""


@pytest.fixture
def anonymous_question(db: None) -> Message:
    """On an anonymous server (answers off), default/operator holds a question whose
    options and details carry unbroken words."""
    make_project(None, "default", "operator")
    make_project(None, "default", "orchestrator")
    return question_send(
        options=[
            {"id": "accept", "label": f"Set_{UNBROKEN}", "description": f"Then {UNBROKEN}_x9"},
            {"id": "reject", "label": "Send it back"},
        ],
        details=f"Export with {UNBROKEN}_AND_AI_MEMORY_PUBLIC_URL=https://memory.example.test.",
    )


def test_on_a_phone_the_answer_page_wraps_an_unbroken_word(
    anonymous_question: Message, live_server: LiveServer, browser: Browser
) -> None:
    page = browser.new_page(viewport=PHONE)
    page.goto(f"{live_server.url}/web/w/default/operator/decisions/{anonymous_question.pk}/")

    refusal = page.locator("#decision-refusal")
    expect(refusal).to_contain_text(UNBROKEN)
    assert refusal.evaluate("node => node.scrollWidth <= node.clientWidth")  # none spills out
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], page.evaluate(WIDER_THAN_VIEWPORT)
    shoot(page, "web-decision-phone-anonymous")


def test_the_answer_page_shows_its_question_once(
    anonymous_question: Message, live_server: LiveServer, browser: Browser
) -> None:
    page = browser.new_page(viewport=PHONE)
    page.goto(f"{live_server.url}/web/w/default/operator/decisions/{anonymous_question.pk}/")

    expect(page.get_by_role("heading", level=1)).to_have_text(FLAKE_QUESTION)
    # Neither the subject's short form nor the raw body says it again, folded away or not.
    expect(page.get_by_text("Accept the known-flake exception")).to_have_count(1)
    assert page.content().count("Accept the known-flake exception") == 1
    # The message as it was sent is one link away, on its own page.
    page.get_by_role("link", name="The message as it was sent").click()
    expect(page).to_have_url(
        f"{live_server.url}/web/w/default/operator/messages/{anonymous_question.pk}/"
    )
    expect(page.locator("#message-body")).to_contain_text(f"question: {FLAKE_QUESTION}")
