"""The request guard (docs/reference.md#json-api): no web page may write to a local
server, every body is JSON in UTF-8, and no NUL or lone surrogate gets in, on every
surface."""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from messaging.models import Message
from projects.models import Activity, AgentSession, Handoff, Page, Project
from tests.conftest import SEND, A, B
from tests.mcp_raw import HANDSHAKE_VERSION

pytestmark = pytest.mark.django_db

EVIL = "https://evil.example"
MCP_HEADERS = {"MCP-Protocol-Version": HANDSHAKE_VERSION}

# Every write route with a body that would succeed, so a refusal is the guard's alone.
WRITES: list[tuple[str, dict[str, Any]]] = [
    ("/api/v1/messages", SEND),
    ("/api/v1/messages/pop", B),
    ("/api/v1/messages/cancel", {**A, "all": True}),
    ("/api/v1/sessions", {**A, "session_id": "sess-1", "agent": "claude"}),
    ("/api/v1/handoffs", {**A, "body": "Done: export. Next: tests."}),
    ("/api/v1/pages", {**A, "path": "notes/api", "body": "The export streams NDJSON."}),
]
WRITE_IDS = ["send", "pop", "cancel", "session-start", "handoff-create", "page-write"]


def _mcp_call(arguments: dict[str, Any], name: str = "memory_message_send") -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    return json.dumps(body)


