"""The pages in a real browser: Debian's Chromium driven by Playwright against a live server.

Saves light and dark screenshots under ``test-artifacts/`` (git-ignored) for a human look.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Route, expect
from pytest_django.live_server_helper import LiveServer

from tests.conftest import Persona, make_project
from tests.webui.conftest import deliver, needs_chromium

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TOOLTIP = "Messages from other projects waiting for an agent here"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    needs_chromium,
]


@pytest.fixture
def mail(db: None) -> None:
    """Seven requests waiting in default/web-api, one in tools/docs-site, none elsewhere."""
    for workspace, project in [
        ("default", "web-api"),
        ("default", "mobile-app"),
        ("default", "billing"),
        ("tools", "docs-site"),
        ("tools", "release-bot"),
    ]:
        make_project(None, workspace, project)
    requests = [
        ("Add a /v1/export endpoint", "default/mobile-app"),
        ("Rate limit the login route", "default/billing"),
        ("", "tools/release-bot"),
        ("Bump the API version header", "default/mobile-app"),
        ("Document the pagination cursor", "tools/docs-site"),
        ("Return 409 on duplicate invoices", "default/billing"),
        ("Expose build metadata", "tools/release-bot"),
    ]
    for n, (subject, sender) in enumerate(requests, start=1):
        deliver(
            "default/web-api",
            sender,
            f"Request {n}: the mobile app needs this before the next release.\n\n"
            "Please keep the response shape backwards compatible, add a test that covers "
            "the error case, and reply through the inbox once it is deployed to staging.",
            subject=subject,
        )
    deliver("tools/docs-site", "default/web-api", subject="Publish the new error codes")


def shoot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_home_shows_inbox_badges_and_the_summary(
    mail: None, live_server: LiveServer, browser: Browser
) -> None:
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    page.goto(f"{live_server.url}/web/")
    expect(page).to_have_title("Projects · ai-memory")
    expect(page.get_by_role("heading", level=1, name="Projects")).to_be_visible()
    badge = page.locator(".card", has=page.get_by_role("link", name="web-api")).locator(".badge")
    expect(badge).to_have_text("7 inbox")
    expect(badge).to_have_attribute("title", TOOLTIP)
    # The stylesheet was served and applied: the badge is amber.
    expect(badge).to_have_css("background-color", "rgb(253, 231, 169)")
    quiet = page.locator(".card", has=page.get_by_role("link", name="mobile-app"))
    expect(quiet.locator(".badge")).to_have_count(0)
    expect(page.locator("#inbox-summary")).to_have_text(
        "✉ 8 messages waiting for agents in default/web-api (7), tools/docs-site (1)."
    )
    shoot(page, "web-home-light")
    page.emulate_media(color_scheme="dark")
    expect(badge).to_have_css("background-color", "rgb(74, 50, 6)")
    shoot(page, "web-home-dark")


def test_project_page_shows_the_mailbox_above_recent_activity(
    mail: None, live_server: LiveServer, browser: Browser
) -> None:
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    page.goto(f"{live_server.url}/web/w/default/web-api/")
    expect(page).to_have_title("default/web-api · ai-memory")
    mailbox = page.get_by_role("region", name="Mailbox")
    expect(mailbox.locator("#mailbox-count")).to_have_text("5 of 7 pending")
    expect(mailbox.locator(".message")).to_have_count(5)
    expect(mailbox.locator(".message__subject").first).to_have_text("Add a /v1/export endpoint")
    expect(mailbox.locator(".message__subject").nth(2)).to_have_text("(no subject)")
    expect(mailbox.get_by_role("link", name="default/mobile-app").first).to_have_attribute(
        "href", "/web/w/default/mobile-app/"
    )
    expect(mailbox.locator("code").first).to_have_text(
        "ai-memory message list --workspace default --project web-api --limit 200"
    )
    activity = page.get_by_role("region", name="Recent Activity")
    expect(activity.locator(".activity__entry").first).to_contain_text(
        "message sent to tools/docs-site"
    )
    mailbox_box, activity_box = mailbox.bounding_box(), activity.bounding_box()
    assert mailbox_box is not None and activity_box is not None
    assert mailbox_box["y"] < activity_box["y"]
    shoot(page, "web-project-light")
    page.emulate_media(color_scheme="dark")
    shoot(page, "web-project-dark")


def test_pages_fit_a_phone_screen(mail: None, live_server: LiveServer, browser: Browser) -> None:
    page = browser.new_page(viewport={"width": 390, "height": 844}, device_scale_factor=2)
    for path, name in [
        ("/web/", "web-home-phone"),
        ("/web/w/default/web-api/", "web-project-phone"),
    ]:
        page.goto(f"{live_server.url}{path}")
        # Nothing wider than the screen: no sideways scrolling on a phone.
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        shoot(page, f"{name}-light")
        page.emulate_media(color_scheme="dark")
        shoot(page, f"{name}-dark")
        page.emulate_media(color_scheme="light")


@pytest.fixture
def alices_notes(alice: Persona) -> None:
    make_project(alice, "default", "alices-notes", restricted=True)


def test_with_auth_on_a_user_signs_in_to_see_their_projects(
    auth_on: str, alices_notes: None, mail: None, live_server: LiveServer, browser: Browser
) -> None:
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    page.goto(f"{live_server.url}/web/")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/web/")
    expect(page.get_by_role("heading", level=1, name="Sign in")).to_be_visible()
    shoot(page, "web-login-light")
    page.emulate_media(color_scheme="dark")
    shoot(page, "web-login-dark")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{live_server.url}/web/")
    expect(page.get_by_role("link", name="alices-notes")).to_be_visible()
    expect(page.get_by_role("navigation", name="Main")).to_contain_text("alice")


def test_api_docs_load_with_no_internet(live_server: LiveServer, browser: Browser) -> None:
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    foreign: list[str] = []

    def only_this_server(route: Route) -> None:
        if route.request.url.startswith(live_server.url):
            route.continue_()
        else:
            foreign.append(route.request.url)
            route.abort()

    page.route("**/*", only_this_server)
    page.goto(f"{live_server.url}/api/v1/docs")
    expect(page.locator(".opblock-summary-path", has_text="/api/v1/messages/pop")).to_be_visible()
    expect(page.locator(".opblock").first).to_be_visible()
    assert foreign == []
    shoot(page, "api-docs")


# Records violations of the Content-Security-Policy as the page reports them; init scripts
# run in each new document before the page's own and are not subject to its policy.
WATCH_CSP = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.cspViolations.push(`${event.violatedDirective} ${event.blockedURI}`);
});
"""


