"""The HTTP edge of /mcp, whatever the era: methods, Origin, bearer, size, body shape."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from tests.conftest import Persona
from tests.mcp_raw import RawMcp, error_of

pytestmark = pytest.mark.django_db

PING = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping"})


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
@pytest.mark.parametrize("method", ["get", "delete", "put"])
def test_only_post_is_allowed(client: Client, path: str, method: str) -> None:
    response = getattr(client, method)(path)
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert "Mcp-Session-Id" not in response


def test_the_trailing_slash_path_is_the_same_endpoint(handshake: RawMcp) -> None:
    for path in ("/mcp", "/mcp/"):
        response = handshake.post(PING, path=path)
        assert response.status_code == 200
        assert response.json() == {"jsonrpc": "2.0", "id": 7, "result": {}}


@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "null",
        "http://localhost.evil.example",
        "http://[::1",
        # Pages of this machine, but not of this server (Host "testserver", port 80).
        "http://localhost:3000",
        "http://127.0.0.1:8000",
        "http://[::1]:8000",
        "http://app.localhost",
        "http://testserver:8080",
        "https://testserver",
    ],
)
def test_a_foreign_origin_is_refused_with_403(handshake: RawMcp, origin: str) -> None:
    response = handshake.post(PING, headers={"Origin": origin})
    assert response.status_code == 403
    error = error_of(response)
    assert response.json()["id"] is None
    assert error["data"] == {"code": "origin_not_allowed"}
    assert origin in error["message"]


@pytest.mark.parametrize(
    "origin",
    # The Host the Django test client sends, however spelt.
    ["http://testserver", "http://TESTSERVER", "http://testserver:80"],
)
def test_the_servers_own_origin_is_accepted(handshake: RawMcp, origin: str) -> None:
    assert handshake.post(PING, headers={"Origin": origin}).status_code == 200


def test_an_origin_in_allowed_origins_is_accepted(
    handshake: RawMcp, settings: SettingsWrapper
) -> None:
    settings.AI_MEMORY_ALLOWED_ORIGINS = ["http://localhost:5173"]

    assert handshake.post(PING, headers={"Origin": "http://localhost:5173"}).status_code == 200
    assert handshake.post(PING, headers={"Origin": "http://localhost:5174"}).status_code == 403


def test_without_a_bearer_an_auth_server_answers_401_without_an_oauth_challenge(
    handshake: RawMcp, auth_on: str
) -> None:
    response = handshake.post(PING)
    assert response.status_code == 401
    assert "WWW-Authenticate" not in response
    error = error_of(response)
    assert error["data"] == {"code": "unauthorized"}
    assert "Authorization: Bearer" in error["message"]


def test_a_bad_bearer_answers_401_even_for_a_notification(handshake: RawMcp, auth_on: str) -> None:
    notification = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    response = handshake.post(notification, headers={"Authorization": "Bearer not-a-token"})
    assert response.status_code == 401
    assert error_of(response)["message"] == "invalid or revoked token"


def test_a_users_bearer_and_the_root_token_are_let_in(
    handshake: RawMcp, auth_on: str, alice: Persona
) -> None:
    for token in (alice.token, auth_on):
        response = handshake.post(PING, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200


def test_a_body_over_one_mib_is_refused_with_413_before_it_is_parsed(handshake: RawMcp) -> None:
    padding = "x" * (1024 * 1024)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": padding}})
    response = handshake.post(body)
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server/mcp",
        "/.well-known/openid-configuration",
    ],
)
def test_oauth_discovery_paths_answer_a_json_404(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "oauth_not_offered"


def test_an_unparseable_body_is_a_parse_error(handshake: RawMcp) -> None:
    for body in ("{not json", ""):
        response = handshake.post(body.encode())
        assert response.status_code == 400
        assert error_of(response)["code"] == -32700
        assert response.json()["id"] is None


@pytest.mark.parametrize(
    "body",
    [
        "\ud800".encode("utf-8", "surrogatepass"),
        b"\xff\xfe",
        PING.encode("utf-16"),
        PING.encode("utf-32-be"),
    ],
    ids=["encoded-surrogate", "not-utf-8", "utf-16", "utf-32-be"],
)
def test_a_body_that_is_not_utf_8_is_invalid_text_before_it_is_parsed(
    handshake: RawMcp, body: bytes
) -> None:
    response = handshake.post(body)

    assert response.status_code == 400
    error = error_of(response)
    assert (error["code"], error["data"]) == (400, {"code": "invalid_text"})
    assert error["message"].startswith("the request body is not UTF-8: send JSON encoded as UTF-8")
    assert response.json()["id"] is None


def test_a_json_array_is_an_invalid_request_not_a_batch(handshake: RawMcp) -> None:
    response = handshake.post(json.dumps([json.loads(PING), json.loads(PING)]))
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32600
    assert "Batches are not supported" in error["message"]


@pytest.mark.parametrize(
    "body",
    [
        "42",
        '"ping"',
        json.dumps({"id": 1, "method": "ping"}),  # no "jsonrpc"
        json.dumps({"jsonrpc": "1.0", "id": 1, "method": "ping"}),
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": 5}),
        json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}),  # a response, not a request
        json.dumps({"jsonrpc": "2.0", "id": None, "method": "ping"}),
        json.dumps({"jsonrpc": "2.0", "id": True, "method": "ping"}),
        json.dumps({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}),
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}),
    ],
)
def test_a_malformed_message_is_an_invalid_request(handshake: RawMcp, body: str) -> None:
    response = handshake.post(body)
    assert response.status_code == 400
    assert error_of(response)["code"] == -32600


def test_an_invalid_request_keeps_its_id_when_the_id_was_readable(handshake: RawMcp) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": "abc", "method": "ping", "params": "x"})
    assert handshake.post(body).json()["id"] == "abc"


@pytest.mark.parametrize("era", ["handshake", "modern"])
@pytest.mark.parametrize("method", ["notifications/initialized", "notifications/cancelled"])
def test_notifications_are_accepted_with_202_and_no_body(
    client: Client, era: str, method: str
) -> None:
    version = "2025-11-25" if era == "handshake" else "2026-07-28"
    response = RawMcp(client, era).post(
        json.dumps({"jsonrpc": "2.0", "method": method, "params": {"requestId": 1}}),
        headers={"MCP-Protocol-Version": version},
    )
    assert response.status_code == 202
    assert response.content == b""


def test_a_notification_naming_an_unknown_protocol_version_is_refused(handshake: RawMcp) -> None:
    response = handshake.post(
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        headers={"MCP-Protocol-Version": "1999-01-01"},
    )
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32022
    assert error["data"]["requested"] == "1999-01-01"


def test_no_answer_ever_mints_a_session_id(mcp: RawMcp) -> None:
    first = "initialize" if mcp.era == "handshake" else "server/discover"
    for method in (first, "tools/list"):
        response = mcp.request(method, {"protocolVersion": "2025-11-25"})
        assert response.status_code == 200
        assert "Mcp-Session-Id" not in response
    sent_one = mcp.request("tools/list", headers={"Mcp-Session-Id": "stale-from-elsewhere"})
    assert sent_one.status_code == 200
    assert "Mcp-Session-Id" not in sent_one