@dataclass(frozen=True)
class Route:
    """One write route and a request to it that would succeed: a POST of ``payload`` as
    JSON, or (``payload`` None) a GET of ``path`` with its query."""

    name: str
    path: str
    payload: dict[str, Any] | None

    def call(
        self, client: Client, *, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> Any:
        sent = {**(MCP_HEADERS if self.path == "/mcp" else {}), **(headers or {})}
        if self.payload is None:
            return client.get(self.path, headers=sent)
        raw = json.dumps(self.payload).encode() if body is None else body
        return client.generic("POST", self.path, raw, content_type="application/json", headers=sent)

    def text(self) -> str:
        """The body as text, for the encodings tests."""
        assert self.payload is not None
        return json.dumps(self.payload, ensure_ascii=False)


def _mcp_route(name: str, tool: str, arguments: dict[str, Any]) -> Route:
    return Route(name, "/mcp", json.loads(_mcp_call(arguments, tool)))


REST_ROUTES = [
    Route(name, path, payload) for (path, payload), name in zip(WRITES, WRITE_IDS, strict=True)
]
MCP_ROUTES = [
    _mcp_route("mcp-send", "memory_message_send", SEND),
    _mcp_route("mcp-pop", "memory_message_pop", B),
    _mcp_route("mcp-cancel", "memory_message_cancel", A),
    _mcp_route("mcp-handoff-create", "memory_handoff_create", {**A, "body": "Done: x."}),
    _mcp_route("mcp-page-write", "memory_write_page", {**A, "path": "notes", "body": "n"}),
]
HOOK_ROUTE = Route(
    "hook-handoff", "/handoff?workspace=default&project=project-a&session_id=sess-0", None
)
BODY_ROUTES = [*REST_ROUTES, *MCP_ROUTES]
ALL_ROUTES = [*BODY_ROUTES, HOOK_ROUTE]


def _refusal_code(response: Any) -> str:
    """The machine code of a refusal, whichever surface answered it."""
    answer = response.json()
    code: str = answer["error"]["data"]["code"] if "jsonrpc" in answer else answer["code"]
    return code


def _succeeded(route: Route, response: Any) -> bool:
    if response.status_code not in (200, 201):
        return False
    return route.path != "/mcp" or response.json()["result"]["isError"] is False


@pytest.fixture(autouse=True)
def _stocked(project_a: Project, project_b: Project, client: Client) -> None:
    """One pending message from A to B, so pop and cancel would change something, and
    one open handoff in A, which a session start would claim."""
    response = client.post("/api/v1/messages", SEND, content_type="application/json")
    assert response.status_code == 201
    session = {**A, "session_id": "sess-0"}
    response = client.post("/api/v1/sessions", session, content_type="application/json")
    assert response.status_code == 200
    handoff = {**A, "body": "Done: the stock."}
    response = client.post("/api/v1/handoffs", handoff, content_type="application/json")
    assert response.status_code == 201


def _state() -> tuple[Any, ...]:
    """Everything a write could change."""
    return (
        sorted(Message.objects.values_list("id", "state")),
        Project.objects.count(),
        sorted(AgentSession.objects.values_list("session_id", "last_seen_at")),
        Activity.objects.count(),
        sorted(Handoff.objects.values_list("id", "state")),
        sorted(Page.objects.values_list("path", "body")),
    )


# The server as a browser on this machine reaches it; a page on any other port, scheme or
# name of the same machine is another origin (a local dev server serves anyone's script).
HOST = "127.0.0.1:8000"
OWN = "http://127.0.0.1:8000"
OTHER_LOCAL_ORIGINS = [
    "http://127.0.0.1:5173",
    "http://127.0.0.1:8001",
    "http://127.0.0.1",
    "https://127.0.0.1:8000",
    "http://localhost:8000",
    "http://localhost:3000",
    "http://[::1]:8000",
    "http://app.localhost:8000",
]


@pytest.fixture
def local() -> Client:
    """A client reaching the server as ``http://127.0.0.1:8000``, as a local browser does."""
    return Client(headers={"Host": HOST})


@pytest.mark.parametrize("route", ALL_ROUTES, ids=lambda route: route.name)
@pytest.mark.parametrize("origin", [EVIL, *OTHER_LOCAL_ORIGINS])
def test_a_foreign_origin_cannot_write(local: Client, route: Route, origin: str) -> None:
    before = _state()

    response = route.call(local, headers={"Origin": origin})

    assert response.status_code == 403, response.content
    assert _refusal_code(response) == "origin_not_allowed"
    assert _state() == before


@pytest.mark.parametrize("route", ALL_ROUTES, ids=lambda route: route.name)
@pytest.mark.parametrize("origin", [OWN, "HTTP://127.0.0.1:8000", "http://127.0.0.1:8000/"])
def test_the_servers_own_origin_may_write(local: Client, route: Route, origin: str) -> None:
    before = _state()

    response = route.call(local, headers={"Origin": origin})

    assert _succeeded(route, response), response.content
    if route.payload is not None:  # GET /handoff may have nothing left to claim
        assert _state() != before


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("testserver", "http://testserver"),
        ("testserver", "http://TestServer:80"),
        ("127.0.0.1", "http://127.0.0.1:80"),
        ("127.0.0.1:80", "http://127.0.0.1"),
        ("[::1]:8000", "http://[::1]:8000"),
        ("localhost:8000", "http://LOCALHOST:8000"),
    ],
)
def test_the_own_origin_is_its_scheme_host_and_port_whatever_the_spelling(
    host: str, origin: str
) -> None:
    response = Client(headers={"Host": host}).post(
        "/api/v1/messages/pop", B, content_type="application/json", headers={"Origin": origin}
    )

    assert response.status_code == 200, response.content


def test_an_https_origin_is_the_servers_own_only_behind_tls(local: Client) -> None:
    """Behind a TLS proxy (``X-Forwarded-Proto: https``) the own origin is https, and
    the same page over plain http is another origin."""
    proxied = Client(headers={"Host": HOST, "X-Forwarded-Proto": "https"})

    def pop(client: Client, origin: str) -> int:
        response = client.post(
            "/api/v1/messages/pop", B, content_type="application/json", headers={"Origin": origin}
        )
        return response.status_code

    assert pop(proxied, "https://127.0.0.1:8000") == 200
    assert pop(proxied, OWN) == 403
    assert pop(local, "https://127.0.0.1:8000") == 403


@pytest.mark.parametrize("route", ALL_ROUTES, ids=lambda route: route.name)
def test_an_origin_in_allowed_origins_may_write(
    local: Client, settings: SettingsWrapper, route: Route
) -> None:
    settings.AI_MEMORY_ALLOWED_ORIGINS = ["http://localhost:5173", "https://tools.example"]
    before = _state()

    response = route.call(local, headers={"Origin": "https://tools.example"})

    assert _succeeded(route, response), response.content
    if route.payload is not None:
        assert _state() != before


