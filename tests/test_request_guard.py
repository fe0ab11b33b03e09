"""The request guard (DESIGN.md section 7, Requests): no web page may write to a local
server, every body is JSON, and no NUL or lone surrogate gets in, on every surface."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from messaging.models import Message
from projects.models import Activity, AgentSession, Project
from tests.conftest import SEND, A, B
from tests.mcp_raw import HANDSHAKE_VERSION

pytestmark = pytest.mark.django_db

EVIL = "https://evil.example"

# Every write route with a body that would succeed, so a refusal is the guard's alone.
WRITES: list[tuple[str, dict[str, Any]]] = [
    ("/api/v1/messages", SEND),
    ("/api/v1/messages/pop", B),
    ("/api/v1/messages/cancel", {**A, "all": True}),
    ("/api/v1/sessions", {**A, "session_id": "sess-1", "agent": "claude"}),
]
WRITE_IDS = ["send", "pop", "cancel", "session-start"]


@pytest.fixture(autouse=True)
def _stocked(project_a: Project, project_b: Project, client: Client) -> None:
    """One pending message from A to B, so pop and cancel would change something."""
    response = client.post("/api/v1/messages", SEND, content_type="application/json")
    assert response.status_code == 201


def _state() -> tuple[Any, ...]:
    """Everything a write could change."""
    return (
        sorted(Message.objects.values_list("id", "state")),
        Project.objects.count(),
        AgentSession.objects.count(),
        Activity.objects.count(),
    )


def _mcp_call(arguments: dict[str, Any], name: str = "memory_message_send") -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    return json.dumps(body)


MCP_HEADERS = {"MCP-Protocol-Version": HANDSHAKE_VERSION}


@pytest.mark.parametrize(("path", "payload"), WRITES, ids=WRITE_IDS)
def test_a_foreign_origin_cannot_write(client: Client, path: str, payload: dict[str, Any]) -> None:
    before = _state()

    response = client.post(
        path, json.dumps(payload), content_type="application/json", headers={"Origin": EVIL}
    )

    assert response.status_code == 403
    assert response.json()["code"] == "origin_not_allowed"
    assert _state() == before


@pytest.mark.parametrize(("path", "payload"), WRITES, ids=WRITE_IDS)
@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
def test_a_body_that_is_not_json_is_refused(
    client: Client, path: str, payload: dict[str, Any], content_type: str
) -> None:
    before = _state()

    # What a page's <form> or a CORS-free fetch sends: no preflight, so only this stops it.
    response = client.generic("POST", path, json.dumps(payload), content_type=content_type)

    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_media_type"
    assert _state() == before


def test_the_evil_page_of_the_report_is_refused(client: Client) -> None:
    """The report's attack: text/plain from a foreign origin, on send and on pop."""
    before = _state()
    for path, payload in WRITES[:2]:
        response = client.generic(
            "POST", path, json.dumps(payload), content_type="text/plain", headers={"Origin": EVIL}
        )
        assert response.status_code in (403, 415)
        assert "body" not in response.content.decode()
    assert _state() == before


@pytest.mark.parametrize(
    "origin", ["http://127.0.0.1:8000", "http://localhost:5173", "http://testserver"]
)
def test_a_local_or_own_origin_may_write(client: Client, origin: str) -> None:
    response = client.post(
        "/api/v1/messages/pop", B, content_type="application/json", headers={"Origin": origin}
    )

    assert response.status_code == 200


def test_json_with_a_charset_is_json(client: Client) -> None:
    response = client.post(
        "/api/v1/messages/pop", json.dumps(B), content_type="application/json; charset=utf-8"
    )

    assert response.status_code == 200


def test_a_foreign_origin_cannot_read_either(client: Client) -> None:
    response = client.get("/api/v1/messages", B, headers={"Origin": EVIL})

    assert response.status_code == 403
    assert response.json()["code"] == "origin_not_allowed"


