"""Session waits of one session in two worker processes of a spawned ``ai-memory serve``:
the newer supersedes the older across processes, and mail wakes the one left."""

from __future__ import annotations

import json
import queue
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SEND, A, B
from tests.servers import RawConnection, children, serving, serving_process, wait_for_workers

pytestmark = [pytest.mark.slow, pytest.mark.alone]

WAIT = {**B, "session_id": "b-1", "wait_seconds": 30}


def _post(port: int, path: str, payload: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _held_connection(port: int) -> RawConnection:
    """A connection a worker has taken (it answered one request on it) and keeps."""
    connection = RawConnection(port)
    connection.send(connection.head("GET", "/healthz", {}))
    assert connection.answer().status == 200
    return connection


def _two_workers_connections(port: int, workers: set[int]) -> tuple[RawConnection, ...]:
    """Two kept connections held by different workers (the worker that holds fewest
    takes the next connection, so this is the first pair but for a late wake-up, or a
    worker kept off the CPU a while: the background worker starts beside them)."""
    for _ in range(50):
        pair = (_held_connection(port), _held_connection(port))
        holders = {serving_process(port, c.sock.getsockname()[1], workers) for c in pair}
        if len(holders) == 2 and None not in holders:
            return pair
        for connection in pair:
            connection.close()
    raise AssertionError("no two connections went to different workers")


def test_a_newer_wait_in_another_process_supersedes_and_mail_wakes_it(tmp_path: Path) -> None:
    options = ("--workers", "2")
    with serving(tmp_path / "data", *options, database_prefix="aimemory_wake") as (port, proc):
        wait_for_workers(proc.pid, 2)
        _post(port, "/api/v1/sessions", {**A, "session_id": "a-1"})
        _post(port, "/api/v1/sessions", {**B, "session_id": "b-1"})
        first, second = _two_workers_connections(port, children(proc.pid))
        answers: queue.Queue[tuple[str, Any]] = queue.Queue()
        body = json.dumps(WAIT).encode()
        head = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        try:
            for name, connection in (("first", first), ("second", second)):
                connection.send(connection.head("POST", "/api/v1/sessions/wait", head) + body)
                threading.Thread(
                    target=lambda c=connection, n=name: answers.put((n, c.answer().json())),
                    daemon=True,
                ).start()

            # Whichever recorded its token first is the older: it ends, superseded.
            older, superseded = answers.get(timeout=20)
            _post(port, "/api/v1/messages", SEND)
            newer, woken = answers.get(timeout=20)
        finally:
            first.close()
            second.close()

    assert {older, newer} == {"first", "second"}
    assert superseded == {
        "new_message_count": 0,
        "pending_message_count": 0,
        "context": None,
        "superseded": True,
    }
    # Once seen to answer something else beside a loaded machine: say what, and the server's log.
    server_log = (tmp_path / "data" / "server.log").read_text(errors="replace")[-4000:]
    assert (woken.get("new_message_count"), woken.get("superseded")) == (1, False), (
        woken,
        server_log,
    )