@pytest.mark.parametrize(
    ("listed", "origin", "allowed"),
    [
        ("http://localhost:5173", "http://localhost:5173", True),
        ("HTTP://LocalHost:5173/", "http://localhost:5173", True),
        ("https://app.example:443", "https://app.example", True),
        ("http://app.example", "http://app.example:80", True),
        ("http://[::1]:3000", "http://[::1]:3000", True),
        ("http://localhost:5173", "http://localhost:5174", False),
        ("http://localhost:5173", "https://localhost:5173", False),
        ("https://app.example", "https://evil.app.example", False),
    ],
)
def test_allowed_origins_are_compared_as_scheme_host_and_port(
    local: Client, settings: SettingsWrapper, listed: str, origin: str, allowed: bool
) -> None:
    settings.AI_MEMORY_ALLOWED_ORIGINS = [listed]

    response = local.post(
        "/api/v1/messages/pop", B, content_type="application/json", headers={"Origin": origin}
    )

    assert response.status_code == (200 if allowed else 403), response.content


@pytest.mark.parametrize("origin", ["null", "http://localhost.evil.example", "http://[::1", ""])
def test_an_origin_that_names_no_page_of_ours_is_refused(local: Client, origin: str) -> None:
    response = local.post(
        "/api/v1/messages/pop", B, content_type="application/json", headers={"Origin": origin}
    )

    assert response.status_code == 403
    assert _refusal_code(response) == "origin_not_allowed"


def test_the_refusal_says_how_to_allow_an_origin(local: Client) -> None:
    response = local.post(
        "/api/v1/messages",
        SEND,
        content_type="application/json",
        headers={"Origin": "http://127.0.0.1:5173"},
    )

    assert response.json() == {
        "detail": (
            "requests from origin 'http://127.0.0.1:5173' are refused: agents, the CLI and "
            "MCP clients send no Origin, and a browser page may only call this server from "
            "its own origin (http://127.0.0.1:8000) or from one listed in "
            "AI_MEMORY_ALLOWED_ORIGINS"
        ),
        "code": "origin_not_allowed",
    }


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


# JSON as a client that is not careful about encodings may send it. Python's own
# json.loads reads every one of these from bytes, and so did the server, once.
ENCODINGS = {
    "utf-16-le": lambda text: text.encode("utf-16-le"),
    "utf-16-be": lambda text: text.encode("utf-16-be"),
    "utf-16-le-bom": lambda text: codecs.BOM_UTF16_LE + text.encode("utf-16-le"),
    "utf-16-be-bom": lambda text: codecs.BOM_UTF16_BE + text.encode("utf-16-be"),
    "utf-32-le": lambda text: text.encode("utf-32-le"),
    "utf-32-be": lambda text: text.encode("utf-32-be"),
    "utf-32-le-bom": lambda text: codecs.BOM_UTF32_LE + text.encode("utf-32-le"),
    "utf-32-be-bom": lambda text: codecs.BOM_UTF32_BE + text.encode("utf-32-be"),
    "latin-1": lambda text: text.encode("latin-1"),
}


def _assert_invalid_text(response: Any) -> None:
    assert response.status_code == 400, response.content
    assert _refusal_code(response) == "invalid_text"
    detail = response.json()["error"]["message"] if "jsonrpc" in response.json() else None
    detail = detail or response.json()["detail"]
    assert detail == (
        "the request body is not UTF-8: send JSON encoded as UTF-8 (not UTF-16, UTF-32 or "
        "another encoding); nothing was changed"
    )


@pytest.mark.parametrize("route", BODY_ROUTES, ids=lambda route: route.name)
@pytest.mark.parametrize("encoding", [e for e in ENCODINGS if e != "latin-1"])
def test_a_body_in_utf_16_or_utf_32_is_invalid_text_and_changes_nothing(
    client: Client, route: Route, encoding: str
) -> None:
    before = _state()

    response = route.call(client, body=ENCODINGS[encoding](route.text()))

    _assert_invalid_text(response)
    assert _state() == before


