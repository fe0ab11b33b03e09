"""Malformed JSON-RPC to ``/mcp``: whatever arrives, the answer is a clean JSON-RPC one.

Hypothesis sends bytes that are not JSON, JSON values that are not requests, requests
with every field of the wrong type (huge and fractional ids included), unknown methods,
and ``tools/call`` with arbitrary arguments for each tool, in both protocol eras. Every
answer must be an HTTP status of a fixed set, never a 5xx, with a JSON-RPC body (a
``result`` or an ``error`` object, and never the -32603 of a server bug), except the 202
of a notification, which has no body.

The Django test client runs the whole middleware stack (size limit, request guard, error
answers), which is what /mcp adds to a request; it keeps hundreds of examples fast.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aimemory_site.mcp.protocol import HANDSHAKE_VERSIONS, INTERNAL_ERROR, MODERN_VERSIONS
from aimemory_site.mcp.server import TOOLS
from tests.conftest import ROOT_TOKEN, Persona, make_project
from tests.mcp_raw import RawMcp

# 200: a result, or an error of the handshake era; 202: a notification; 400: a body
# that could not be used, a modern-era error, or invalid text; 404: a modern-era unknown
# method. Anything else (401 and 403 need a missing bearer or a foreign Origin, which no
# example sends) is a fault.
ALLOWED_STATUSES = {200, 202, 400, 404}

# Bounded, reproducible runs: the same examples every time, no deadline to flake on a
# loaded machine, and no example database written into the checkout.
FUZZ = settings(
    max_examples=120,
    derandomize=True,
    database=None,
    deadline=None,
    # The client and the database stay the same across examples on purpose: state
    # (messages sent, pages written) builds up as a real client's would.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

METHODS: tuple[str, ...] = ("initialize", "ping", "tools/list", "tools/call", "server/discover")
METHODS += ("notifications/initialized", "resources/list", "prompts/get", "")
NAMES = ("default", "project-a", "project-b", "alpha", "..", "no such project")


def _no_forbidden_text(max_size: int = 40, min_size: int = 0) -> st.SearchStrategy[str]:
    """Text without NUL, which the request guard refuses before JSON-RPC is read (the
    generator makes no lone surrogates); test_a_nul_or_lone_surrogate_... sends both."""
    return st.text(
        st.characters(codec="utf-8", exclude_characters="\x00"),
        min_size=min_size,
        max_size=max_size,
    )


scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    # Ids and limits far beyond 64 bits, both signs.
    | st.integers(min_value=2**63, max_value=2**200)
    | st.integers(max_value=-(2**63), min_value=-(2**200))
    | st.floats()
    | _no_forbidden_text()
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_no_forbidden_text(8), inner),
    max_leaves=12,
)
# Text a request may not carry at all: NUL and lone surrogates (docs/reference.md#json-api).
forbidden_text = st.sampled_from(["\x00", "a\x00b", "\ud800", "x\udfffy", "\udc00\ud800"])

envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.just("2.0") | json_values,
        "id": json_values,
        "method": st.sampled_from(METHODS) | json_values,
        "params": st.dictionaries(_no_forbidden_text(10), json_values) | json_values,
    },
)
era_headers = st.sampled_from(
    [
        {},
        {"MCP-Protocol-Version": HANDSHAKE_VERSIONS[-1]},
        {"MCP-Protocol-Version": MODERN_VERSIONS[0]},
        {"MCP-Protocol-Version": MODERN_VERSIONS[0], "Mcp-Method": "tools/list"},
        {"MCP-Protocol-Version": "1999-01-01"},
        {"MCP-Protocol-Version": "", "Mcp-Method": "", "Mcp-Name": "=?base64?%%?="},
    ]
)


def _rpc_answer(response: Any, sent: Any) -> dict[str, Any] | None:
    """Check one answer against the invariants; return its JSON-RPC body (None for 202)."""
    assert response.status_code in ALLOWED_STATUSES, (response.status_code, response.content)
    if response.status_code == 202:
        # Only a notification (a request without an id) is answered with no body.
        assert isinstance(sent, dict) and "id" not in sent, sent
        assert response.content == b""
        return None
    assert response["Content-Type"] == "application/json", response.content
    body = json.loads(response.content)
    assert isinstance(body, dict) and body.get("jsonrpc") == "2.0", body
    assert ("result" in body) != ("error" in body), body
    readable_id = isinstance(sent, dict) and _is_request_id(sent.get("id"))
    if "result" in body:
        assert response.status_code == 200
        assert isinstance(body["result"], dict)
        assert readable_id and body["id"] == sent["id"], body
    else:
        error = body["error"]
        assert isinstance(error.get("code"), int) and isinstance(error.get("message"), str)
        assert error["code"] != INTERNAL_ERROR, error  # the catch-all of a server bug
        assert body["id"] is None or (readable_id and body["id"] == sent["id"]), body
    return body


def _is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _post(client: Client, body: bytes, headers: dict[str, str] | None = None) -> Any:
    return client.post("/mcp", body, content_type="application/json", headers=headers or {})


@pytest.fixture
def projects(db: None) -> None:
    """The projects the generated scopes name, on an anonymous server."""
    for name in ("project-a", "project-b"):
        make_project(None, "default", name)


@FUZZ
@given(raw=st.binary(max_size=300))
def test_arbitrary_bytes_get_a_json_rpc_answer(client: Client, projects: None, raw: bytes) -> None:
    try:
        sent = json.loads(raw)
    except (ValueError, RecursionError):
        sent = None
    answer = _rpc_answer(_post(client, raw), sent)
    if sent is None and answer is not None and "error" in answer:
        # Not JSON at all: the parse error, or the guard's invalid text for bytes that
        # are no UTF-8 (and no JSON either).
        assert answer["error"]["code"] in (-32700, 400), answer


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000,
        b'{"a":' * 50_000,
        b"",
        b"\xef\xbb\xbf{}",
        b"NaN",
        b'{"jsonrpc": "2.0", "id": 1e400, "method": "ping"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": NaN}}',
        '{"jsonrpc": "2.0", "id": 1, "method": "ping"}'.encode("utf-16"),
        b'{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}',
    ],
    ids=[
        "deep-array",
        "deep-object",
        "empty",
        "bom",
        "nan",
        "huge-float-id",
        "nan-meta",
        "utf-16",
        "bad-utf-8",
    ],
)
def test_pathological_bodies_get_a_json_rpc_answer(
    client: Client, projects: None, raw: bytes
) -> None:
    try:
        sent = json.loads(raw)
    except (ValueError, RecursionError):
        sent = None
    _rpc_answer(_post(client, raw), sent)


@FUZZ
@given(value=json_values)
def test_any_json_value_gets_a_json_rpc_answer(client: Client, projects: None, value: Any) -> None:
    answer = _rpc_answer(_post(client, json.dumps(value).encode()), value)
    if not isinstance(value, dict):
        assert answer is not None and answer["error"]["code"] == -32600, answer


@settings(FUZZ, max_examples=250)
@given(message=envelopes, headers=era_headers)
def test_malformed_requests_get_a_json_rpc_answer(
    client: Client, projects: None, message: dict[str, Any], headers: dict[str, str]
) -> None:
    answer = _rpc_answer(_post(client, json.dumps(message).encode(), headers), message)
    malformed = message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str)
    if "id" in message and not _is_request_id(message["id"]):
        malformed = True
    if malformed:
        assert answer is not None and answer["error"]["code"] == -32600, answer


@FUZZ
@given(message=envelopes, bad=forbidden_text, where=st.sampled_from(["id", "method", "key"]))
def test_a_nul_or_lone_surrogate_anywhere_is_invalid_text(
    client: Client, projects: None, message: dict[str, Any], bad: str, where: str
) -> None:
    message = {**message, "params": {bad: 1}} if where == "key" else {**message, where: bad}
    response = _post(client, json.dumps(message).encode())
    assert response.status_code == 400
    answer = _rpc_answer(response, message)
    assert answer is not None and answer["error"]["data"] == {"code": "invalid_text"}


# Right-typed values that often name what exists, so calls also reach the services.
_PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "workspace": st.sampled_from(["default"] * 4 + ["other"]),
    "project": st.sampled_from(["project-a", "project-b"] * 3 + ["alpha", "nope"]),
    "_key": _no_forbidden_text(50, min_size=1),
    "request_id": _no_forbidden_text(50, min_size=1),
    "body": _no_forbidden_text(300, min_size=1).filter(str.strip),
    "box": st.sampled_from(["inbox", "outbox", "spam"]),
    "path": st.sampled_from(["notes", "_rules/style", "a/b.md", "..", "/x"]),
    "message_id": st.uuids().map(str) | st.sampled_from(["", "not-a-uuid"]),
    "in_reply_to": st.uuids().map(str),
    # A positive wait on an empty inbox holds the call for up to 60 s; waiting has its own
    # tests (tests/messaging/test_message_wait.py), and ``_no_wait`` keeps wild ones at 0.
    "wait_seconds": st.sampled_from([0, -3]),
}
_PLAUSIBLE_BY_TYPE: dict[str, st.SearchStrategy[Any]] = {
    "string": _no_forbidden_text(300),
    "integer": st.integers(min_value=-5, max_value=300) | st.integers(),
    "boolean": st.booleans(),
}


def _plausible_value(name: str, kind: str) -> st.SearchStrategy[Any]:
    for key, values in _PLAUSIBLE.items():
        if name.endswith(key):
            return values
    return _PLAUSIBLE_BY_TYPE[kind]


@st.composite
def tool_calls(draw: st.DrawFn) -> tuple[str, Any]:
    """A known tool's name and arguments: two in three are plausible (the required
    arguments, a scope given whole, values of the right type), the rest wild (any
    subset of the properties, unknown keys, any value types, or no object at all)."""
    tool = TOOLS[draw(st.sampled_from(sorted(TOOLS)))]
    properties: dict[str, dict[str, Any]] = tool.input_schema["properties"]
    required = set(tool.input_schema.get("required", ()))
    if draw(st.integers(0, 2)) < 2:
        scope = {"workspace", "project", "from_workspace", "from_project"} & set(properties)
        optional = sorted(set(properties) - required - scope)
        chosen = set(required) | {name for name in optional if draw(st.booleans())}
        if scope and draw(st.sampled_from([True, True, True, False])):
            chosen |= scope
        return tool.name, {
            name: draw(_plausible_value(name, properties[name]["type"])) for name in sorted(chosen)
        }
    chosen_list = draw(st.lists(st.sampled_from(sorted(properties)), unique=True))
    arguments = {
        name: draw(_plausible_value(name, properties[name]["type"]) | json_values)
        for name in chosen_list
    }
    arguments |= draw(st.dictionaries(_no_forbidden_text(10), json_values, max_size=2))
    return tool.name, draw(st.just(arguments) | json_values)


@pytest.fixture(params=["anonymous", "alice"])
def caller(request: pytest.FixtureRequest, client: Client, projects: None) -> Client:
    """The test client for an anonymous server, or with alice's bearer on an auth server."""
    if request.param == "alice":
        alice: Persona = request.getfixturevalue("alice")
        request.getfixturevalue("settings").AI_MEMORY_ROOT_TOKEN = ROOT_TOKEN
        make_project(alice, "default", "alpha")
        return Client(headers={"Authorization": f"Bearer {alice.token}"})
    return client


