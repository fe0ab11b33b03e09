"""A browser on the server's own pages may call the JSON API and MCP: the Origin Chromium
really sends is the server's own (scheme, host and port of its Host), so the Origin rule
that refuses every other page leaves the server's own pages (the API docs' "Try it out")
working."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, Request
from pytest_django.live_server_helper import LiveServer

from tests.conftest import SEND, B, make_project
from tests.webui.conftest import needs_chromium

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    needs_chromium,
]

# Runs in the page: one JSON POST, answered with its status and body.
POST_JSON = """
    async ([path, payload, headers]) => {
        const response = await fetch(path, {
            method: "POST",
            headers: {"Content-Type": "application/json", ...headers},
            body: JSON.stringify(payload),
        });
        return {status: response.status, body: await response.json()};
    }
"""


@pytest.fixture
def projects(db: None) -> None:
    for name in ("project-a", "project-b"):
        make_project(None, "default", name)


def test_the_servers_own_pages_may_send_and_call_mcp(
    projects: None, live_server: LiveServer, browser: Browser
) -> None:
    page = browser.new_page()
    requests: list[Request] = []
    page.on("request", lambda request: requests.append(request))
    page.goto(f"{live_server.url}/api/v1/docs")

    sent: dict[str, Any] = page.evaluate(POST_JSON, ["/api/v1/messages", SEND, {}])
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "memory_message_pop",
            "arguments": B,
        },
    }
    popped: dict[str, Any] = page.evaluate(
        POST_JSON, ["/mcp", call, {"MCP-Protocol-Version": "2025-11-25"}]
    )

    posts = [request for request in requests if request.method == "POST"]
    # Chromium did send an Origin with each: the page's own.
    assert [request.all_headers().get("origin") for request in posts] == [live_server.url] * 2
    assert sent["status"] == 201, sent
    assert popped["status"] == 200, popped
    assert popped["body"]["result"]["structuredContent"]["message"]["body"] == SEND["body"]
