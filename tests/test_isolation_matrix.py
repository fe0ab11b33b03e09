"""Who may do what with a restricted project, on every surface (docs/reference.md#messages and docs/operating.md#authentication).

alice created ``acme/secretproj`` (restricted); bob holds a read grant, dave a write
grant, charlie nothing. Every operation runs against it and against ``acme/nothere``,
which does not exist: whatever a caller may not read must answer byte for byte like the
missing project, but for the names the caller typed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from messaging.models import Message
from messaging.services import message_send
from projects.models import Grant, Project
from projects.services import api_token_issue
from tests.conftest import Persona, make_project
from tests.mcp_raw import RawMcp

pytestmark = pytest.mark.django_db

SECRET = "secretproj"
MISSING = "nothere"
# Stands in for a message id in the missing project: same shape, no message.
UNKNOWN_ID = "0190b1d8-0000-7000-8000-000000000000"


@pytest.fixture
def dave(db: None) -> Persona:
    user = User.objects.create_user(username="dave", password="dave-password")
    return Persona(user=user, token=api_token_issue(user=user)[1])


@pytest.fixture
def world(alice: Persona, bob: Persona, charlie: Persona, dave: Persona) -> dict[str, str]:
    """The restricted project with mail both ways, an open project, and the message ids."""
    secret = make_project(alice, "acme", SECRET, restricted=True)
    make_project(alice, "acme", "openproj")
    Grant.objects.create(user=bob.user, project=secret, level=Grant.Level.READ)
    Grant.objects.create(user=dave.user, project=secret, level=Grant.Level.WRITE)
    inbound = message_send(
        principal=alice.principal,
        to_workspace="acme",
        to_project=SECRET,
        from_workspace="acme",
        from_project="openproj",
        body="for secretproj",
    )
    outbound = message_send(
        principal=alice.principal,
        to_workspace="acme",
        to_project="openproj",
        from_workspace="acme",
        from_project=SECRET,
        body="from secretproj",
    )
    return {"inbound": str(inbound.message.id), "outbound": str(outbound.message.id)}


def _scope(name: str) -> dict[str, str]:
    return {"workspace": "acme", "project": name}


# Each operation: (name, the level it needs, REST call, MCP tool call). ``name`` is the
# project the call is aimed at; ``ids`` the message ids of the world.
Rest = Callable[[Client, str, dict[str, str], dict[str, str]], Any]
OPERATIONS: list[tuple[str, int, Rest, tuple[str, Callable[[str, dict[str, str]], dict[str, Any]]]]]


def _post(client: Client, path: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    return client.post(path, json.dumps(body), content_type="application/json", headers=headers)


OPERATIONS = [
    (
        "list",
        1,
        lambda c, name, ids, h: c.get("/api/v1/messages", _scope(name), headers=h),
        ("memory_message_list", lambda name, ids: _scope(name)),
    ),
    (
        "outbox",
        1,
        lambda c, name, ids, h: c.get(
            "/api/v1/messages", {**_scope(name), "box": "outbox"}, headers=h
        ),
        ("memory_message_list", lambda name, ids: {**_scope(name), "box": "outbox"}),
    ),
    (
        "briefing",
        1,
        lambda c, name, ids, h: c.get("/api/v1/briefing", _scope(name), headers=h),
        ("memory_briefing", lambda name, ids: _scope(name)),
    ),
    (
        "pop",
        2,
        lambda c, name, ids, h: _post(c, "/api/v1/messages/pop", _scope(name), h),
        ("memory_message_pop", lambda name, ids: _scope(name)),
    ),
    (
        "pop-by-id",
        2,
        lambda c, name, ids, h: _post(
            c, "/api/v1/messages/pop", {**_scope(name), "message_id": ids["inbound"]}, h
        ),
        ("memory_message_pop", lambda name, ids: {**_scope(name), "message_id": ids["inbound"]}),
    ),
    (
        "cancel",
        2,
        lambda c, name, ids, h: _post(
            c, "/api/v1/messages/cancel", {**_scope(name), "message_id": ids["outbound"]}, h
        ),
        (
            "memory_message_cancel",
            lambda name, ids: {**_scope(name), "message_id": ids["outbound"]},
        ),
    ),
    (
        "send-to",
        2,
        lambda c, name, ids, h: _post(
            c,
            "/api/v1/messages",
            {
                "to_workspace": "acme",
                "to_project": name,
                "from_workspace": "acme",
                "from_project": "openproj",
                "body": "hello",
            },
            h,
        ),
        (
            "memory_message_send",
            lambda name, ids: {
                "to_workspace": "acme",
                "to_project": name,
                "from_workspace": "acme",
                "from_project": "openproj",
                "body": "hello",
            },
        ),
    ),
    (
        "send-as",
        2,
        lambda c, name, ids, h: _post(
            c,
            "/api/v1/messages",
            {
                "to_workspace": "acme",
                "to_project": "openproj",
                "from_workspace": "acme",
                "from_project": name,
                "body": "hello",
            },
            h,
        ),
        (
            "memory_message_send",
            lambda name, ids: {
                "to_workspace": "acme",
                "to_project": "openproj",
                "from_workspace": "acme",
                "from_project": name,
                "body": "hello",
            },
        ),
    ),
]
OPERATION_IDS = [op[0] for op in OPERATIONS]
# Each persona's level on secretproj: 0 none, 1 read, 2 write.
LEVELS = {"alice": 2, "dave": 2, "bob": 1, "charlie": 0}


def _persona(request: pytest.FixtureRequest, name: str) -> Persona:
    persona: Persona = request.getfixturevalue(name)
    return persona


def _state() -> list[tuple[Any, ...]]:
    return sorted(Message.objects.values_list("id", "state", "to_project_id", "from_project_id"))


@pytest.mark.parametrize("who", list(LEVELS))
@pytest.mark.parametrize(("op", "need", "rest", "tool"), OPERATIONS, ids=OPERATION_IDS)
def test_rest_answers_by_level(
    request: pytest.FixtureRequest,
    client: Client,
    world: dict[str, str],
    who: str,
    op: str,
    need: int,
    rest: Rest,
    tool: Any,
) -> None:
    headers = {"Authorization": f"Bearer {_persona(request, who).token}"}
    level = LEVELS[who]
    before = _state()

    secret = rest(client, SECRET, world, headers)
    missing = rest(client, MISSING, {"inbound": UNKNOWN_ID, "outbound": UNKNOWN_ID}, headers)

    if level >= need:
        assert secret.status_code in (200, 201), (who, op, secret.content)
        return
    assert _state() == before, "a refused call changed nothing"
    if level == 0:
        assert secret.status_code == missing.status_code == 404
        assert secret.content.decode().replace(SECRET, MISSING) == missing.content.decode()
    else:
        assert secret.status_code == 403
        assert secret.json()["code"] == "write_access_required"


@pytest.mark.parametrize("who", list(LEVELS))
@pytest.mark.parametrize(("op", "need", "rest", "tool"), OPERATIONS, ids=OPERATION_IDS)
def test_mcp_answers_by_level(
    request: pytest.FixtureRequest,
    handshake: RawMcp,
    world: dict[str, str],
    who: str,
    op: str,
    need: int,
    rest: Rest,
    tool: tuple[str, Callable[[str, dict[str, str]], dict[str, Any]]],
) -> None:
    headers = {"Authorization": f"Bearer {_persona(request, who).token}"}
    level = LEVELS[who]
    name, arguments = tool
    before = _state()

    secret = handshake.call_tool(name, arguments(SECRET, world), headers=headers)
    missing = handshake.call_tool(
        name,
        arguments(MISSING, {"inbound": UNKNOWN_ID, "outbound": UNKNOWN_ID}),
        headers=headers,
    )

    if level >= need:
        assert secret["isError"] is False, (who, op, secret)
        return
    assert _state() == before
    assert secret["isError"] is True
    if level == 0:
        assert json.dumps(secret).replace(SECRET, MISSING) == json.dumps(missing)
    else:
        assert "needs write" in secret["content"][0]["text"]


def _without_csrf(html: str) -> str:
    """The page without its per-response CSRF token (the sign-out form carries one)."""
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", html)


@pytest.mark.parametrize("who", list(LEVELS))
def test_the_web_page_shows_only_what_the_viewer_may_read(
    request: pytest.FixtureRequest, client: Client, world: dict[str, str], who: str
) -> None:
    client.force_login(_persona(request, who).user)

    secret = _without_csrf(client.get(f"/web/w/acme/{SECRET}/").content.decode())
    missing = _without_csrf(client.get(f"/web/w/acme/{MISSING}/").content.decode())

    # The Mailbox the page's script polls: for an outsider, byte for byte a missing one's.
    live_secret = client.get(f"/web/w/acme/{SECRET}/live/")
    live_missing = client.get(f"/web/w/acme/{MISSING}/live/")

    if LEVELS[who] == 0:
        assert secret.replace(SECRET, MISSING) == missing
        assert "for secretproj" not in secret
        assert live_secret.content == live_missing.content
        assert live_secret["ETag"] == live_missing["ETag"]
    else:
        assert "for secretproj" in secret
        assert "for secretproj" in live_secret.content.decode()


def test_bobs_read_grant_cannot_sign_as_the_project(
    client: Client, world: dict[str, str], bob: Persona
) -> None:
    """The report's finding: a read grant must not send with from_project: secretproj."""
    before = _state()
    send = {
        "to_workspace": "acme",
        "to_project": "openproj",
        "from_workspace": "acme",
        "from_project": SECRET,
        "body": "signed as secretproj",
    }

    response = _post(client, "/api/v1/messages", send, {"Authorization": f"Bearer {bob.token}"})

    assert response.status_code == 403
    assert response.json()["code"] == "write_access_required"
    assert _state() == before


def test_a_restricted_project_costs_the_queries_of_a_missing_one(
    client: Client, world: dict[str, str], charlie: Persona
) -> None:
    headers = {"Authorization": f"Bearer {charlie.token}"}
    client.get("/healthz", headers=headers)
    client.get("/api/v1/messages", _scope(MISSING), headers=headers)  # token use recorded
    counts = []
    for name in (SECRET, MISSING):
        with CaptureQueriesContext(connection) as captured:
            client.get("/api/v1/messages", _scope(name), headers=headers)
        counts.append(len(captured.captured_queries))

    assert counts[0] == counts[1]


def test_the_world_is_what_the_matrix_assumes(world: dict[str, str]) -> None:
    secret = Project.objects.get(name=SECRET)
    assert secret.access_mode == Project.AccessMode.RESTRICTED
    assert Message.objects.filter(to_project=secret).count() == 1
    assert Message.objects.filter(from_project=secret).count() == 1