def _no_wait(call: tuple[str, Any]) -> tuple[str, Any]:
    """``call`` with a positive whole ``wait_seconds`` made 0: any other value still
    tests the argument's checks, and no example parks."""
    name, arguments = call
    wait = arguments.get("wait_seconds") if isinstance(arguments, dict) else None
    if isinstance(wait, int) and not isinstance(wait, bool) and wait > 0:
        return name, {**arguments, "wait_seconds": 0}
    return name, arguments


@settings(FUZZ, max_examples=300)
@given(call=tool_calls(), era=st.sampled_from(["handshake", "modern"]), request_id=json_values)
def test_any_arguments_to_a_tool_get_a_tool_result(
    caller: Client, call: tuple[str, Any], era: str, request_id: Any
) -> None:
    name, arguments = _no_wait(call)
    request_id = request_id if _is_request_id(request_id) else 1
    response = RawMcp(client=caller, era=era).request(
        "tools/call", {"name": name, "arguments": arguments}, request_id=request_id
    )
    sent = {"id": request_id}
    answer = _rpc_answer(response, sent)
    # A known tool answers every argument fault, refusal and business error as a tool
    # result the agent can read, never as a protocol error.
    assert response.status_code == 200 and answer is not None and "result" in answer, answer
    result = answer["result"]
    assert isinstance(result["isError"], bool)
    text = result["content"][0]["text"]
    assert isinstance(text, str) and text
    if not result["isError"]:
        assert json.loads(text) == result["structuredContent"]
    if era == "modern":
        assert result["resultType"] == "complete"
