"""The project page's search and a message's page in a real browser: Debian's Chromium
driven by Playwright against a live server, at desktop width and on a 390 px phone, light
and dark (docs/operating.md#the-web-mailbox).

Saves screenshots under ``test-artifacts/`` (git-ignored) for a human look.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, ViewportSize, expect
from pytest_django.live_server_helper import LiveServer

from messaging.models import Message
from tests.conftest import make_project
from tests.webui.conftest import deliver, needs_chromium

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
XSS = "<script>document.title='owned'</script>"

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
def thread(db: None) -> Message:
    """A request to default/web-api, its answer and a follow-up; the answer returned.
    One body is long and unbroken, one holds markup, to try the layout and the escaping."""
    for name in ("web-api", "mobile-app", "billing"):
        make_project(None, "default", name)
    ask = deliver(
        "default/web-api",
        "default/mobile-app",
        "The mobile app needs a streaming export before the next release.\n\n"
        "Please keep the response shape backwards compatible, add a test that covers the "
        "error case, and reply through the inbox once it is deploying to staging.\n"
        f"{XSS}\n"
        "Trace: " + "x" * 180,
        subject="Add a /v1/export endpoint",
    )
    answer = deliver(
        "default/mobile-app",
        "default/web-api",
        "Deploying the export endpoint to staging now; NDJSON, one object per line.\n"
        "  curl -N https://staging.example.test/v1/export?since=2026-01-01T00:00:00Z",
        subject="Re: Add a /v1/export endpoint",
        in_reply_to=ask,
    )
    deliver(
        "default/web-api",
        "default/mobile-app",
        "Thanks, the deploy works. <b>Closing</b> this.",
        subject="Re: Re: Add a /v1/export endpoint",
        in_reply_to=answer,
    )
    deliver(
        "default/web-api", "default/billing", "Rate limit the login route.", subject="Rate limits"
    )
    return answer


def shoot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def no_overflow(page: Page, width: int) -> None:
    """Nothing wider than the screen: no sideways scrolling."""
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def marked_visible(mark: Locator) -> None:
    """A snippet's match stands out: shown, with a fill of its own, not the text's."""
    expect(mark.first).to_be_visible()
    background = mark.first.evaluate("m => getComputedStyle(m).backgroundColor")
    around = mark.first.evaluate("m => getComputedStyle(m.parentElement).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", around)


@pytest.mark.parametrize(
    ("viewport", "label"),
    [({"width": 1200, "height": 900}, "desktop"), ({"width": 390, "height": 844}, "phone")],
)
def test_a_person_searches_and_reads_a_message_and_its_thread(
    thread: Message,
    live_server: LiveServer,
    browser: Browser,
    viewport: ViewportSize,
    label: str,
) -> None:
    page = browser.new_page(viewport=viewport, device_scale_factor=2 if label == "phone" else 1)
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    page.add_init_script(WATCH_CSP)
    width = viewport["width"]

    page.goto(f"{live_server.url}/web/w/default/web-api/")
    search = page.get_by_role("search")
    search.get_by_role("searchbox").fill("deploy")
    search.get_by_role("button", name="Search").click()
    expect(page).to_have_url(f"{live_server.url}/web/w/default/web-api/?q=deploy")
    results = page.get_by_role("region", name="Search")
    expect(results.locator("#search-count")).to_have_text("3 hits for “deploy”")
    hits = results.locator(".hit")
    expect(hits).to_have_count(3)
    marked_visible(results.locator("mark"))
    expect(results.locator("mark").first).to_have_text("deploy", ignore_case=True)
    # The body's markup is text, never an element (PostgreSQL's snippets leave tags out,
    # SQLite's show them as written).
    expect(results).to_contain_text("Closing")
    expect(results.locator("b, script")).to_have_count(0)
    expect(search.get_by_role("searchbox")).to_have_value("deploy")
    no_overflow(page, width)
    shoot(page, f"web-search-{label}-light")
    page.emulate_media(color_scheme="dark")
    marked_visible(results.locator("mark"))
    shoot(page, f"web-search-{label}-dark")
    page.emulate_media(color_scheme="light")

    # A hit opens the message's page: the body fenced and escaped, the thread linked.
    results.get_by_role("link", name="Re: Add a /v1/export endpoint", exact=True).click()
    expect(page).to_have_url(f"{live_server.url}/web/w/default/web-api/messages/{thread.pk}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Re: Add a /v1/export endpoint")
    expect(page.locator("#message-meta")).to_contain_text("pending in the outbox of")
    body = page.locator("pre#message-body")
    expect(body).to_contain_text("curl -N https://staging.example.test/v1/export")
    expect(body).to_have_css("white-space", "pre-wrap")
    entries = page.locator("#thread .thread__entry")
    expect(entries).to_have_count(3)
    expect(entries.nth(1).locator("[aria-current=page]")).to_have_text(
        "Re: Add a /v1/export endpoint"
    )
    no_overflow(page, width)
    shoot(page, f"web-message-{label}-light")
    page.emulate_media(color_scheme="dark")
    shoot(page, f"web-message-{label}-dark")
    page.emulate_media(color_scheme="light")

    # The first message of the thread: its <script> is text, and it never ran.
    entries.first.get_by_role("link").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Add a /v1/export endpoint")
    expect(page.locator("pre#message-body")).to_contain_text(XSS)
    expect(page).to_have_title("Add a /v1/export endpoint · default/web-api · ai-memory")
    no_overflow(page, width)
    if label == "phone":
        shoot(page, "web-message-long-phone-light")

    # Back to the project page: the Mailbox's rows link to the message pages too.
    page.get_by_role("link", name="Back to default/web-api").click()
    mailbox = page.get_by_role("region", name="Mailbox")
    mailbox.get_by_role("link", name="Rate limits").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Rate limits")

    assert page.evaluate("window.cspViolations") == []
    assert [line for line in console if "Content Security Policy" in line] == []


def test_an_over_long_query_shows_its_error_and_the_page_works_without_javascript(
    thread: Message, live_server: LiveServer, browser: Browser
) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{live_server.url}/web/w/default/web-api/")
    page.get_by_role("searchbox").fill("q" * 501)
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#search-error")).to_have_text(
        "query must be at most 500 characters, got 501"
    )
    no_overflow(page, 390)
    shoot(page, "web-search-error-phone")
    page.get_by_role("searchbox").fill("staging")
    page.get_by_role("button", name="Search").click()
    expect(page.locator(".hit")).to_have_count(2)
    context.close()
