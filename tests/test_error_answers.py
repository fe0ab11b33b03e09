"""Every error of a machine route is JSON, the web gets pages of ours, and a database that
is gone answers 503 ``database_unavailable`` and heals by itself (docs/reference.md#limits-and-faults)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import pytest
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.test import Client

from projects.models import Project
from tests.conftest import B
from tests.mcp_raw import HANDSHAKE_VERSION
from webui.middleware import CONTENT_SECURITY_POLICY


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
        ("delete", "/handoff", 405, "method_not_allowed"),
    ],
)
@pytest.mark.django_db
def test_machine_routes_answer_every_error_as_json(
    client: Client, method: str, path: str, status: int, code: str
) -> None:
    response = getattr(client, method)(path)

    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    assert _code_of(response, path) == code
    if status == 405:
        assert response.has_header("Allow")


def _code_of(response: Any, path: str) -> str:
    """The machine code of an error answer; ``/mcp`` carries it in a JSON-RPC error."""
    body = response.json()
    code: str = body["error"]["data"]["code"] if path.startswith("/mcp") else body["code"]
    return code


def _crash(*args: object, **kwargs: object) -> NoReturn:
    raise RuntimeError("boom: a secret in the traceback")


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("/api/v1/briefing", "aimemory_site.onstart.api.briefing_get"),
        ("/handoff", "aimemory_site.onstart.api.onstart_for_hook"),
        # The database check catches everything; the answer it builds is past that.
        ("/healthz", "aimemory_site.views.JsonResponse"),
    ],
)
def test_a_view_that_raises_is_a_json_500_without_the_traceback(
    project_b: Project, monkeypatch: pytest.MonkeyPatch, path: str, target: str
) -> None:
    monkeypatch.setattr(target, _crash)

    response = Client(raise_request_exception=False).get(path, B)

    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "detail": "internal error; the server log has the details",
        "code": "server_error",
    }


@pytest.mark.parametrize("path", ["/mcp", "/handoff", "/healthz"])
@pytest.mark.django_db
def test_a_bad_host_is_json_on_every_machine_route(path: str) -> None:
    client = Client(HTTP_HOST="rebound.example")

    response = _mcp_call(client) if path == "/mcp" else client.get(path, B)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert _code_of(response, path) == "bad_host"


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


@pytest.mark.parametrize(
    ("raised", "status", "heading"),
    [
        (RuntimeError("boom: a secret in the traceback"), 500, "Something went wrong"),
        (PermissionDenied("a secret reason"), 403, "Forbidden"),
    ],
)
def test_a_web_page_that_fails_or_refuses_is_our_page_not_djangos(
    db: None, monkeypatch: pytest.MonkeyPatch, raised: Exception, status: int, heading: str
) -> None:
    def fail(viewer: object) -> NoReturn:
        raise raised

    monkeypatch.setattr("webui.views.home_page", fail)

    response = Client(raise_request_exception=False).get("/web/")

    page = response.content.decode()
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    assert f'<h1 id="error-heading">{heading}</h1>' in page
    assert "secret" not in page


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/web/"),
        ("delete", "/web/w/default/project-b/"),
        ("put", f"/web/w/default/project-b/decisions/{uuid.uuid4()}/"),  # takes GET and POST
    ],
)
@pytest.mark.django_db
def test_a_method_a_web_page_does_not_take_is_our_405_with_its_allow_and_headers(
    client: Client, method: str, path: str
) -> None:
    response = getattr(client, method)(path)

    assert response.status_code == 405
    assert response["Content-Type"].startswith("text/html")
    assert '<h1 id="error-heading">Method not allowed</h1>' in response.content.decode()
    assert "GET" in response["Allow"]
    # Kept from Django's answer, which the middleware inside ours set on it.
    assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert response["X-Frame-Options"] == "DENY"


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
        live = client.get("/web/w/default/project-b/live/")  # what the page's script polls
    healed = client.get("/api/v1/messages", B)

    assert api.status_code == 503
    assert api.json()["code"] == "database_unavailable"
    assert mcp.status_code == 503
    assert mcp.json()["error"]["data"]["code"] == "database_unavailable"
    assert health.status_code == 503
    assert health.json()["code"] == "database_unavailable"
    assert web.status_code == 503
    assert "The database is unavailable" in web.content.decode()
    assert live.status_code == 503
    assert "The database is unavailable" in live.content.decode()
    assert healed.status_code == 200  # no restart: the next request reconnects
