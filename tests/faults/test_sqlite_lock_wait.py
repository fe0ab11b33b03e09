"""On SQLite, a writer that holds on gets a request a 503 in time, not a hang, and the next
request succeeds once it lets go (docs/reference.md#limits-and-faults; ``aimemory_site.backends.sqlite3``).

Two kinds of writer: one in our queue (the ``flock`` beside the database, as every server
process and command takes it) and one outside it (another program holding SQLite's own
write lock, met by the busy timeout). Both are other processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from django.db import connection, connections, transaction
from pytest_django.live_server_helper import LiveServer

from aimemory_site.db_deadline import REQUEST_DATABASE_SECONDS
from messaging.models import Message
from tests.conftest import SEND, make_project
from tests.mcp_raw import HANDSHAKE_VERSION

pytestmark = [
    pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite backend only"),
    pytest.mark.django_db(transaction=True),
]

ANSWER_BOUND_S = 5.0  # docs/reference.md#limits-and-faults

_HOLD_QUEUE_LOCK = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1] + '.writer-lock', os.O_RDWR | os.O_CREAT, 0o600)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
)
_HOLD_SQLITE_WRITE_LOCK = (
    "import sqlite3, sys\n"
    "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "db.execute('BEGIN IMMEDIATE')\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
    "db.rollback()\n"
)


@contextmanager
def _held_by_another_process(script: str) -> Iterator[None]:
    """Run ``script`` on the test database until the block ends (its stdin closes)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(connection.settings_dict["NAME"])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline() == b"held\n"
        yield
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0


def _timed_post(client: httpx.Client, path: str, body: object) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = client.post(path, json=body, headers={"MCP-Protocol-Version": HANDSHAKE_VERSION})
    return response, time.monotonic() - started


_MCP_SEND = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "memory_message_send", "arguments": SEND},
}


def test_a_send_behind_a_writer_that_holds_the_queue_is_503_in_time_then_succeeds(
    live_server: LiveServer,
) -> None:
    make_project(None, "default", "project-a")
    make_project(None, "default", "project-b")
    with httpx.Client(base_url=live_server.url, timeout=ANSWER_BOUND_S * 3) as client:
        with _held_by_another_process(_HOLD_QUEUE_LOCK):
            refused, waited = _timed_post(client, "/api/v1/messages", SEND)
            mcp_refused, mcp_waited = _timed_post(client, "/mcp", _MCP_SEND)
            # Readers do not queue behind the writer.
            listed = client.get(
                "/api/v1/messages", params={"workspace": "default", "project": "project-b"}
            )
            health = client.get("/healthz")
        sent = client.post("/api/v1/messages", json=SEND)

    assert refused.status_code == 503
    assert refused.json()["code"] == "database_unavailable"
    # It queued for its whole budget, then gave up well within the bound.
    assert REQUEST_DATABASE_SECONDS - 0.5 <= waited < ANSWER_BOUND_S
    assert mcp_refused.status_code == 503
    assert mcp_refused.json()["error"]["data"]["code"] == "database_unavailable"
    assert mcp_waited < ANSWER_BOUND_S
    assert listed.status_code == 200
    assert health.json() == {"status": "ok", "database": "sqlite"}
    assert sent.status_code == 201
    assert Message.objects.count() == 1


def test_a_send_behind_a_writer_outside_the_queue_is_503_in_time_then_succeeds(
    live_server: LiveServer,
) -> None:
    make_project(None, "default", "project-a")
    make_project(None, "default", "project-b")
    with httpx.Client(base_url=live_server.url, timeout=ANSWER_BOUND_S * 3) as client:
        with _held_by_another_process(_HOLD_SQLITE_WRITE_LOCK):
            refused, waited = _timed_post(client, "/api/v1/messages", SEND)
        sent = client.post("/api/v1/messages", json=SEND)

    assert refused.status_code == 503, refused.text
    assert json.loads(refused.text)["code"] == "database_unavailable"
    assert waited < ANSWER_BOUND_S
    assert sent.status_code == 201
    assert Message.objects.count() == 1


def test_a_transaction_outside_a_request_waits_for_the_writer_past_the_budget() -> None:
    """Migrations and management commands queue however long it takes: no budget."""
    began = threading.Event()
    failed: list[BaseException] = []

    def writer() -> None:
        try:
            with transaction.atomic():
                began.set()
        except BaseException as exc:
            failed.append(exc)
            raise
        finally:
            connections.close_all()

    thread = threading.Thread(target=writer)
    with _held_by_another_process(_HOLD_QUEUE_LOCK):
        thread.start()
        assert not began.wait(timeout=REQUEST_DATABASE_SECONDS + 1)
        assert not failed
    thread.join(timeout=30)
    assert began.is_set()
    assert not failed
