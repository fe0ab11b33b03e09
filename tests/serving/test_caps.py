"""The caps on parked calls (docs/serving.md#caps), against ``ai-memory serve`` as it
starts: a call that would pass ``AI_MEMORY_MAX_WAITS_PER_CALLER`` or ``AI_MEMORY_MAX_WAITS``
is refused at once with 429 ``too_many_waits`` and ``Retry-After`` on REST, an error
result on MCP and exit 1 on the CLI, and claims nothing; and no burst freezes the server.

The server is anonymous, so a caller is a source address: 127.0.0.1 parks up to the cap
and 127.0.0.2 is another caller.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from tests.conftest import SEND
from tests.servers import RawConnection, client_from, serving

pytestmark = pytest.mark.slow

CLI = (sys.executable, "-m", "aimemory_site.cli.main")
PER_CALLER = 3
PER_HOST = 5
INBOX = {"workspace": "default", "project": "capped"}
#: An inbox no pop is parked on, whose messages stay pending until a call claims them.
STOCKED = {"workspace": "default", "project": "stocked"}


@dataclass
class Served:
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(
        tmp_path_factory.mktemp("data"),
        "--workers",
        "2",
        database_prefix="aimemory_caps",
        AI_MEMORY_MAX_WAITS=str(PER_HOST),
        AI_MEMORY_MAX_WAITS_PER_CALLER=str(PER_CALLER),
    ) as (port, _):
        served = Served(port)
        for project in ("capped", "stocked", SEND["from_project"]):
            session = {"workspace": "default", "project": project, "session_id": f"s-{project}"}
            httpx.post(f"{served.url}/api/v1/sessions", json=session).raise_for_status()
        yield served


def _park_one(served: Served, source: str) -> RawConnection:
    """A pop sent from ``source`` to park on the inbox for up to 30 s; not yet answered."""
    body = json.dumps({**INBOX, "wait_seconds": 30}).encode()
    connection = RawConnection(served.port, source)
    head = connection.head(
        "POST",
        "/api/v1/messages/pop",
        {"Content-Type": "application/json", "Content-Length": str(len(body))},
    )
    connection.send(head + body)
    return connection


def _park(served: Served, count: int, source: str = "127.0.0.1") -> list[RawConnection]:
    """``count`` pops parked on the inbox from ``source``, for up to 30 s each, once every
    one holds its place: after them ``source``, or the host, is at its cap.

    The server takes the pops in its own time, so a probe from ``source`` tells when:
    refused, every place counted is one of these pops'. A probe that parked instead may
    have taken a place before one of them, which it then refused: that one is sent
    again."""
    parked = [_park_one(served, source) for _ in range(count)]
    deadline = time.monotonic() + 30
    with client_from(source, timeout=30) as probe:
        while True:
            for index, connection in enumerate(parked):
                if connection.answered():
                    refused = connection.answer()
                    assert refused.status == 429, (refused.status, refused.body)
                    connection.close()
                    parked[index] = _park_one(served, source)
            answer = probe.post(
                f"{served.url}/api/v1/messages/pop", json={**INBOX, "wait_seconds": 1}
            )
            if answer.status_code == 429:
                return parked
            assert time.monotonic() < deadline, "the pops never all took their places"


def _refused_once_parked(call: Any) -> Any:
    """Call ``call()`` until it is refused. The parked pops hold their places (``_park``),
    so the first call is, unless it came from a caller with room left; a few tries allow
    for a place freed and taken again meanwhile."""
    deadline = time.monotonic() + 20
    while True:
        answer = call()
        if answer is not None:
            return answer
        assert time.monotonic() < deadline, "the cap never refused"


def _pending(served: Served, inbox: dict[str, str]) -> list[str]:
    answer = httpx.get(f"{served.url}/api/v1/messages", params=inbox)
    answer.raise_for_status()
    return [message["id"] for message in answer.json()["messages"]]


def _stock(served: Served) -> str:
    """A message pending in ``STOCKED``; its id."""
    answer = httpx.post(f"{served.url}/api/v1/messages", json={**SEND, "to_project": "stocked"})
    answer.raise_for_status()
    message_id: str = answer.json()["message_id"]
    return message_id


def _answer_all(served: Served, parked: list[RawConnection]) -> None:
    """Send each parked pop a message and read its answer: its place is free once it
    has answered (closing the connections would free them later, in the server's time,
    and the next test's pops would race them)."""
    for _ in parked:
        answer = httpx.post(f"{served.url}/api/v1/messages", json={**SEND, "to_project": "capped"})
        answer.raise_for_status()
    for connection in parked:
        popped = connection.answer()
        assert popped.status == 200, (popped.status, popped.body)
        assert popped.json()["message"] is not None
        connection.close()


@pytest.fixture
def caller_at_its_cap(served: Served) -> Iterator[list[RawConnection]]:
    parked = _park(served, PER_CALLER)
    yield parked
    _answer_all(served, parked)


def test_a_caller_past_its_cap_gets_429_at_once_and_claims_nothing(
    served: Served, caller_at_its_cap: list[RawConnection]
) -> None:
    def pop() -> httpx.Response | None:
        answer = httpx.post(
            f"{served.url}/api/v1/messages/pop", json={**INBOX, "wait_seconds": 1}, timeout=30
        )
        return answer if answer.status_code == 429 else None

    refused = _refused_once_parked(pop)
    waiting = _stock(served)  # pending where this caller pops next: it must stay so
    started = time.monotonic()
    again = httpx.post(f"{served.url}/api/v1/messages/pop", json={**STOCKED, "wait_seconds": 60})

    assert time.monotonic() - started < 5  # at once, not after its 60 s
    for answer in (refused, again):
        assert answer.status_code == 429
        assert answer.json()["code"] == "too_many_waits"
        assert "wait_seconds" in answer.json()["detail"]
        assert int(answer.headers["Retry-After"]) > 0
    assert _pending(served, STOCKED) == [waiting]
    # Without wait_seconds the same caller claims it.
    popped = httpx.post(f"{served.url}/api/v1/messages/pop", json=STOCKED).json()
    assert popped["message"]["id"] == waiting


def test_a_call_without_wait_seconds_is_never_refused(
    served: Served, caller_at_its_cap: list[RawConnection]
) -> None:
    _refused_once_parked(
        lambda: (
            httpx.post(
                f"{served.url}/api/v1/messages/pop", json={**INBOX, "wait_seconds": 1}, timeout=30
            ).status_code
            == 429
            or None
        )
    )
    answer = httpx.post(f"{served.url}/api/v1/messages/pop", json=INBOX)

    assert answer.status_code == 200
    assert answer.json() == {"message": None}


def test_status_and_session_waits_count_against_the_same_cap(
    served: Served, caller_at_its_cap: list[RawConnection]
) -> None:
    message_id = _stock(served)

    def status() -> httpx.Response | None:
        answer = httpx.get(
            f"{served.url}/api/v1/messages/{message_id}",
            params={**STOCKED, "wait_seconds": 1},
            timeout=30,
        )
        return answer if answer.status_code == 429 else None

    assert _refused_once_parked(status).json()["code"] == "too_many_waits"
    session = {**INBOX, "session_id": "s-capped", "wait_seconds": 30}
    answer = httpx.post(f"{served.url}/api/v1/sessions/wait", json=session, timeout=30)
    assert answer.status_code == 429
    assert answer.json()["code"] == "too_many_waits"
    httpx.post(f"{served.url}/api/v1/messages/pop", json=STOCKED).raise_for_status()


def test_another_caller_still_parks_until_the_host_is_full(
    served: Served, caller_at_its_cap: list[RawConnection]
) -> None:
    # Answered with the caller's own when the test ends.
    caller_at_its_cap += _park(served, PER_HOST - PER_CALLER, source="127.0.0.2")
    with client_from("127.0.0.3", timeout=30) as third:

        def pop() -> httpx.Response | None:
            answer = third.post(
                f"{served.url}/api/v1/messages/pop", json={**INBOX, "wait_seconds": 1}
            )
            return answer if answer.status_code == 429 else None

        refused = _refused_once_parked(pop)
    assert refused.json()["code"] == "too_many_waits"
    assert "this server" in refused.json()["detail"]


def test_mcp_gives_an_error_result_past_the_cap(
    served: Served, caller_at_its_cap: list[RawConnection]
) -> None:
    async def pop() -> str | None:
        async with (
            httpx2.AsyncClient(timeout=30) as http,
            Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as client,
        ):
            result = await client.call_tool("memory_message_pop", {**INBOX, "wait_seconds": 1})
        if not result.is_error:
            return None
        [content] = result.content
        assert isinstance(content, TextContent)
        return content.text

    text = _refused_once_parked(lambda: anyio.run(pop))

    assert "wait_seconds" in text
    assert "retry later" in text


def test_the_cli_exits_1_past_the_cap(
    served: Served, caller_at_its_cap: list[RawConnection], tmp_path: Path
) -> None:
    env = {**os.environ, "AI_MEMORY_SERVER_URL": served.url, "HOME": str(tmp_path)}
    env.pop("AI_MEMORY_AUTH_TOKEN", None)

    def pop() -> subprocess.CompletedProcess[str] | None:
        done = subprocess.run(
            [*CLI, "message", "pop", "--workspace", "default", "--project", "capped", "--wait", "1"],
            env=env, capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        return done if done.returncode != 0 else None

    done = _refused_once_parked(pop)

    assert done.returncode == 1
    assert "wait_seconds" in done.stderr
    assert done.stdout == ""
