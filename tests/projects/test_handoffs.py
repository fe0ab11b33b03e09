"""Handoffs (DESIGN.md section 10): written by one session, claimed exactly once by the
next session start of the project, never after they expire."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone
from pytest_django.live_server_helper import LiveServer

from projects.models import Grant, Handoff, Project
from tests.conftest import A, ApiCall, Persona, make_project
from tests.mcp_raw import RawMcp

pytestmark = pytest.mark.django_db

START = {**A, "session_id": "next-session", "agent": "codex"}
NOTE = "Done: the export endpoint. Open: pagination. Next: tests. Files: api/export.py"


@pytest.fixture(autouse=True)
def _project(project_a: Project) -> None:
    """default/project-a exists."""


def _create(api: ApiCall, body: str = NOTE) -> str:
    status, answer = api("post", "/api/v1/handoffs", {**A, "body": body})
    assert status == 201, answer
    handoff_id: str = answer["handoff_id"]
    return handoff_id


def test_the_next_session_start_gets_the_handoff_once(api: ApiCall) -> None:
    handoff_id = _create(api)

    first = api("post", "/api/v1/sessions", START)[1]
    second = api("post", "/api/v1/sessions", {**START, "session_id": "later"})[1]

    assert first["handoff"]["id"] == handoff_id
    assert first["handoff"]["body"] == NOTE
    assert first["context"].startswith(
        "🤝 ai-memory handoff for default/project-a, written just now by other:\n" + NOTE
    )
    assert second["handoff"] is None
    assert "🤝" not in second["context"]
    claimed = Handoff.objects.get()
    assert claimed.state == Handoff.State.CLAIMED
    assert claimed.claimed_by_session is not None
    assert claimed.claimed_by_session.session_id == "next-session"


def test_handoffs_are_delivered_oldest_first(api: ApiCall) -> None:
    older = _create(api, "older")
    newer = _create(api, "newer")

    assert api("post", "/api/v1/sessions", START)[1]["handoff"]["id"] == older
    assert (
        api("post", "/api/v1/sessions", {**START, "session_id": "s2"})[1]["handoff"]["id"] == newer
    )


def test_an_expired_handoff_is_never_delivered(api: ApiCall) -> None:
    _create(api)
    Handoff.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    block = api("post", "/api/v1/sessions", START)[1]

    assert block["handoff"] is None
    listed = api("get", "/api/v1/handoffs", A)[1]["handoffs"]
    assert [row["state"] for row in listed] == ["expired"]


def test_a_handoff_expires_after_the_configured_days(api: ApiCall, settings: Any) -> None:
    settings.AI_MEMORY_HANDOFF_TTL_DAYS = 2
    _create(api)

    handoff = Handoff.objects.get()

    assert handoff.expires_at - handoff.created_at == timedelta(days=2)


def test_the_hook_route_without_a_session_claims_nothing(api: ApiCall) -> None:
    _create(api)

    block = api("get", "/handoff", A)[1]

    assert block["handoff"] is None
    assert Handoff.objects.get().state == Handoff.State.OPEN


def test_the_list_is_newest_first_without_bodies(api: ApiCall) -> None:
    first = _create(api, "a" * 10)
    second = _create(api, "b" * 20)
    api("post", "/api/v1/sessions", START)

    rows = api("get", "/api/v1/handoffs", A)[1]["handoffs"]

    assert [row["id"] for row in rows] == [second, first]
    assert [row["state"] for row in rows] == ["open", "claimed"]
    assert [row["chars"] for row in rows] == [20, 10]
    assert all("body" not in row for row in rows)


def test_a_handoff_body_is_scrubbed_and_capped(api: ApiCall) -> None:
    token = "ghp_" + "a1B2" * 9
    _create(api, f"push with {token}\n" + "x" * 9000)

    body = Handoff.objects.get().body

    scrubbed = "push with [REDACTED]\n" + "x" * 9000
    assert body == scrubbed[:8000] + "\n[handoff body truncated; 1021 chars omitted]"


@pytest.mark.parametrize(
    ("payload", "status", "code"),
    [
        ({**A, "body": "  "}, 400, "empty_body"),
        ({"workspace": "default", "project": "nowhere", "body": "x"}, 404, "project_not_found"),
    ],
)
def test_bad_handoffs_are_refused_and_write_nothing(
    api: ApiCall, payload: dict[str, str], status: int, code: str
) -> None:
    answer = api("post", "/api/v1/handoffs", payload)

    assert answer[0] == status
    assert answer[1]["code"] == code
    assert not Handoff.objects.exists()


def test_the_mcp_tool_refuses_an_inferred_scope(mcp: RawMcp) -> None:
    text = mcp.tool_error("memory_handoff_create", {"body": NOTE})

    assert text == (
        "refusing to write a handoff for default/default: it was resolved by default, not "
        "named, so it may not be the project you are working in. Pass workspace and project."
    )
    assert not Handoff.objects.exists()


def test_the_mcp_tool_writes_a_handoff(mcp: RawMcp) -> None:
    result = mcp.call_tool("memory_handoff_create", {**A, "body": NOTE})

    assert result["structuredContent"]["handoff_id"] == str(Handoff.objects.get().id)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_one_of_eight_racing_session_starts_gets_the_handoff(live_server: LiveServer) -> None:
    make_project(None, "default", "project-a")
    with httpx.Client(base_url=live_server.url) as client:
        assert client.post("/api/v1/handoffs", json={**A, "body": NOTE}).status_code == 201
    barrier = threading.Barrier(8)

    def start(i: int) -> Any:
        with httpx.Client(base_url=live_server.url, timeout=60) as client:
            barrier.wait()
            response = client.post("/api/v1/sessions", json={**START, "session_id": f"s-{i}"})
            assert response.status_code == 200, response.text
            return response.json()["handoff"]

    with ThreadPoolExecutor(max_workers=8) as pool:
        handoffs = list(pool.map(start, range(8)))

    delivered = [handoff for handoff in handoffs if handoff is not None]
    assert len(delivered) == 1
    assert delivered[0]["body"] == NOTE
    assert Handoff.objects.get().state == Handoff.State.CLAIMED


def test_the_hook_route_claims_for_a_writers_session_only(
    api: ApiCall, alice: Persona, bob: Persona
) -> None:
    secret = make_project(alice, "acme", "notes", restricted=True)
    Grant.objects.create(user=bob.user, project=secret, level=Grant.Level.READ)
    scope = {"workspace": "acme", "project": "notes"}
    assert api("post", "/api/v1/handoffs", {**scope, "body": NOTE}, token=alice.token)[0] == 201

    read_only = api("get", "/handoff", {**scope, "session_id": "bobs"}, token=bob.token)[1]
    claimed = api("get", "/handoff", {**scope, "session_id": "alices"}, token=alice.token)[1]

    assert read_only["handoff"] is None  # a reader may look, not take it
    assert claimed["handoff"]["body"] == NOTE
    assert Handoff.objects.get().state == Handoff.State.CLAIMED