def watch_csp(page: Page) -> list[str]:
    """Collect the console of ``page`` across its navigations; Chromium reports each
    refused resource there too, as "... violates the following Content Security Policy"."""
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    page.add_init_script(WATCH_CSP)
    return console


def csp_reports(console: list[str]) -> list[str]:
    return [line for line in console if "Content Security Policy" in line]


def csp_violations(page: Page) -> list[str]:
    """The violation events of the document now shown."""
    found: list[str] = page.evaluate("window.cspViolations")
    return found


def test_the_pages_run_under_the_content_security_policy(
    mail: None, live_server: LiveServer, browser: Browser
) -> None:
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    console = watch_csp(page)
    response = page.goto(f"{live_server.url}/web/")
    assert response is not None
    assert "script-src 'self'" in response.headers["content-security-policy"]
    # Still styled from the stylesheet: the header bar has its layout, the badge its colour.
    badge = page.locator(".card", has=page.get_by_role("link", name="web-api")).locator(".badge")
    expect(badge).to_have_css("background-color", "rgb(253, 231, 169)")
    expect(page.locator(".site-header__inner")).to_have_css("display", "flex")
    assert csp_violations(page) == []
    page.goto(f"{live_server.url}/web/w/default/web-api/")
    expect(page.get_by_role("region", name="Mailbox").locator(".message")).to_have_count(5)
    expect(page.locator(".message").first).to_have_css("border-left-width", "3px")
    assert csp_violations(page) == []
    assert csp_reports(console) == []