def test_mcp_refuses_a_foreign_origin_and_a_body_that_is_not_json(client: Client) -> None:
    before = _state()
    foreign = client.post(
        "/mcp",
        _mcp_call(SEND),
        content_type="application/json",
        headers={**MCP_HEADERS, "Origin": EVIL},
    )
    plain = client.post("/mcp", _mcp_call(SEND), content_type="text/plain", headers=MCP_HEADERS)

    assert foreign.status_code == 403
    assert foreign.json()["error"]["data"]["code"] == "origin_not_allowed"
    assert plain.status_code == 415
    assert plain.json()["error"]["data"]["code"] == "unsupported_media_type"
    assert _state() == before


HOSTILE = ["nul\u0000here", "lone \ud800 surrogate", "\udfff"]
HOSTILE_IDS = ["nul", "high-surrogate", "low-surrogate"]


def _write_fields() -> list[tuple[str, dict[str, Any], str]]:
    """(path, payload, field) for every string field of every write route."""
    cases = []
    for path, payload in WRITES:
        for field, value in payload.items():
            if isinstance(value, str):
                cases.append((path, payload, field))
    return cases


@pytest.mark.parametrize("hostile", HOSTILE, ids=HOSTILE_IDS)
@pytest.mark.parametrize(
    ("path", "payload", "field"),
    _write_fields(),
    ids=[f"{path.rsplit('/', 1)[1]}.{field}" for path, _, field in _write_fields()],
)
def test_hostile_text_in_any_field_is_refused_and_changes_nothing(
    client: Client, path: str, payload: dict[str, Any], field: str, hostile: str
) -> None:
    before = _state()
    body = json.dumps({**payload, field: hostile})  # ASCII: "\u0000", "\ud800" escapes

    response = client.post(path, body, content_type="application/json")

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_text"
    assert _state() == before


def test_an_encoded_surrogate_in_a_json_string_is_hostile_text(client: Client) -> None:
    before = _state()
    raw = json.dumps({**SEND, "body": "x"}).replace('"x"', '"\ud800"', 1)

    response = client.post(
        "/api/v1/messages", raw.encode("utf-8", "surrogatepass"), content_type="application/json"
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_text"
    assert _state() == before


@pytest.mark.parametrize("hostile", HOSTILE, ids=HOSTILE_IDS)
@pytest.mark.parametrize("field", ["to_project", "body", "subject", "from_workspace"])
def test_hostile_text_in_an_mcp_tool_argument_is_refused(
    client: Client, field: str, hostile: str
) -> None:
    before = _state()

    response = client.post(
        "/mcp",
        _mcp_call({**SEND, field: hostile}),
        content_type="application/json",
        headers=MCP_HEADERS,
    )

    assert response.status_code == 400
    assert response.json()["error"]["data"]["code"] == "invalid_text"
    assert _state() == before


@pytest.mark.parametrize(
    "query", ["workspace=default&project=a%00b", "workspace=de%00fault&project=project-b"]
)
def test_hostile_text_in_a_query_is_refused(client: Client, query: str) -> None:
    for path in ("/api/v1/messages", "/api/v1/briefing", "/handoff"):
        response = client.get(f"{path}?{query}")
        assert response.status_code == 400, path
        assert response.json()["code"] == "invalid_text"


@pytest.mark.parametrize(
    "url",
    [
        "/web/w/default/project-b/?project=a%00b",
        "/web/w/default/a%00b/",
        "/web/?x=%00",
    ],
)
def test_hostile_text_in_a_web_url_gets_our_400_page(client: Client, url: str) -> None:
    response = client.get(url)

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert '<h1 id="error-heading">Bad request</h1>' in page  # ours, not Django's
    assert "webui/app.css" in page


@pytest.mark.parametrize("text", ["caf\u00e9", "ship it \U0001f680", "a \\u0000 in prose"])
def test_ordinary_text_and_escapes_of_it_are_not_hostile(client: Client, text: str) -> None:
    # json.dumps escapes these as \u00e9 and as the surrogate pair \ud83d\ude80.
    body = json.dumps({**SEND, "body": text})

    response = client.post("/api/v1/messages", body, content_type="application/json")

    assert response.status_code == 201, response.content
    assert Message.objects.filter(body=text).exists()
