"""Handoffs (docs/reference.md#the-on-start-block): written by one session, claimed exactly once by the
next session start of the project, never after they expire."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper
from pytest_django.live_server_helper import LiveServer

from projects.models import AgentSession, Grant, Handoff, Project
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


# ---- only a new session claims (a compaction must not eat the next session's note) ------


@pytest.mark.parametrize("source", ["compact", "resume", "init"])
def test_a_continuing_start_claims_nothing_and_the_next_startup_gets_the_handoff(
    api: ApiCall, source: str
) -> None:
    handoff_id = _create(api)

    continuing = api("post", "/api/v1/sessions", {**START, "source": source})[1]
    startup = api("post", "/api/v1/sessions", {**START, "session_id": "new", "source": "startup"})

    assert continuing["handoff"] is None
    assert "🤝" not in continuing["context"]
    assert startup[1]["handoff"]["id"] == handoff_id


@pytest.mark.parametrize("source", ["startup", "clear", None])
def test_a_new_session_of_any_fresh_source_claims(api: ApiCall, source: str | None) -> None:
    handoff_id = _create(api)
    payload = START if source is None else {**START, "source": source}

    assert api("post", "/api/v1/sessions", payload)[1]["handoff"]["id"] == handoff_id


def test_a_repeated_session_id_claims_nothing(api: ApiCall) -> None:
    assert api("post", "/api/v1/sessions", START)[1]["handoff"] is None
    handoff_id = _create(api)

    repeated = api("post", "/api/v1/sessions", START)[1]
    fresh = api("post", "/api/v1/sessions", {**START, "session_id": "fresh"})[1]

    assert repeated["handoff"] is None
    assert fresh["handoff"]["id"] == handoff_id


# ---- GET /handoff with a session id: a session start, never a cross-site one ------------


def _hook_get(
    client: Client,
    session_id: str,
    *,
    scope: dict[str, str] = A,
    token: str | None = None,
    fetch_site: str | None = None,
) -> dict[str, Any]:
    """``GET /handoff`` for ``session_id``; ``fetch_site`` is the browser's Sec-Fetch-Site."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if fetch_site is not None:
        headers["Sec-Fetch-Site"] = fetch_site
    response = client.get("/handoff", {**scope, "session_id": session_id}, headers=headers)
    assert response.status_code == 200, response.content
    answer: dict[str, Any] = response.json()
    return answer


@pytest.mark.parametrize("fetch_site", ["cross-site", "same-site"])
def test_the_hook_route_never_claims_for_a_cross_site_request(
    api: ApiCall, client: Client, fetch_site: str
) -> None:
    """An ``<img src=.../handoff?session_id=x>`` on any web page must not eat the note."""
    _create(api)

    answer = _hook_get(client, "from-a-page", fetch_site=fetch_site)

    assert answer["handoff"] is None
    assert Handoff.objects.get().state == Handoff.State.OPEN
    assert not AgentSession.objects.filter(session_id="from-a-page").exists()


# A browser without fetch metadata (an older one, or one that strips it) still names the
# page an <img> was on in Referer: another scheme, host or port than the server's own.
FOREIGN_REFERERS = [
    "https://evil.example/page.html",
    "http://testserver:8001/",
    "https://testserver/web/",
    "http://localhost/",
    "not a url",
]


@pytest.mark.parametrize("referer", FOREIGN_REFERERS)
def test_the_hook_route_never_claims_for_a_foreign_referer_without_fetch_metadata(
    api: ApiCall, client: Client, referer: str
) -> None:
    _create(api)

    response = client.get(
        "/handoff", {**A, "session_id": "from-a-page"}, headers={"Referer": referer}
    )

    assert response.status_code == 200, response.content
    assert response.json()["handoff"] is None
    assert Handoff.objects.get().state == Handoff.State.OPEN
    assert not AgentSession.objects.filter(session_id="from-a-page").exists()


