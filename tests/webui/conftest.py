"""Web mailbox helpers: read a page as text, pick out its parts, and Debian's Chromium
under Playwright for the tests that drive a real browser."""

from __future__ import annotations

import html
import json
import re
import threading
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

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


class _LiveRegions(HTMLParser):
    """Collects each ``data-live`` element's markup, as written, by its key."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=False)
        self.markup = markup
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", markup)]
        self.found: dict[str, str] = {}
        self.open: tuple[str, str, int] | None = None  # key, tag, start offset
        self.depth = 0

    def position(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.open is not None:
            self.depth += tag == self.open[1]
            return
        key = dict(attrs).get("data-live")
        if key is not None:
            self.open, self.depth = (key, tag, self.position()), 1

    def handle_endtag(self, tag: str) -> None:
        if self.open is None or tag != self.open[1]:
            return
        self.depth -= 1
        if self.depth == 0:
            key, _, start = self.open
            end = self.markup.index(">", self.position()) + 1
            assert key not in self.found, f"two live regions {key!r}"
            self.found[key] = self.markup[start:end]
            self.open = None


def live_regions(markup: str) -> dict[str, str]:
    """The page's or live fragment's regions (``data-live``) as ``{key: markup}``."""
    parser = _LiveRegions(markup)
    parser.feed(markup)
    parser.close()
    return parser.found


def api_post(base_url: str, path: str, body: dict[str, Any], token: str = "") -> Any:
    """POST JSON to the served API as an agent would and return the decoded answer.

    Over HTTP, not through the services: a browser test's thread may not use the ORM
    while Playwright's event loop runs in it."""
    request = urllib.request.Request(
        f"{base_url}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"}
        | ({"Authorization": f"Bearer {token}"} if token else {}),
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def deliver(
    to: str,
    sender: str,
    body: str = "Please review the export endpoint.",
    *,
    subject: str | None = None,
    in_reply_to: Message | None = None,
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
        in_reply_to=str(in_reply_to.pk) if in_reply_to is not None else None,
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
