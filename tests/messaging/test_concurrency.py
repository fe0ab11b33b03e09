"""Claim-once, the inbox bound and cancel-vs-pop under real concurrency.

Many threads call a live HTTP server (pytest-django's threaded live server, one database
connection per request thread) at the same instant, released by a barrier. CI runs this
file on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpx
import pytest
from pytest_django.live_server_helper import LiveServer

from messaging.limits import MAX_PENDING_PER_INBOX
from messaging.models import Message
from projects.models import Project
from tests.conftest import Persona, make_project

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.alone]

T = TypeVar("T")


def run_together(count: int, work: Callable[[int, httpx.Client], T], base_url: str) -> list[T]:
    """Run ``work`` in ``count`` threads that all start at once; return their results."""
    barrier = threading.Barrier(count)

    def one(i: int) -> T:
        with httpx.Client(base_url=base_url, timeout=120) as client:
            barrier.wait()
            return work(i, client)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


def _projects() -> tuple[Project, Project]:
    return make_project(None, "default", "project-a"), make_project(None, "default", "project-b")


def _fill(sender: Project, recipient: Project, count: int) -> None:
    Message.objects.bulk_create(
        Message(to_project=recipient, from_project=sender, body=f"request {i}")
        for i in range(count)
    )


def _pop_until_empty(client: httpx.Client) -> list[str]:
    popped: list[str] = []
    while True:
        response = client.post(
            "/api/v1/messages/pop", json={"workspace": "default", "project": "project-b"}
        )
        assert response.status_code == 200, response.text
        message = response.json()["message"]
        if message is None:
            return popped
        popped.append(message["id"])


def test_sixteen_poppers_claim_each_of_200_messages_exactly_once(live_server: LiveServer) -> None:
    sender, recipient = _projects()
    _fill(sender, recipient, 200)

    results = run_together(16, lambda _, client: _pop_until_empty(client), live_server.url)

    popped = [message_id for batch in results for message_id in batch]
    assert len(popped) == 200
    assert len(set(popped)) == 200
    claimed = Message.objects.filter(state=Message.State.CLAIMED)
    assert {str(pk) for pk in claimed.values_list("pk", flat=True)} == set(popped)


def test_300_concurrent_sends_to_an_empty_inbox_admit_exactly_256(live_server: LiveServer) -> None:
    _projects()
    payload = {
        "to_workspace": "default",
        "to_project": "project-b",
        "from_workspace": "default",
        "from_project": "project-a",
    }

    def send_ten(i: int, client: httpx.Client) -> list[tuple[int, Any]]:
        out = []
        for j in range(10):
            response = client.post("/api/v1/messages", json={**payload, "body": f"req {i}.{j}"})
            out.append((response.status_code, response.json()))
        return out

    results = [r for batch in run_together(30, send_ten, live_server.url) for r in batch]

    statuses = Counter(status for status, _ in results)
    assert statuses == {201: MAX_PENDING_PER_INBOX, 409: 300 - MAX_PENDING_PER_INBOX}
    refusals = [body for status, body in results if status == 409]
    assert all(body["code"] == "inbox_full" and "full" in body["detail"] for body in refusals)
    assert Message.objects.filter(state=Message.State.PENDING).count() == MAX_PENDING_PER_INBOX
    accepted = {body["message_id"] for status, body in results if status == 201}
    assert {str(pk) for pk in Message.objects.values_list("pk", flat=True)} == accepted


def test_cancel_all_racing_poppers_leaves_each_message_claimed_or_cancelled(
    live_server: LiveServer,
) -> None:
    sender, recipient = _projects()
    _fill(sender, recipient, 150)

    def act(i: int, client: httpx.Client) -> tuple[str, Any]:
        if i == 0:
            cancelled = 0
            for _ in range(5):
                response = client.post(
                    "/api/v1/messages/cancel",
                    json={"workspace": "default", "project": "project-a", "all": True},
                )
                assert response.status_code == 200, response.text
                cancelled += response.json()["cancelled"]
            return "cancel", cancelled
        return "pop", _pop_until_empty(client)

    results = run_together(8, act, live_server.url)

    cancelled_count = sum(n for kind, n in results if kind == "cancel")
    popped = [message_id for kind, batch in results if kind == "pop" for message_id in batch]
    assert len(popped) == len(set(popped))
    rows = dict(Message.objects.values_list("pk", "state"))
    assert set(rows.values()) <= {Message.State.CLAIMED, Message.State.CANCELLED}
    claimed_rows = {str(pk) for pk, state in rows.items() if state == Message.State.CLAIMED}
    assert claimed_rows == set(popped)
    assert sum(1 for s in rows.values() if s == Message.State.CANCELLED) == cancelled_count
    assert len(popped) + cancelled_count == 150


def test_eight_racing_sends_with_one_key_store_one_message(live_server: LiveServer) -> None:
    _projects()
    payload = {
        "to_workspace": "default",
        "to_project": "project-b",
        "from_workspace": "default",
        "from_project": "project-a",
        "idempotency_key": "retry-storm",
    }

    def send(i: int, client: httpx.Client) -> tuple[int, Any]:
        response = client.post("/api/v1/messages", json={**payload, "body": f"attempt {i}"})
        return response.status_code, response.json()

    results = run_together(8, send, live_server.url)

    assert Message.objects.count() == 1
    stored = str(Message.objects.get().pk)
    assert {body["message_id"] for _, body in results} == {stored}
    assert sorted(status for status, _ in results) == [200] * 7 + [201]
    assert sum(body["idempotent_replay"] is False for _, body in results) == 1


def test_eight_racing_pops_with_one_request_id_claim_one_message(live_server: LiveServer) -> None:
    sender, recipient = _projects()
    _fill(sender, recipient, 5)

    def pop(i: int, client: httpx.Client) -> Any:
        response = client.post(
            "/api/v1/messages/pop",
            json={"workspace": "default", "project": "project-b", "request_id": "one-pop"},
        )
        assert response.status_code == 200, response.text
        return response.json()["message"]["id"]

    results = run_together(8, pop, live_server.url)

    assert len(set(results)) == 1
    assert Message.objects.filter(state=Message.State.CLAIMED).count() == 1
    assert Message.objects.filter(state=Message.State.PENDING).count() == 4


@pytest.mark.usefixtures("auth_on")
def test_racing_sends_of_two_users_with_one_key_store_one_message_each(
    live_server: LiveServer, alice: Persona, bob: Persona
) -> None:
    """Four retries of alice's send and four of bob's, all with one key, from one open
    project: each user's retries write once, and the two users' sends stay apart."""
    _projects()
    payload = {
        "to_workspace": "default",
        "to_project": "project-b",
        "from_workspace": "default",
        "from_project": "project-a",
        "idempotency_key": "retry-storm",
    }
    users = [alice, bob] * 4

    def send(i: int, client: httpx.Client) -> tuple[str, int, Any]:
        user = users[i]
        response = client.post(
            "/api/v1/messages",
            json={**payload, "body": f"{user.user.username}'s attempt {i}"},
            headers={"Authorization": f"Bearer {user.token}"},
        )
        return user.user.username, response.status_code, response.json()

    results = run_together(len(users), send, live_server.url)

    stored = dict(Message.objects.values_list("from_owner_user", "pk"))
    assert sorted(stored) == ["alice", "bob"]
    for name in ("alice", "bob"):
        answers = [(status, body) for who, status, body in results if who == name]
        assert {body["message_id"] for _, body in answers} == {str(stored[name])}
        assert sorted(status for status, _ in answers) == [200, 200, 200, 201]


@pytest.mark.usefixtures("auth_on")
def test_racing_pops_of_two_users_with_one_request_id_claim_one_message_each(
    live_server: LiveServer, alice: Persona, bob: Persona
) -> None:
    sender, recipient = _projects()
    _fill(sender, recipient, 5)
    users = [alice, bob] * 4

    def pop(i: int, client: httpx.Client) -> tuple[str, Any]:
        response = client.post(
            "/api/v1/messages/pop",
            json={"workspace": "default", "project": "project-b", "request_id": "one-pop"},
            headers={"Authorization": f"Bearer {users[i].token}"},
        )
        assert response.status_code == 200, response.text
        return users[i].user.username, response.json()["message"]["id"]

    results = run_together(len(users), pop, live_server.url)

    claimed = dict(Message.objects.filter(state="claimed").values_list("claimed_by_user", "pk"))
    assert sorted(claimed) == ["alice", "bob"]
    assert {(who, message_id) for who, message_id in results} == {
        (name, str(pk)) for name, pk in claimed.items()
    }
    assert Message.objects.filter(state=Message.State.PENDING).count() == 3
