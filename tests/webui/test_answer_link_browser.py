"""Answer links in a real browser: Debian's Chromium driven by Playwright against a live
server (docs/reference.md#answer-links). A person opens the link a notification carried,
sends the answer, sees it answered; and signs in first for a question that requires root.
The home page's "Waiting on you" leads to the answer page.

Saves light, dark and phone screenshots under ``test-artifacts/`` (git-ignored).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from pytest_django.fixtures import Settings as SettingsWrapper
from pytest_django.live_server_helper import LiveServer

from messaging.answer_links import answer_link_make
from messaging.models import Message
from tests.conftest import Persona, make_project
from tests.decision_examples import question_send
from tests.webui.conftest import needs_chromium

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    needs_chromium,
]

# Records violations of the Content-Security-Policy (see test_decision_browser.py).
WATCH_CSP = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.cspViolations.push(`${event.violatedDirective} ${event.blockedURI}`);
});
"""


def ask(*, requires_root: bool) -> Message:
    """A question from default/orchestrator in alice's mailbox default/operator."""
    return question_send(
        options=[
            {
                "id": "accept",
                "label": "Accept the exception",
                "description": "Land the change with the flake written down.",
                "recommended": True,
            },
            {"id": "reject", "label": "Send it back"},
        ],
        requires_root=requires_root,
        details="Failed once in forty CI runs.\nThe flake is timed in the export suite.",
        deadline="2h",
    )


@pytest.fixture
def projects(auth_on: str, alice: Persona) -> None:
    make_project(alice, "default", "operator", restricted=True)
    make_project(alice, "default", "orchestrator", restricted=True)


@pytest.fixture
def plain_link(projects: None, alice: Persona) -> str:
    """alice's link answering ``accept`` to a question that does not require root."""
    return f"/web/a/{answer_link_make(ask(requires_root=False), 'accept', alice.user)}/"


@pytest.fixture
def root_link(projects: None, settings: SettingsWrapper, alice: Persona) -> str:
    """alice's link answering ``reject`` to a question that requires root; alice is root."""
    settings.AI_MEMORY_ROOT_USERNAME = "alice"
    return f"/web/a/{answer_link_make(ask(requires_root=True), 'reject', alice.user)}/"


def shoot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_a_person_answers_through_a_link_without_signing_in(
    plain_link: str, live_server: LiveServer, browser: Browser
) -> None:
    path = plain_link
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    page.add_init_script(WATCH_CSP)

    page.goto(f"{live_server.url}{path}")
    expect(page).to_have_title("Answer · default/operator · ai-memory")
    expect(page.get_by_role("heading", level=1)).to_have_text(
        "Accept the known-flake exception on the export test?"
    )
    expect(page.locator("#link-meta")).to_contain_text("asked by default/orchestrator")
    expect(page.locator("#link-meta")).to_contain_text("deadline")
    expect(page.locator("#link-option")).to_contain_text("Accept the exception accept")
    expect(page.locator("#link-details")).to_have_css("white-space", "pre-wrap")
    shoot(page, "web-answer-link-light")
    page.emulate_media(color_scheme="dark")
    shoot(page, "web-answer-link-dark")
    page.emulate_media(color_scheme="light")
    # Looking answered nothing.
    expect(page.locator("#link-outcome")).to_have_count(0)

    page.get_by_label("Comment (optional)").fill("Known flake.\nTicket filed.")
    page.get_by_role("button", name="Send answer").click()
    expect(page).to_have_url(f"{live_server.url}{path}")
    expect(page.locator("#link-outcome .notice__title")).to_have_text("answered: accept")
    expect(page.locator("#link-outcome")).to_contain_text("By alice from default/operator")
    expect(page.locator("#link-form")).to_have_count(0)
    reply_id = page.locator("#link-reply-id").inner_text()
    shoot(page, "web-answer-link-answered")

    # A reload sends nothing more (the POST was followed by a GET).
    page.reload()
    expect(page.locator("#link-outcome .notice__title")).to_have_text("answered: accept")
    assert page.locator("#link-reply-id").inner_text() == reply_id
    assert page.evaluate("window.cspViolations") == []
    assert [line for line in console if "Content Security Policy" in line] == []


def test_a_requires_root_link_signs_in_first_and_fits_a_phone(
    root_link: str, live_server: LiveServer, browser: Browser
) -> None:
    path = root_link
    page = browser.new_page(viewport={"width": 390, "height": 844}, device_scale_factor=2)
    page.add_init_script(WATCH_CSP)

    page.goto(f"{live_server.url}{path}")
    expect(page.locator("#link-meta .badge--root")).to_have_text("requires root")
    expect(page.get_by_role("button", name="Send answer")).to_have_count(0)
    page.get_by_role("link", name="sign in as alice").click()
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/web/a/"))
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{live_server.url}{path}")
    expect(page.get_by_role("button", name="Send answer")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shoot(page, "web-answer-link-phone")

    page.get_by_role("button", name="Send answer").click()
    expect(page.locator("#link-outcome .notice__title")).to_have_text("answered: reject")
    assert page.evaluate("window.cspViolations") == []


def test_waiting_on_you_leads_to_the_answer_page(
    plain_link: str, live_server: LiveServer, browser: Browser
) -> None:
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.add_init_script(WATCH_CSP)
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{live_server.url}/web/")
    waiting = page.get_by_role("region", name="Waiting on you")
    expect(waiting.locator(".waiting__entry")).to_have_count(1)
    expect(waiting.locator(".waiting__meta")).to_contain_text("asked by default/orchestrator")
    expect(waiting.locator(".waiting__meta")).to_contain_text("deadline")
    shoot(page, "web-home-waiting")
    waiting.get_by_role("link", name="Accept the known-flake exception on the export test?").click()
    expect(page).to_have_url(re.compile(r"/web/w/default/operator/decisions/[0-9a-f-]+/$"))
    expect(page.get_by_role("button", name="Send answer")).to_be_visible()
    assert page.evaluate("window.cspViolations") == []