@pytest.mark.parametrize("encoding", list(ENCODINGS))
@pytest.mark.parametrize("route", [REST_ROUTES[0], MCP_ROUTES[0]], ids=["rest", "mcp"])
def test_non_ascii_text_in_another_encoding_is_invalid_text(
    client: Client, route: Route, encoding: str
) -> None:
    before = _state()
    assert route.payload is not None
    text = route.text().replace("streams NDJSON", "streams NDJSON (Grüße, café)")
    text = text.replace("Add a /v1/export", "Add a /v1/export (señor)")

    response = route.call(client, body=ENCODINGS[encoding](text))

    _assert_invalid_text(response)
    assert _state() == before


@pytest.mark.parametrize("route", BODY_ROUTES, ids=lambda route: route.name)
def test_a_nul_escape_behind_a_utf_8_bom_is_still_invalid_text(
    client: Client, route: Route
) -> None:
    before = _state()
    text = route.text().replace('"default"', '"def\\u0000ault"', 1)

    response = route.call(client, body=codecs.BOM_UTF8 + text.encode())

    assert response.status_code == 400, response.content
    assert _refusal_code(response) == "invalid_text"
    assert _state() == before


def test_json_behind_a_utf_8_bom_is_utf_8_and_is_read(client: Client) -> None:
    body = codecs.BOM_UTF8 + json.dumps({**SEND, "body": "café"}, ensure_ascii=False).encode()

    response = client.post("/api/v1/messages", body, content_type="application/json")

    assert response.status_code == 201, response.content
    assert Message.objects.filter(body="café").exists()


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


def test_a_raw_nul_byte_in_a_body_is_hostile_text(client: Client) -> None:
    before = _state()
    raw = json.dumps({**SEND, "body": "x"}).encode().replace(b'"x"', b'"\x00"', 1)

    response = client.post("/api/v1/messages", raw, content_type="application/json")

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


# Percent-escapes of bytes that are not UTF-8: a lone continuation byte, a byte UTF-8
# never uses, a sequence cut short, an encoded surrogate. Django would read each as
# U+FFFD (or, in a path, as the escape again) and serve the request.
NOT_UTF8_ESCAPES = ["%FF", "%80", "%C3", "%ED%A0%80"]
MACHINE_URLS_OF = [
    "/api/v1/messages?workspace=default&project={}",
    "/api/v1/messages?workspace{}=default&project=project-b",
    "/api/v1/briefing?workspace=default&project=project-b&x={}",
    "/handoff?workspace=default&project=project-a&session_id={}",
    "/api/v1/{}",
    "/api/v1/messages/{}/thread?workspace=default&project=project-b",
    "/healthz?x={}",
]


@pytest.mark.parametrize("escape", NOT_UTF8_ESCAPES)
@pytest.mark.parametrize("url", MACHINE_URLS_OF)
def test_a_path_or_query_that_is_not_utf_8_is_invalid_text(
    client: Client, url: str, escape: str
) -> None:
    before = _state()

    response = client.get(url.format(escape))

    assert response.status_code == 400, response.content
    assert response.json() == {
        "detail": "the path or the query is not UTF-8 once percent-decoded; nothing was changed",
        "code": "invalid_text",
    }
    assert _state() == before


@pytest.mark.parametrize("escape", NOT_UTF8_ESCAPES)
def test_mcp_refuses_a_query_that_is_not_utf_8(client: Client, escape: str) -> None:
    route = MCP_ROUTES[0]
    before = _state()

    response = Route(route.name, f"/mcp?x={escape}", route.payload).call(client)

    assert response.status_code == 400, response.content
    assert _refusal_code(response) == "invalid_text"
    assert _state() == before


@pytest.mark.parametrize(
    "url", ["/web/w/%FF/project-b/", "/web/w/default/project-b/?project=%C3", "/web/?x=%80"]
)
def test_a_web_url_that_is_not_utf_8_gets_our_400_page(client: Client, url: str) -> None:
    response = client.get(url)

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert '<h1 id="error-heading">Bad request</h1>' in response.content.decode()


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/messages?workspace=default&project=project-b&x=caf%C3%A9",
        "/api/v1/messages?workspace=default&project=project-b&x=%F0%9F%9A%80",
        "/api/v1/messages?workspace=default&project=project-b&x=%25FF",
        "/api/v1/messages?workspace=default&project=project-b&x=100%",
    ],
)
def test_utf_8_escapes_and_a_literal_percent_are_not_refused(client: Client, url: str) -> None:
    assert client.get(url).status_code == 200


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
