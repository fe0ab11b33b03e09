"""Waiting pops and statuses against the live server (docs/reference.md#waiting-and-waking).

The live server runs in this process, so a test knows when a call has parked: the
``parks`` fixture counts the calls that have looked, found nothing and begun to wait. A
send, a claim or a cancel must then wake them. Across processes and hosts:
tests/test_wait_serving.py.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import anyio
import httpx
import pytest
from django.utils import timezone
from mcp import Client
from pytest_django.live_server_helper import LiveServer

from aimemory_site.lib import wakeups
from aimemory_site.lib.errors import BadRequest
from messaging.models import Message
from projects.models import Project
from tests.conftest import SEND, A, B, Parks, make_project
from tests.mcp.test_official_client import ok, with_client

pytestmark = pytest.mark.django_db(transaction=True)

POP = "/api/v1/messages/pop"
WAIT_SECONDS_HEADER = "X-Memory-Wait-Seconds"


@pytest.fixture
def projects(transactional_db: None) -> tuple[Project, Project]:
    return make_project(None, "default", "project-a"), make_project(None, "default", "project-b")


@pytest.fixture
def http(live_server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        yield client


@pytest.fixture
def background(live_server: LiveServer) -> Iterator[Callable[..., Future[httpx.Response]]]:
    """``background("post", path, json=...)``: a request on a client of its own, running."""
    with (
        ThreadPoolExecutor(max_workers=20) as pool,
        httpx.Client(base_url=live_server.url, timeout=90) as client,
    ):

        def start(method: str, path: str, **kwargs: Any) -> Future[httpx.Response]:
            return pool.submit(client.request, method.upper(), path, **kwargs)

        yield start


def _send(http: httpx.Client, **extra: str) -> str:
    response = http.post("/api/v1/messages", json={**SEND, **extra})
    assert response.status_code == 201, response.text
    message_id: str = response.json()["message_id"]
    return message_id


def test_a_send_wakes_a_parked_pop(
    http: httpx.Client,
    background: Callable[..., Future[httpx.Response]],
    parks: Parks,
    projects: Any,
) -> None:
    started = time.monotonic()
    popping = background("post", POP, json={**B, "wait_seconds": 30})
    parks.until(1)

    message_id = _send(http)

    answer = popping.result(timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.json()["message"]["id"] == message_id
    assert answer.json()["message"]["body"] == SEND["body"]
    assert time.monotonic() - started < 10
    assert Message.objects.get(pk=message_id).state == Message.State.CLAIMED


def test_a_parked_pop_answers_null_when_its_time_is_up(http: httpx.Client, projects: Any) -> None:
    started = time.monotonic()
    answer = http.post(POP, json={**B, "wait_seconds": 1})
    waited = time.monotonic() - started

    assert answer.status_code == 200
    assert answer.json() == {"message": None}
    assert 1.0 <= waited < 3.0


def test_a_pop_without_wait_seconds_answers_at_once_and_parks_nothing(
    http: httpx.Client, parks: Parks, projects: Any
) -> None:
    for wait in ({}, {"wait_seconds": 0}, {"wait_seconds": -5}):
        assert http.post(POP, json={**B, **wait}).json() == {"message": None}
    assert parks.count == 0


def test_in_reply_to_pops_only_the_reply(
    http: httpx.Client,
    background: Callable[..., Future[httpx.Response]],
    parks: Parks,
    projects: Any,
) -> None:
    question = _send(http)
    to_a = {"to_workspace": "default", "to_project": "project-a"}
    from_b = {"from_workspace": "default", "from_project": "project-b"}
    popping = background("post", POP, json={**A, "in_reply_to": question, "wait_seconds": 30})
    parks.until(1)

    unrelated = _send(http, **to_a, **from_b, body="not an answer")
    parks.until(2)  # woken, found no reply, parked again
    reply = _send(http, **to_a, **from_b, body="the answer", in_reply_to=question)

    popped = popping.result(timeout=10).json()["message"]
    assert (popped["id"], popped["in_reply_to"]) == (reply, question)
    assert Message.objects.get(pk=unrelated).state == Message.State.PENDING
    # At once too, and only replies: the unrelated message is not a reply to the question.
    assert http.post(POP, json={**A, "in_reply_to": question}).json() == {"message": None}
    assert http.post(POP, json=A).json()["message"]["id"] == unrelated


@pytest.mark.parametrize("ending", ["pop", "cancel"])
def test_a_parked_status_answers_when_the_message_leaves_pending(
    http: httpx.Client,
    background: Callable[..., Future[httpx.Response]],
    parks: Parks,
    projects: Any,
    ending: str,
) -> None:
    message_id = _send(http)
    status = background("get", f"/api/v1/messages/{message_id}", params={**A, "wait_seconds": 30})
    parks.until(1)

    if ending == "pop":
        assert http.post(POP, json=B).json()["message"]["id"] == message_id
    else:
        assert http.post("/api/v1/messages/cancel", json={**A, "all": True}).json() == {
            "cancelled": 1
        }

    answer = status.result(timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.json()["state"] == {"pop": "claimed", "cancel": "cancelled"}[ending]


def test_a_parked_status_answers_the_pending_message_when_its_time_is_up(
    http: httpx.Client, projects: Any
) -> None:
    message_id = _send(http)
    started = time.monotonic()

    answer = http.get(f"/api/v1/messages/{message_id}", params={**B, "wait_seconds": 1})

    assert answer.json()["state"] == "pending"
    assert 1.0 <= time.monotonic() - started < 3.0


def test_a_parked_status_answers_expired_when_the_message_expires(
    http: httpx.Client, projects: Any
) -> None:
    # An expiry commits nothing, so no wake comes: the wait must end at it by the clock.
    message_id = _send(http)
    Message.objects.filter(pk=message_id).update(expires_at=timezone.now() + timedelta(seconds=1))
    started = time.monotonic()

    answer = http.get(f"/api/v1/messages/{message_id}", params={**B, "wait_seconds": 30})

    assert answer.json()["state"] == "expired"
    assert time.monotonic() - started < 5


def test_a_status_of_a_claimed_message_answers_at_once(http: httpx.Client, projects: Any) -> None:
    message_id = _send(http)
    http.post(POP, json=B)
    started = time.monotonic()

    answer = http.get(f"/api/v1/messages/{message_id}", params={**A, "wait_seconds": 30})

    assert answer.json()["state"] == "claimed"
    assert time.monotonic() - started < 5


def test_a_retry_of_a_waiting_pop_answers_what_it_claimed(
    http: httpx.Client,
    background: Callable[..., Future[httpx.Response]],
    parks: Parks,
    projects: Any,
) -> None:
    pop = {**B, "request_id": "pop-1", "wait_seconds": 30}
    popping = background("post", POP, json=pop)
    parks.until(1)
    message_id = _send(http)
    assert popping.result(timeout=10).json()["message"]["id"] == message_id
    _send(http)  # another message waits now; the retry must not take it

    retried = http.post(POP, json=pop).json()

    assert retried["message"]["id"] == message_id
    assert Message.objects.filter(state=Message.State.PENDING).count() == 1


def test_a_retry_of_a_waiting_pop_that_claimed_nothing_answers_nothing(
    http: httpx.Client, projects: Any
) -> None:
    pop = {**B, "request_id": "pop-2", "wait_seconds": 1}
    assert http.post(POP, json=pop).json() == {"message": None}
    _send(http)

    assert http.post(POP, json={**pop, "wait_seconds": 0}).json() == {"message": None}
    assert Message.objects.filter(state=Message.State.PENDING).count() == 1


def test_a_retry_sent_while_the_first_is_parked_answers_the_same_message(
    http: httpx.Client,
    background: Callable[..., Future[httpx.Response]],
    parks: Parks,
    projects: Any,
) -> None:
    pop = {**B, "request_id": "pop-3", "wait_seconds": 30}
    first = background("post", POP, json=pop)
    retry = background("post", POP, json=pop)
    parks.until(2)

    message_id = _send(http)
    _send(http, body="a second message, for nobody here")

    assert first.result(timeout=10).json()["message"]["id"] == message_id
    assert retry.result(timeout=10).json()["message"]["id"] == message_id
    assert Message.objects.filter(state=Message.State.PENDING).count() == 1


@pytest.mark.parametrize("value", ["soon", 1.5, True, "5"])
def test_a_pop_whose_wait_seconds_is_not_an_integer_is_refused(
    http: httpx.Client, projects: Any, value: object
) -> None:
    message_id = _send(http)

    popped = http.post(POP, json={**B, "wait_seconds": value})

    assert popped.status_code == 422, popped.text
    assert popped.json()["code"] == "validation_error"
    assert Message.objects.get(pk=message_id).state == Message.State.PENDING


@pytest.mark.parametrize("value", ["soon", "1.5", "true"])
def test_a_status_whose_wait_seconds_is_not_an_integer_is_refused(
    http: httpx.Client, projects: Any, value: str
) -> None:
    message_id = _send(http)

    status = http.get(f"/api/v1/messages/{message_id}", params={**B, "wait_seconds": value})

    assert status.status_code == 422, status.text
    assert status.json()["code"] == "validation_error"


@pytest.mark.parametrize("value", ["5", 1.5, True, [1]])
def test_the_services_refuse_a_wait_seconds_that_is_not_an_integer(value: object) -> None:
    with pytest.raises(BadRequest) as refused:
        wakeups.wait_seconds_parse(value)
    assert refused.value.code == "invalid_wait_seconds"


@pytest.mark.parametrize(("value", "clamped"), [(None, 0), (-3, 0), (0, 0), (7, 7), (3600, 60)])
def test_wait_seconds_are_clamped_to_a_minute(value: int | None, clamped: int) -> None:
    assert wakeups.wait_seconds_parse(value) == clamped


def test_the_answer_says_the_wait_it_used(http: httpx.Client, projects: Any) -> None:
    """``X-Memory-Wait-Seconds``: the wait the call was given, after the clamp to 0..60,
    so a client that asked for more learns it (docs/reference.md#waiting-and-waking)."""
    message_id = _send(http)

    popped = http.post(POP, json={**B, "message_id": message_id, "wait_seconds": 3600})
    status = http.get(f"/api/v1/messages/{message_id}", params={**B, "wait_seconds": 61})
    below = http.post(POP, json={**B, "wait_seconds": -5})
    unasked = http.post(POP, json=B)

    assert popped.status_code == 200, popped.text
    assert popped.json()["message"]["id"] == message_id
    assert popped.headers[WAIT_SECONDS_HEADER] == "60"
    assert status.status_code == 200, status.text
    assert status.headers[WAIT_SECONDS_HEADER] == "60"
    assert below.json() == {"message": None}
    assert below.headers[WAIT_SECONDS_HEADER] == "0"
    assert unasked.headers[WAIT_SECONDS_HEADER] == "0"


def test_a_send_wakes_a_pop_parked_by_the_official_mcp_client(
    live_server: LiveServer, parks: Parks, projects: Any
) -> None:
    async def scenario(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        answers: dict[str, dict[str, Any]] = {}

        async def pop() -> None:
            answers["pop"] = await ok(client, "memory_message_pop", {**B, "wait_seconds": 30})

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(pop)
            await anyio.to_thread.run_sync(parks.until, 1)
            answers["send"] = await ok(client, "memory_message_send", SEND)
        return answers["pop"], answers["send"]

    popped, sent = with_client(live_server, "auto", scenario)

    assert popped["message"]["id"] == sent["message_id"]
    assert popped["message"]["body"] == SEND["body"]


def test_mcp_refuses_a_wait_seconds_that_is_not_an_integer(
    live_server: LiveServer, projects: Any
) -> None:
    async def scenario(client: Client) -> list[bool]:
        pop = await client.call_tool("memory_message_pop", {**B, "wait_seconds": "soon"})
        status = await client.call_tool(
            "memory_message_status",
            {**B, "message_id": "01900000-0000-7000-8000-000000000000", "wait_seconds": 1.5},
        )
        return [pop.is_error, status.is_error]

    assert with_client(live_server, "auto", scenario) == [True, True]


@pytest.mark.slow
def test_of_many_parked_pops_each_message_goes_to_exactly_one(
    http: httpx.Client,
    background: Callable[..., Future[httpx.Response]],
    parks: Parks,
    projects: Any,
) -> None:
    parked, sent = 16, 6
    pops = [background("post", POP, json={**B, "wait_seconds": 3}) for _ in range(parked)]
    parks.until(parked)

    message_ids = {_send(http, body=f"request {n}") for n in range(sent)}

    answers = [pop.result(timeout=20).json()["message"] for pop in pops]
    claimed = Counter(answer["id"] for answer in answers if answer is not None)
    assert set(claimed) == message_ids
    assert set(claimed.values()) == {1}
    assert answers.count(None) == parked - sent
    assert not Message.objects.filter(state=Message.State.PENDING).exists()
