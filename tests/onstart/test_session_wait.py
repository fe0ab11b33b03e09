"""POST /api/v1/sessions/wait: a session learns of mail it has not been told about, once,
on a real served server; a newer wait supersedes an older one; nobody waits through a
session id, or on a project, that is not theirs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from django.db import connection
from pytest_django.live_server_helper import LiveServer

from messaging.models import Announcement
from messaging.notices import inbox_notice
from messaging.session_waits import pending_announce
from projects.models import AgentSession, Project
from tests.conftest import SEND, B, Persona, make_project

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = "/api/v1/sessions/wait"


class Api:
    """The served JSON API, as one caller (a token, or anonymous)."""

    def __init__(self, url: str, token: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(base_url=url, headers=headers, timeout=60)

    def post(self, path: str, payload: dict[str, Any]) -> tuple[int, Any]:
        response = self.client.post(path, json=payload)
        return response.status_code, response.json()

    def start(self, session_id: str, scope: dict[str, str] = B) -> dict[str, Any]:
        status, body = self.post("/api/v1/sessions", {**scope, "session_id": session_id})
        assert status == 200, body
        started: dict[str, Any] = body
        return started

    def send(self, body: str = "Add a /v1/export endpoint.", **fields: str) -> str:
        status, answer = self.post("/api/v1/messages", {**SEND, "body": body, **fields})
        assert status == 201, answer
        message_id: str = answer["message_id"]
        return message_id

    def wait(
        self, session_id: str, wait_seconds: int = 0, scope: dict[str, str] = B
    ) -> tuple[int, Any]:
        return self.post(WAIT, {**scope, "session_id": session_id, "wait_seconds": wait_seconds})


@pytest.fixture
def api(live_server: LiveServer) -> Iterator[Api]:
    make_project(None, "default", "project-a")
    make_project(None, "default", "project-b")
    caller = Api(live_server.url)
    yield caller
    caller.client.close()


def _in_thread(call: Any) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(call()))
    thread.start()
    return thread, result


def _told(count: int, pending: int) -> dict[str, Any]:
    return {
        "new_message_count": count,
        "pending_message_count": pending,
        "context": inbox_notice(count=pending, workspace="default", project="project-b")
        if count
        else None,
        "superseded": False,
    }


def test_mail_the_session_start_announced_does_not_wake_the_session(api: Api) -> None:
    api.send()
    started = api.start("b-1")
    assert started["pending_message_count"] == 1

    assert api.wait("b-1") == (200, _told(0, 1))


def test_a_parked_wait_announces_new_mail_once(api: Api, parked: threading.Event) -> None:
    api.start("b-1")
    thread, result = _in_thread(lambda: api.wait("b-1", wait_seconds=30))
    assert parked.wait(10)

    api.send("First body, never in a wake.")
    thread.join(10)

    assert result == [(200, _told(1, 1))]
    assert "First body" not in str(result)
    # Told now: the next wait has nothing new, though the message still waits.
    assert api.wait("b-1") == (200, _told(0, 1))
    api.send()
    assert api.wait("b-1") == (200, _told(1, 2))


def test_the_answer_says_the_wait_it_used(api: Api) -> None:
    """A wait over 60 s is clamped, and ``X-Memory-Wait-Seconds`` says to what
    (docs/reference.md#waiting-and-waking)."""
    api.start("b-1")
    api.send()

    response = api.client.post(WAIT, json={**B, "session_id": "b-1", "wait_seconds": 3600})

    assert (response.status_code, response.json()) == (200, _told(1, 1))
    assert response.headers["X-Memory-Wait-Seconds"] == "60"


def test_each_session_is_told_for_itself(api: Api) -> None:
    api.start("b-1")
    api.start("b-2")
    api.send()

    assert api.wait("b-1") == (200, _told(1, 1))
    assert api.wait("b-2") == (200, _told(1, 1))
    assert api.wait("b-1") == (200, _told(0, 1))


def test_a_repeated_session_start_tells_what_came_since(api: Api) -> None:
    api.start("b-1")
    api.send()
    assert api.start("b-1")["pending_message_count"] == 1

    assert api.wait("b-1") == (200, _told(0, 1))


def test_the_hook_block_with_a_session_id_tells_the_session(api: Api) -> None:
    api.start("b-1")
    api.send()
    block = api.client.get("/handoff", params={**B, "session_id": "b-1"}).json()
    assert block["pending_message_count"] == 1

    assert api.wait("b-1") == (200, _told(0, 1))


def test_the_hook_block_without_a_session_id_tells_nobody(api: Api) -> None:
    api.start("b-1")
    api.send()
    assert api.client.get("/handoff", params=B).json()["pending_message_count"] == 1

    assert api.wait("b-1") == (200, _told(1, 1))


def test_a_wait_answers_at_its_timeout_with_nothing_new(api: Api) -> None:
    api.start("b-1")

    assert api.wait("b-1", wait_seconds=1) == (200, _told(0, 0))


def test_a_newer_wait_supersedes_a_parked_one(api: Api, parked: threading.Event) -> None:
    api.start("b-1")
    thread, older = _in_thread(lambda: api.wait("b-1", wait_seconds=30))
    assert parked.wait(10)

    assert api.wait("b-1") == (200, _told(0, 0))
    thread.join(10)

    assert older == [
        (
            200,
            {
                "new_message_count": 0,
                "pending_message_count": 0,
                "context": None,
                "superseded": True,
            },
        )
    ]


def test_mail_after_a_supersession_goes_to_the_newer_wait(
    api: Api, parked: threading.Event
) -> None:
    api.start("b-1")
    first, older = _in_thread(lambda: api.wait("b-1", wait_seconds=30))
    assert parked.wait(10)
    parked.clear()
    second, newer = _in_thread(lambda: api.wait("b-1", wait_seconds=30))
    first.join(10)
    assert older[0][1]["superseded"] is True
    assert parked.wait(10)

    api.send()
    second.join(10)

    assert newer == [(200, _told(1, 1))]


def test_an_unknown_session_id_is_not_found_and_writes_nothing(api: Api) -> None:
    status, body = api.wait("never-started")

    assert (status, body["code"]) == (404, "session_not_found")
    assert not AgentSession.objects.exists()


def test_wait_seconds_must_be_an_integer(api: Api) -> None:
    api.start("b-1")
    for value in ("soon", 1.5, [1]):
        status, body = api.post(WAIT, {**B, "session_id": "b-1", "wait_seconds": value})
        assert (status, body["code"]) == (422, "validation_error"), value


def test_a_long_wait_is_clamped_to_sixty_seconds(api: Api) -> None:
    api.start("b-1")
    api.send()

    # 10**9 s is not refused: it is a wait of at most 60 s, which answers at once here.
    assert api.wait("b-1", wait_seconds=10**9) == (200, _told(1, 1))


def test_racing_announcements_tell_each_message_once(api: Api) -> None:
    api.start("b-1")
    for n in range(5):
        api.send(f"request {n}")
    session = AgentSession.objects.get(session_id="b-1")
    project = Project.objects.get(name="project-b")
    barrier = threading.Barrier(6)

    def announce(_: int) -> int:
        barrier.wait()
        try:
            return pending_announce(session=session, project=project).new
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=6) as pool:
        told = list(pool.map(announce, range(6)))

    assert sum(told) == 5
    assert Announcement.objects.count() == 5