@pytest.mark.parametrize(
    "referer",
    [
        "http://testserver/web/w/default/project-a/",
        "http://TestServer:80/",
        "https://tools.example/x?y=1",
    ],
)
def test_the_hook_route_claims_for_a_referer_of_the_servers_own_or_an_allowed_origin(
    api: ApiCall, client: Client, settings: SettingsWrapper, referer: str
) -> None:
    settings.AI_MEMORY_ALLOWED_ORIGINS = ["https://tools.example"]
    handoff_id = _create(api)

    response = client.get("/handoff", {**A, "session_id": "own-page"}, headers={"Referer": referer})

    assert response.status_code == 200, response.content
    assert response.json()["handoff"]["id"] == handoff_id


def test_fetch_metadata_decides_over_the_referer(api: ApiCall, client: Client) -> None:
    """``Sec-Fetch-Site: same-origin`` is the browser's own word; a Referer cut to its
    origin by a referrer policy, or rewritten by an extension, does not overrule it."""
    handoff_id = _create(api)

    response = client.get(
        "/handoff", {**A, "session_id": "own-page"},
        headers={"Sec-Fetch-Site": "same-origin", "Referer": "https://evil.example/"},
    )  # fmt: skip

    assert response.status_code == 200, response.content
    assert response.json()["handoff"]["id"] == handoff_id


def test_a_session_start_with_a_foreign_referer_claims_nothing(
    api: ApiCall, client: Client
) -> None:
    _create(api)

    response = client.post(
        "/api/v1/sessions", START, content_type="application/json",
        headers={"Referer": "https://evil.example/"},
    )  # fmt: skip

    assert response.status_code == 200, response.content
    assert response.json()["handoff"] is None
    assert Handoff.objects.get().state == Handoff.State.OPEN


@pytest.mark.parametrize("fetch_site", ["same-origin", "none"])
def test_the_hook_route_claims_for_a_same_origin_or_typed_in_request(
    api: ApiCall, client: Client, fetch_site: str
) -> None:
    handoff_id = _create(api)

    answer = _hook_get(client, "typed-in", fetch_site=fetch_site)

    assert answer["handoff"]["id"] == handoff_id


def test_the_hook_route_claims_once_per_session_id(api: ApiCall, client: Client) -> None:
    first, second = _create(api, "first"), _create(api, "second")

    claimed = _hook_get(client, "hook-get")
    repeated = _hook_get(client, "hook-get")
    fresh = _hook_get(client, "another")

    assert claimed["handoff"]["id"] == first
    assert repeated["handoff"] is None
    assert fresh["handoff"]["id"] == second


def test_the_hook_route_claims_nothing_for_an_id_that_already_started(
    api: ApiCall, client: Client
) -> None:
    assert api("post", "/api/v1/sessions", START)[0] == 200
    handoff_id = _create(api)

    started_before = _hook_get(client, START["session_id"])
    fresh = _hook_get(client, "fresh")

    assert started_before["handoff"] is None
    assert fresh["handoff"]["id"] == handoff_id


def test_the_hook_route_claims_nothing_for_another_principals_session(
    api: ApiCall, client: Client, alice: Persona, bob: Persona, alices_open: Project
) -> None:
    scope = {"workspace": "default", "project": "commons"}
    alices = {**scope, "session_id": "alices-session"}
    assert api("post", "/api/v1/sessions", alices, token=alice.token)[0] == 200
    assert api("post", "/api/v1/handoffs", {**scope, "body": NOTE}, token=alice.token)[0] == 201

    by_bob_as_alice = _hook_get(client, "alices-session", scope=scope, token=bob.token)
    by_bob_as_himself = _hook_get(client, "bobs-session", scope=scope, token=bob.token)

    assert by_bob_as_alice["handoff"] is None
    assert by_bob_as_himself["handoff"]["body"] == NOTE
    session = AgentSession.objects.get(session_id="alices-session")
    assert session.principal_key == alice.principal.key


def test_a_session_start_a_browser_marks_cross_site_registers_but_claims_nothing(
    api: ApiCall, client: Client
) -> None:
    _create(api)

    response = client.post(
        "/api/v1/sessions", START, content_type="application/json",
        headers={"Sec-Fetch-Site": "cross-site"},
    )  # fmt: skip

    assert response.status_code == 200, response.content
    assert response.json()["handoff"] is None
    assert Handoff.objects.get().state == Handoff.State.OPEN
    assert AgentSession.objects.filter(session_id=START["session_id"]).exists()
