"""Every error of a machine route is JSON, the web gets pages of ours, and a database that
is gone answers 503 ``database_unavailable`` and heals by itself (DESIGN.md section 14)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from projects.models import Project
from tests.conftest import B
from tests.mcp_raw import HANDSHAKE_VERSION


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("get", "/api/v1/nope", 404, "not_found"),
        ("get", "/api/v1/messages/pop", 405, "method_not_allowed"),
        ("delete", "/api/v1/messages", 405, "method_not_allowed"),
        ("get", "/mcp/x", 404, "not_found"),
        ("put", "/mcp", 405, "method_not_allowed"),
        ("post", "/healthz", 405, "method_not_allowed"),
        ("get", "/handoff/extra", 404, "not_found"),
    ],
)
@pytest.mark.django_db
def test_machine_routes_answer_every_error_as_json(
    client: Client, method: str, path: str, status: int, code: str
) -> None:
    response = getattr(client, method)(path)

    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    body = response.json()
    found = body["error"]["data"]["code"] if path.startswith("/mcp") else body["code"]
    assert found == code
    if status == 405:
        assert response.has_header("Allow")


@pytest.mark.django_db
def test_a_bad_host_is_json_on_the_api_and_a_page_of_ours_on_the_web() -> None:
    client = Client(HTTP_HOST="rebound.example")

    api = client.get("/api/v1/messages", B)
    web = client.get("/web/")

    assert api.status_code == 400
    assert api.json()["code"] == "bad_host"
    assert web.status_code == 400
    assert '<h1 id="error-heading">Bad request</h1>' in web.content.decode()


@pytest.mark.django_db
def test_an_unknown_web_page_is_our_404(client: Client) -> None:
    response = client.get("/web/no/such/page")

    assert response.status_code == 404
    assert '<h1 id="error-heading">Not found</h1>' in response.content.decode()


@contextmanager
def database_unreachable() -> Iterator[None]:
    """The real driver failing to reach the database: a dead port or an unopenable file."""
    settings = connection.settings_dict
    saved = dict(settings)
    connection.close()
    if connection.vendor == "postgresql":
        settings.update({"HOST": "127.0.0.1", "PORT": "1"})
    else:
        settings["NAME"] = "/nonexistent-dir/ai-memory.sqlite3"
    try:
        yield
    finally:
        connection.close()
        settings.clear()
        settings.update(saved)


def _mcp_call(client: Client) -> Any:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "memory_message_list", "arguments": B},
    }
    return client.post(
        "/mcp",
        json.dumps(body),
        content_type="application/json",
        headers={"MCP-Protocol-Version": HANDSHAKE_VERSION},
    )


@pytest.mark.django_db(transaction=True)
def test_a_database_outage_is_503_everywhere_and_heals(project_b: Project) -> None:
    client = Client(raise_request_exception=False)

    with database_unreachable():
        api = client.get("/api/v1/messages", B)
        mcp = _mcp_call(client)
        health = client.get("/healthz")
        web = client.get("/web/")
    healed = client.get("/api/v1/messages", B)

    assert api.status_code == 503
    assert api.json()["code"] == "database_unavailable"
    assert mcp.status_code == 503
    assert mcp.json()["error"]["data"]["code"] == "database_unavailable"
    assert health.status_code == 503
    assert health.json()["code"] == "database_unavailable"
    assert web.status_code == 503
    assert "The database is unavailable" in web.content.decode()
    assert healed.status_code == 200  # no restart: the next request reconnects