# ---- whose session, whose project -------------------------------------------------------


Caller = Callable[[Persona], "Api"]


@pytest.fixture
def caller(live_server: LiveServer, auth_on: str) -> Iterator[Caller]:
    """``caller(persona)``: the served API as that persona, on a server with auth on.
    Closed at the end, so no served thread keeps a database connection open."""
    made: list[Api] = []

    def as_persona(persona: Persona) -> Api:
        made.append(Api(live_server.url, persona.token))
        return made[-1]

    yield as_persona
    for api in made:
        api.client.close()


def test_another_principals_session_id_is_not_found(
    caller: Caller, alice: Persona, bob: Persona, alices_restricted: Project
) -> None:
    alpha = {"workspace": "default", "project": "alpha"}
    caller(alice).start("alices-session", alpha)

    status, body = caller(bob).wait("alices-session", scope=alpha)

    assert (status, body["code"]) == (404, "session_not_found")
    assert "alpha" not in body["detail"]


def test_a_reader_waits_with_a_session_of_its_own(
    caller: Caller, alice: Persona, bob: Persona, alices_restricted: Project
) -> None:
    alpha = {"workspace": "default", "project": "alpha"}
    bobs = {"workspace": "default", "project": "bobs-project"}
    reader = caller(bob)
    reader.start("bobs-session", bobs)
    status, answer = caller(alice).post(
        "/api/v1/messages",
        {**SEND, "to_project": "alpha", "from_project": "alpha"},
    )
    assert status == 201, answer

    status, body = reader.wait("bobs-session", scope=alpha)

    assert status == 200
    assert (body["new_message_count"], body["pending_message_count"]) == (1, 1)
    assert "default/alpha" in body["context"]


def test_charlie_learns_nothing_of_a_project_he_cannot_read(
    caller: Caller, charlie: Persona, alices_restricted: Project
) -> None:
    outsider = caller(charlie)
    outsider.start("charlies-session", {"workspace": "default", "project": "charlies"})

    hidden = outsider.wait("charlies-session", scope={"workspace": "default", "project": "alpha"})
    missing = outsider.wait("charlies-session", scope={"workspace": "default", "project": "nope"})

    assert hidden[0] == missing[0] == 404
    assert hidden[1]["code"] == missing[1]["code"] == "project_not_found"
    assert hidden[1]["detail"].replace("alpha", "nope") == missing[1]["detail"]
    # An unknown session id on a hidden project says no more than a known one.
    unknown = outsider.wait("no-such-session", scope={"workspace": "default", "project": "alpha"})
    assert unknown == hidden