def test_admin_and_the_api_docs_work_under_the_content_security_policy(
    auth_on: str, admin_user: object, mail: None, live_server: LiveServer, browser: Browser
) -> None:
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    console = watch_csp(page)
    page.goto(f"{live_server.url}/admin/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("password")  # pytest-django's admin_user
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
    # Admin's scripts run: the autocomplete widget opens and lists users ...
    page.goto(f"{live_server.url}/admin/projects/apitoken/add/")
    page.locator(".select2-selection").click()
    expect(page.locator(".select2-results__option", has_text="admin")).to_be_visible()
    assert csp_violations(page) == []
    # ... and an inline form row is added on the project page.
    page.goto(f"{live_server.url}/admin/projects/project/")
    page.locator("#result_list tbody th a").first.click()
    rows = page.locator("#grants-group tr.dynamic-grants")
    expect(rows).to_have_count(0)
    page.get_by_text("Add another Grant").click()
    expect(rows).to_have_count(1)
    assert csp_violations(page) == []
    page.goto(f"{live_server.url}/api/v1/docs")
    expect(page.locator(".opblock").first).to_be_visible()
    assert csp_violations(page) == []
    assert csp_reports(console) == []


@pytest.fixture
def pages(mail: None) -> None:
    """Pages of default/web-api: one pinned, two not, one with a long table and code line."""
    from projects.models import Page as ProjectPage  # here: this file grows by appending

    project = make_project(None, "default", "web-api")
    for path, pinned, body in [
        ("runbook", True, "# Runbook\n\nRestart with `make serve`."),
        ("notes/release", False, BROWSER_PAGE),
        ("notes/api", False, "## API\n\n- cursors\n- errors"),
    ]:
        ProjectPage.objects.create(
            project=project,
            path=path,
            body=body,
            pinned=pinned,
            updated_by_agent="claude-code",
            updated_by_user="alice",
        )


BROWSER_PAGE = """# Release plan

Ship the **export** endpoint; see [the API notes](api).

1. Freeze the schema
2. Tag the release

```sh
ai-memory message send --to-workspace tools --to-project docs-site "Publish the new error codes and the long flag list"
```

| step | owner | status |
|------|-------|--------|
| freeze | web-api | done |
| tag | release-bot | pending |

<script>document.title = "pwned"</script>
[click me](javascript:document.title='pwned')
"""


def test_a_page_is_listed_on_the_project_page_and_renders_as_markdown(
    pages: None, live_server: LiveServer, browser: Browser
) -> None:
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    console = watch_csp(page)
    page.goto(f"{live_server.url}/web/w/default/web-api/")
    listed = page.get_by_role("region", name="Pages")
    expect(listed.locator(".pages__path")).to_have_text(["runbook", "notes/api", "notes/release"])
    expect(listed.locator(".badge--pinned")).to_have_count(1)
    # The Mailbox is unchanged by the pages: still 5 of 7.
    expect(page.get_by_role("region", name="Mailbox").locator("#mailbox-count")).to_have_text(
        "5 of 7 pending"
    )
    assert csp_violations(page) == []
    listed.scroll_into_view_if_needed()
    listed.screenshot(path=str(ARTIFACTS / "web-project-pages-light.png"))
    page.emulate_media(color_scheme="dark")
    listed.screenshot(path=str(ARTIFACTS / "web-project-pages-dark.png"))
    page.emulate_media(color_scheme="light")
    listed.get_by_role("link", name="notes/release").click()
    expect(page).to_have_url(f"{live_server.url}/web/w/default/web-api/pages/notes/release")
    expect(page).to_have_title("notes/release · default/web-api · ai-memory")
    body = page.get_by_role("article", name="Page content")
    expect(body.get_by_role("heading", name="Release plan")).to_be_visible()
    expect(body.locator("ol > li")).to_have_count(2)
    expect(body.locator("table td").first).to_have_text("freeze")
    # Raw HTML and the javascript: link stay text; neither ran.
    expect(body).to_contain_text('<script>document.title = "pwned"</script>')
    expect(body).to_contain_text("[click me](javascript:")
    expect(body.locator("a")).to_have_count(1)
    meta = page.locator("#page-meta")
    for shown in ("Updated just now", "by agent claude-code", "user alice"):
        expect(meta).to_contain_text(shown)
    assert page.title() != "pwned"
    shoot(page, "web-page-light")
    page.emulate_media(color_scheme="dark")
    shoot(page, "web-page-dark")
    # A relative link leads to the sibling page.
    body.get_by_role("link", name="the API notes").click()
    expect(page).to_have_url(f"{live_server.url}/web/w/default/web-api/pages/notes/api")
    expect(page.get_by_role("article", name="Page content").get_by_role("heading")).to_have_text(
        "API"
    )
    assert csp_violations(page) == []
    assert csp_reports(console) == []


def test_a_page_fits_a_phone_screen(pages: None, live_server: LiveServer, browser: Browser) -> None:
    page = browser.new_page(viewport={"width": 390, "height": 844}, device_scale_factor=2)
    page.goto(f"{live_server.url}/web/w/default/web-api/pages/notes/release")
    expect(page.get_by_role("heading", name="Release plan")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shoot(page, "web-page-phone-light")
    page.emulate_media(color_scheme="dark")
    shoot(page, "web-page-phone-dark")
