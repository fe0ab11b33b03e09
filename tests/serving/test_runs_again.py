"""A call parked outside its request is run again at each wake (docs/serving.md#the-loop),
and a later run is the same call, not a new one: it is not counted again by the rate
limit, a session wait does not supersede itself, and a pop is admitted once. Against
``ai-memory serve`` as it starts, anonymous, each client on an address of its own.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import SEND
from tests.servers import RawConnection, client_from, serving

pytestmark = pytest.mark.slow

#: Each request of the set-up from an address of its own (the rate limit counts an
#: anonymous caller per address): 127.0.0.10, .11, ...
_addresses = (f"127.0.0.{n}" for n in itertools.count(10))


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    # One request an hour per caller: a parked call's later run, counted, would be a 429.
    with serving(
        tmp_path_factory.mktemp("data"),
        "--workers",
        "1",
        database_prefix="aimemory_runs",
        AI_MEMORY_RATE_LIMIT="1/hour",
    ) as (port, _):
        yield port


def _post(port: int, path: str, payload: dict[str, Any]) -> httpx.Response:
    """``payload`` POSTed from a fresh address: never refused by the rate limit."""
    with client_from(next(_addresses), timeout=30) as client:
        return client.post(f"http://127.0.0.1:{port}{path}", json=payload)


def _started(port: int, project: str, session_id: str) -> dict[str, str]:
    scope = {"workspace": "default", "project": project}
    answer = _post(port, "/api/v1/sessions", {**scope, "session_id": session_id})
    assert answer.status_code == 200, answer.text
    return scope


def _send(port: int, to_project: str) -> None:
    _started(port, SEND["from_project"], "sender-session")
    answer = _post(port, "/api/v1/messages", {**SEND, "to_project": to_project})
    assert answer.status_code == 201, answer.text


def _park(port: int, path: str, payload: dict[str, Any]) -> RawConnection:
    connection = RawConnection(port, source=next(_addresses))
    body = json.dumps(payload).encode()
    head = connection.head(
        "POST", path, {"Content-Type": "application/json", "Content-Length": str(len(body))}
    )
    connection.send(head + body)
    return connection


def _settled(port: int) -> None:
    """The call just sent has had its first look: the worker (one) answered a request
    sent after it."""
    assert _post(port, "/api/v1/sessions", {}).status_code in (400, 422)


def test_a_parked_pop_is_not_counted_again_by_the_rate_limit_when_it_wakes(port: int) -> None:
    inbox = _started(port, "rate-limited-inbox", "inbox-session")
    parked = _park(port, "/api/v1/messages/pop", {**inbox, "wait_seconds": 30})
    _settled(port)

    _send(port, "rate-limited-inbox")
    answer = parked.answer()

    assert answer.status == 200, answer.body
    assert answer.json()["message"]["body"] == SEND["body"]


def test_a_parked_session_wait_announces_mail_and_is_not_superseded_by_its_own_run(
    port: int,
) -> None:
    inbox = _started(port, "session-inbox", "waiting-session")
    parked = _park(
        port,
        "/api/v1/sessions/wait",
        {**inbox, "session_id": "waiting-session", "wait_seconds": 30},
    )
    _settled(port)

    _send(port, "session-inbox")
    answer = parked.answer()

    assert answer.status == 200, answer.body
    assert answer.json()["superseded"] is False
    assert answer.json()["new_message_count"] == 1


def test_a_newer_session_wait_still_supersedes_a_parked_one(port: int) -> None:
    inbox = _started(port, "superseded-inbox", "twice-waiting")
    wait = {**inbox, "session_id": "twice-waiting", "wait_seconds": 30}
    older = _park(port, "/api/v1/sessions/wait", wait)
    _settled(port)

    newer = _park(port, "/api/v1/sessions/wait", {**wait, "wait_seconds": 1})

    assert older.answer().json()["superseded"] is True
    assert newer.answer().json()["superseded"] is False


def test_a_pop_parked_with_a_body_sent_in_chunks_runs_again_with_that_body(port: int) -> None:
    inbox = _started(port, "chunked-inbox", "chunked-session")
    connection = RawConnection(port, source=next(_addresses))
    body = json.dumps({**inbox, "wait_seconds": 30}).encode()
    head = connection.head(
        "POST",
        "/api/v1/messages/pop",
        {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
    )
    half = len(body) // 2
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in (body[:half], body[half:]))
    connection.send(head + chunks + b"0\r\n\r\n")
    _settled(port)

    _send(port, "chunked-inbox")
    answer = connection.answer()

    assert answer.status == 200, answer.body
    assert answer.json()["message"]["body"] == SEND["body"]
