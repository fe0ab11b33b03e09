"""Web mailbox helpers: read a page as text, pick out its parts, and Debian's Chromium
under Playwright for the tests that drive a real browser."""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.http import HttpResponse
from django.test import Client
from playwright.sync_api import Browser, sync_playwright

from aimemory_site.lib.principal import Principal
from messaging.models import Message
from messaging.services import message_send

_INLINE_TAG = re.compile(r"</?(?:a|code|span|time)\b[^>]*>")
_TAG = re.compile(r"<[^>]+>")
_CSRF_VALUE = re.compile(r'(name="csrfmiddlewaretoken" value=")[^"]*(")')


def page(client: Client, path: str) -> str:
    """GET ``path``, expect 200, and return the HTML."""
    response = client.get(path)
    assert response.status_code == 200, response
    assert isinstance(response, HttpResponse)
    return response.content.decode()


def text_of(markup: str) -> str:
    """What a reader sees: tags dropped (a block tag breaks words, an inline one does not),
    entities decoded, whitespace collapsed."""
    inline_dropped = _INLINE_TAG.sub("", markup)
    return " ".join(html.unescape(_TAG.sub(" ", inline_dropped)).split())


def element(markup: str, element_id: str) -> str:
    """The markup of the element with ``id``; it must not nest its own tag."""
    match = re.search(rf'<(\w+)[^>]*\bid="{re.escape(element_id)}"[^>]*>(.*?)</\1>', markup, re.S)
    assert match is not None, f"no element #{element_id}"
    return match.group(0)


def section(markup: str, heading_id: str) -> str:
    """The ``<section aria-labelledby=heading_id>`` of the page."""
    match = re.search(
        rf'<section[^>]*aria-labelledby="{re.escape(heading_id)}"[^>]*>(.*?)</section>',
        markup,
        re.S,
    )
    assert match is not None, f"no section labelled by #{heading_id}"
    return match.group(1)


def cards(markup: str) -> dict[str, str]:
    """The home page's project cards as ``{"workspace/project": card markup}``."""
    found: dict[str, str] = {}
    for card in re.findall(r'<li class="card">(.*?)</li>', markup, re.S):
        link = re.search(r'href="/web/w/([^/"]+)/([^/"]+)/"', card)
        assert link is not None
        found[f"{link.group(1)}/{link.group(2)}"] = card
    return found


def without_csrf_token(markup: str) -> str:
    """The page with its per-request CSRF token (of the sign-out form) blanked."""
    return _CSRF_VALUE.sub(r"\1\2", markup)


def deliver(
    to: str,
    sender: str,
    body: str = "Please review the export endpoint.",
    *,
    subject: str | None = None,
) -> Message:
    """Send from ``sender`` to ``to`` (each ``"workspace/project"``) as root would."""
    to_workspace, to_project = to.split("/")
    from_workspace, from_project = sender.split("/")
    return message_send(
        principal=Principal.root(),
        to_workspace=to_workspace,
        to_project=to_project,
        from_workspace=from_workspace,
        from_project=from_project,
        body=body,
        subject=subject,
    ).message


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# For a module's pytestmark: the browser tests need the system's Chromium.
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian Chromium is not installed at /usr/bin/chromium (apt-get install chromium)",
)


@pytest.fixture
def browser() -> Iterator[Browser]:
    """Chromium, headless. Request it after the fixtures that write test data: while
    Playwright's sync API runs, its event loop makes Django refuse the ORM in this thread."""
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()
    # Chromium keeps its connections alive, and a live-server request thread closes its
    # (persistent) database connection only when its socket closes. Wait for those threads,
    # or PostgreSQL refuses to drop the test database because they are still connected.
    for thread in threading.enumerate():
        if thread.name.endswith("(process_request_thread)"):
            thread.join(timeout=10)
