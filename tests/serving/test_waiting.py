"""Parked calls as ``ai-memory serve`` serves them (docs/reference.md#waiting-and-waking):
woken across worker processes and, on PostgreSQL, across hosts of one database; answered
at once on SIGTERM; claiming nothing once their client has gone; and never stopping the
other requests, nor letting clients that trickle their requests in stop them.

Each server runs two single-threaded worker processes (SQLite's default shape). A parked
call in another process cannot be watched from here, so where a call must be parked
before the write that wakes it, the test gives it ``PARK_SECONDS`` to get there: a call
that is slower to park only makes the test easier to pass, never fail.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from aimemory_site.lib.db_spares import SPARES_KEPT
from tests.conftest import SEND
from tests.servers import (
    RawConnection,
    children,
    fresh_postgres_database,
    serving,
    serving_process,
    wait_for_workers,
)

pytestmark = pytest.mark.slow

POSTGRES = os.environ.get("DATABASE_URL", "").startswith("postgres")
PARK_SECONDS = 0.5
#: A wake reaches its call well within this here (the target is 100 ms at the p99,
#: measured by bench/); a loaded test machine needs the slack.
WAKE_SECONDS = 2.0
TWO_WORKERS = ("--workers", "2")


@dataclass
class Served:
    port: int
    workers: set[int]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(
        tmp_path_factory.mktemp("data"), *TWO_WORKERS, database_prefix="aimemory_wait"
    ) as (port, proc):
        wait_for_workers(proc.pid, 2)
        yield Served(port, children(proc.pid))


def _inbox(url: str, project: str) -> dict[str, str]:
    """Make ``default/<project>`` (a session start) and return its scope."""
    scope = {"workspace": "default", "project": project}
    answer = httpx.post(f"{url}/api/v1/sessions", json={**scope, "session_id": f"s-{project}"})
    assert answer.status_code == 200, answer.text
    return scope


def _send(url: str, to_project: str, **extra: str) -> str:
    _inbox(url, SEND["from_project"])
    answer = httpx.post(f"{url}/api/v1/messages", json={**SEND, "to_project": to_project, **extra})
    assert answer.status_code == 201, answer.text
    message_id: str = answer.json()["message_id"]
    return message_id


def _post(connection: RawConnection, path: str, payload: dict[str, Any]) -> None:
    """Send a JSON POST on ``connection`` without waiting for its answer."""
    body = json.dumps(payload).encode()
    head = connection.head(
        "POST", path, {"Content-Type": "application/json", "Content-Length": str(len(body))}
    )
    connection.send(head + body)


def _held_by(served: Served, connection: RawConnection) -> int:
    """The worker process holding ``connection`` (once it has taken it)."""
    client_port = connection.sock.getsockname()[1]
    deadline = time.monotonic() + 10
    while (pid := serving_process(served.port, client_port, served.workers)) is None:
        assert time.monotonic() < deadline, "no worker took the connection"
        time.sleep(0.01)  # another process's accept: /proc is all there is to watch
    return pid


def _park_pop(port: int, scope: dict[str, str], wait_seconds: int = 30) -> RawConnection:
    connection = RawConnection(port)
    _post(connection, "/api/v1/messages/pop", {**scope, "wait_seconds": wait_seconds})
    return connection


def test_a_send_in_one_worker_wakes_a_pop_parked_in_the_other(served: Served) -> None:
    sender = RawConnection(served.port)
    parked: list[RawConnection] = []
    try:
        sender.send(sender.head("GET", "/healthz", {}))
        assert sender.answer().status == 200
        sending_worker = _held_by(served, sender)
        # New connections go to either worker: park until one is in the other.
        for attempt in range(20):
            scope = _inbox(served.url, f"wake-{attempt}")
            parked.append(_park_pop(served.port, scope))
            if _held_by(served, parked[-1]) != sending_worker:
                break
        else:
            pytest.fail("every parked pop went to the sending worker")
        time.sleep(PARK_SECONDS)  # see the module docstring

        body = json.dumps({**SEND, "to_project": scope["project"]}).encode()
        _inbox(served.url, SEND["from_project"])
        sender.send(
            sender.head(
                "POST",
                "/api/v1/messages",
                {"Content-Type": "application/json", "Content-Length": str(len(body))},
            )
            + body
        )
        sent_at = time.monotonic()
        assert sender.answer().status == 201

        popped = parked[-1].answer()
        assert time.monotonic() - sent_at < WAKE_SECONDS
        assert popped.json()["message"]["body"] == SEND["body"]
        # The woken call's run again answers the wait it was given.
        assert popped.headers["x-memory-wait-seconds"] == "30"
    finally:
        for connection in (sender, *parked):
            connection.close()


def test_a_pop_whose_client_has_gone_claims_nothing(served: Served) -> None:
    scope = _inbox(served.url, "gone")
    _park_pop(served.port, scope).close()

    message_id = _send(served.url, "gone")

    # A status that waits ends at once if the message is claimed: it must not be.
    status = httpx.get(
        f"{served.url}/api/v1/messages/{message_id}", params={**scope, "wait_seconds": 2}
    )
    assert status.json()["state"] == "pending"
    popped = httpx.post(f"{served.url}/api/v1/messages/pop", json=scope).json()
    assert popped["message"]["id"] == message_id


def test_parked_calls_do_not_hold_the_requests_of_others(served: Served) -> None:
    """More parked calls than the server has threads, and it still answers at once."""
    scopes = [_inbox(served.url, f"idle-{n}") for n in range(8)]
    parked = [_park_pop(served.port, scope) for scope in scopes]
    try:
        time.sleep(PARK_SECONDS)  # see the module docstring
        started = time.monotonic()
        assert httpx.get(f"{served.url}/healthz", timeout=5).status_code == 200
        message_id = _send(served.url, "idle-0")
        popped = parked[0].answer()
        assert popped.json()["message"]["id"] == message_id
        assert time.monotonic() - started < WAKE_SECONDS
    finally:
        for connection in parked:
            connection.close()


def test_clients_trickling_their_requests_in_do_not_stop_the_server(served: Served) -> None:
    """20 clients each send a byte of their request every 2 s (never stalled long enough
    for AI_MEMORY_CLIENT_TIMEOUT): they hold no slot, so the server still answers."""
    _inbox(served.url, "trickled")
    body = json.dumps({**SEND, "to_project": "trickled"}).encode()
    trickling = [RawConnection(served.port) for _ in range(20)]
    requests = []
    for connection in trickling:
        head = connection.head(
            "POST",
            "/api/v1/messages",
            {"Content-Type": "application/json", "Content-Length": str(len(body))},
        )
        requests.append(head + body)
    stop = threading.Event()
    rounds = threading.Semaphore(0)

    def trickle() -> None:
        sent = 0
        while not stop.is_set() and sent < len(requests[0]):
            for connection, request in zip(trickling, requests, strict=True):
                connection.send(request[sent : sent + 1])
            sent += 1
            rounds.release()
            stop.wait(2)  # the clients' own pace, which is the point

    thread = threading.Thread(target=trickle)
    thread.start()
    try:
        assert rounds.acquire(timeout=10) and rounds.acquire(timeout=10)
        started = time.monotonic()
        assert httpx.get(f"{served.url}/healthz", timeout=3).status_code == 200
        answer = httpx.post(
            f"{served.url}/api/v1/messages", json={**SEND, "to_project": "trickled"}, timeout=3
        )
        assert answer.status_code == 201
        assert time.monotonic() - started < 3
    finally:
        stop.set()
        thread.join()
        for connection in trickling:
            connection.close()


def test_sigterm_answers_every_parked_call_within_two_seconds(tmp_path: Path) -> None:
    with serving(tmp_path / "data", *TWO_WORKERS, database_prefix="aimemory_wait_term") as (
        port,
        proc,
    ):
        url = f"http://127.0.0.1:{port}"
        watched = _inbox(url, "term-watched")
        message_id = _send(url, "term-watched")
        parked = [_park_pop(port, _inbox(url, f"term-{n}")) for n in range(3)]
        status = RawConnection(port)
        query = f"workspace=default&project={watched['project']}&wait_seconds=30"
        status.send(status.head("GET", f"/api/v1/messages/{message_id}?{query}", {}))
        parked.append(status)
        try:
            time.sleep(PARK_SECONDS)  # see the module docstring
            stopped_at = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            answers = [connection.answer() for connection in parked]
            assert time.monotonic() - stopped_at < 2
            assert proc.wait(timeout=15) == 0
        finally:
            for connection in parked:
                connection.close()
    assert [answer.json() for answer in answers[:3]] == [{"message": None}] * 3
    assert answers[3].json()["state"] == "pending"


@pytest.mark.skipif(not POSTGRES, reason="hosts share a database only on PostgreSQL")
def test_a_write_on_one_host_wakes_the_calls_parked_on_another(tmp_path: Path) -> None:
    with (
        fresh_postgres_database("aimemory_wait_hosts") as database_url,
        serving(
            tmp_path / "host-1", *TWO_WORKERS, database_prefix="", database_url=database_url
        ) as (port_1, _),
        serving(
            tmp_path / "host-2", *TWO_WORKERS, database_prefix="", database_url=database_url
        ) as (port_2, _),
        ThreadPoolExecutor(max_workers=8) as pool,
    ):
        url_1, url_2 = f"http://127.0.0.1:{port_1}", f"http://127.0.0.1:{port_2}"
        scope = _inbox(url_1, "hosts")
        pops = [
            pool.submit(
                httpx.post,
                f"{url}/api/v1/messages/pop",
                json={**scope, "wait_seconds": 5},
                timeout=30,
            )
            for url in (url_1, url_2) * 3
        ]
        time.sleep(PARK_SECONDS)  # see the module docstring
        sent = {_send(url_2, "hosts", body=f"request {n}") for n in range(3)}
        answers = [pop.result(timeout=30).json()["message"] for pop in pops]
        claimed = Counter(answer["id"] for answer in answers if answer is not None)
        assert set(claimed) == sent
        assert set(claimed.values()) == {1}

        message_id = _send(url_1, "hosts")
        status = pool.submit(
            httpx.get,
            f"{url_2}/api/v1/messages/{message_id}",
            params={**scope, "wait_seconds": 30},
            timeout=60,
        )
        time.sleep(PARK_SECONDS)
        claimed_at = time.monotonic()
        assert httpx.post(f"{url_1}/api/v1/messages/pop", json=scope).json()["message"]
        assert status.result(timeout=30).json()["state"] == "claimed"
        assert time.monotonic() - claimed_at < WAKE_SECONDS


@pytest.mark.alone
@pytest.mark.skipif(not POSTGRES, reason="counts PostgreSQL's connections")
def test_a_worker_keeps_a_bounded_number_of_database_connections(tmp_path: Path) -> None:
    """Every request runs in a greenlet of its own, which may open a connection: once
    they are answered, only ``SPARES_KEPT`` stay open for the next ones, so many
    clients never leave a process holding a connection each."""
    with (
        fresh_postgres_database("aimemory_wait_conns") as database_url,
        serving(
            tmp_path, "--workers", "1", database_prefix="",
            database_url=database_url,
        ) as (port, _),
        ThreadPoolExecutor(max_workers=40) as pool,
    ):  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        scope = _inbox(url, "crowded")

        def list_inbox(_: int) -> int:
            with httpx.Client(timeout=30) as client:
                for _ in range(3):
                    client.get(f"{url}/api/v1/messages", params=scope).raise_for_status()
            return 0

        # 40 clients at once, each request in a greenlet of the one process.
        list(pool.map(list_inbox, range(40)))
        with psycopg.connect(database_url) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
    assert row is not None
    (open_connections,) = row
    # The spares, and the wake transport's two.
    assert open_connections <= SPARES_KEPT + 2
