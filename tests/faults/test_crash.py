"""A worker killed mid-run loses and doubles nothing (issue 15, docs/reference.md#status-replies-and-retries and docs/reference.md#limits-and-faults).

``ai-memory serve --workers 3`` runs on the test PostgreSQL database while 8 senders and
8 poppers, each on its own keep-alive HTTP connection, move messages from project-a to
project-b. Twice during the run a gunicorn worker gets ``kill -9``: requests in flight die
with their connection, some after their transaction committed and before the answer was
written. The clients do what the CLI does: send the same ``idempotency_key`` or pop with
the same ``request_id`` again until an answer arrives. Every tenth call also throws its
first answer away and asks again, so a claim whose answer was lost happens on every run,
not only when a kill lands in that window.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.db import connection

from messaging.models import Message
from projects.models import Project
from tests.conftest import SEND, make_project
from tests.servers import children, free_port, wait_for_workers, wait_healthy

pytestmark = [
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="several gunicorn processes on one database: runs when the suite runs on "
        "PostgreSQL (DATABASE_URL=postgres://...)",
    ),
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
]

SENDERS = 8
POPPERS = 8
SENDS_EACH = 75
TOTAL = SENDERS * SENDS_EACH
# Senders wait while this many messages are pending, so the run never meets the inbox
# bound of 256: every send must be acknowledged, and a 409 fails the test.
BACKLOG = 128
# The kills happen once this many sends were acknowledged: a third and two thirds in.
KILL_AT = (TOTAL // 3, 2 * TOTAL // 3)
ATTEMPTS = 50  # per call; a server that never answers fails the test instead of hanging
LOST_ANSWER_EVERY = 10
POP = {"workspace": "default", "project": "project-b"}
SERVE = [sys.executable, "-m", "aimemory_site.cli.main", "serve"]
WORKERS = 3


def _test_database_url() -> str:
    """DATABASE_URL, pointed at the database pytest-django created for this run."""
    url = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(url._replace(path=f"/{connection.settings_dict['NAME']}"))


@dataclass
class Server:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text().splitlines()[-lines:])


@pytest.fixture
def server(tmp_path: Path, transactional_db: None) -> Iterator[Server]:
    """``ai-memory serve --workers 3`` on a free port, on this test's database."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI_MEMORY_")}
    env |= {
        "AI_MEMORY_DATA_DIR": str(tmp_path / "data"),
        "DATABASE_URL": _test_database_url(),
        "SECRET_KEY": settings.SECRET_KEY,
    }
    log = tmp_path / "server.log"
    # A file, not a pipe: thousands of access-log lines would fill a pipe nobody reads
    # during the run and block the workers that write them.
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*SERVE, "--bind", f"127.0.0.1:{port}", "--workers", str(WORKERS)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        running = Server(port=port, process=process, log=log)
        try:
            assert wait_healthy(f"http://127.0.0.1:{port}/healthz", process) == 200
            wait_for_workers(process.pid, WORKERS)
        except AssertionError as failure:
            raise AssertionError(f"{failure}\n{running.log_tail()}") from None
        yield running
    finally:
        # Before the database fixture's flush, so no worker holds a connection to it.
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


class Caller:
    """One client with its own keep-alive connection, asking again until answered.

    A connection error or a 5xx is no answer: the same request (the same idempotency key
    or request id) goes out again on a new connection, as the CLI's retry does.
    """

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.connection_errors = 0
        self.server_errors = 0

    def post(self, path: str, payload: dict[str, Any]) -> tuple[int, Any]:
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        for _ in range(ATTEMPTS):
            try:
                self.connection.request("POST", path, body, headers)
                response = self.connection.getresponse()
                data = response.read()
            except (http.client.HTTPException, OSError):
                self.connection.close()  # the next request opens a new connection
                self.connection_errors += 1
                continue
            if response.status >= 500:
                self.server_errors += 1
                continue
            return response.status, json.loads(data)
        raise AssertionError(f"no answer to {path} {payload} after {ATTEMPTS} attempts")

    def close(self) -> None:
        self.connection.close()


@dataclass
class Ledger:
    """What the clients were told, shared by all threads under one condition."""

    condition: threading.Condition = field(default_factory=threading.Condition)
    acknowledged: dict[str, str] = field(default_factory=dict)  # idempotency key -> id
    popped: list[tuple[str, str]] = field(default_factory=list)  # (message id, body)
    senders_done: bool = False
    aborted: bool = False  # the test failed: every client stops at its next call
    kill_due: tuple[threading.Event, ...] = field(
        default_factory=lambda: tuple(threading.Event() for _ in KILL_AT)
    )
    lost_answers_replayed: int = 0
    sends_answered_only_on_retry: int = 0

    def wait_for_room(self) -> None:
        """Hold a sender while the inbox is as full as the run lets it get."""
        with self.condition:
            self.condition.wait_for(
                lambda: len(self.acknowledged) - len(self.popped) < BACKLOG or self.aborted,
                timeout=60,
            )

    def wait_for_sends_after(self, count: int) -> None:
        """Hold a popper that found nothing until a send beyond ``count`` or the last one."""
        self.condition.wait_for(
            lambda: len(self.acknowledged) > count or self.senders_done or self.aborted,
            timeout=60,
        )

    def abort(self) -> None:
        with self.condition:
            self.aborted = True
            self.condition.notify_all()


def _send_all(sender: int, caller: Caller, ledger: Ledger) -> None:
    for n in range(SENDS_EACH):
        if ledger.aborted:
            return
        key = f"sender-{sender}-{n}"
        payload = {**SEND, "body": f"request {n} of sender {sender}", "idempotency_key": key}
        ledger.wait_for_room()
        errors_before = caller.connection_errors
        status, answer = caller.post("/api/v1/messages", payload)
        if status == 200:
            # The first attempt was stored, then its worker died before answering.
            assert caller.connection_errors > errors_before, answer
            assert answer["idempotent_replay"] is True
            with ledger.condition:
                ledger.sends_answered_only_on_retry += 1
        else:
            assert (status, answer["idempotent_replay"]) == (201, False), answer
        if n % LOST_ANSWER_EVERY == 0:
            # The first answer is lost on the way back: asking again must not send again.
            status, again = caller.post("/api/v1/messages", payload)
            assert (status, again["message_id"], again["idempotent_replay"]) == (
                200,
                answer["message_id"],
                True,
            )
        with ledger.condition:
            assert key not in ledger.acknowledged
            ledger.acknowledged[key] = answer["message_id"]
            for threshold, event in zip(KILL_AT, ledger.kill_due, strict=True):
                if len(ledger.acknowledged) >= threshold:
                    event.set()
            ledger.condition.notify_all()


def _pop_all(popper: int, caller: Caller, ledger: Ledger) -> None:
    for n in range(10 * TOTAL):
        if ledger.aborted:
            return
        with ledger.condition:
            senders_were_done = ledger.senders_done
            acknowledged_before = len(ledger.acknowledged)
        payload = {**POP, "request_id": f"popper-{popper}-{n}"}
        status, answer = caller.post("/api/v1/messages/pop", payload)
        assert status == 200, (status, answer)
        message = answer["message"]
        if message is not None and n % LOST_ANSWER_EVERY == 0:
            # The claim's answer is lost: the same request id must hand back the same
            # message, body included, and claim nothing new.
            status, again = caller.post("/api/v1/messages/pop", payload)
            assert status == 200, (status, again)
            assert (again["message"]["id"], again["message"]["body"]) == (
                message["id"],
                message["body"],
            )
            with ledger.condition:
                ledger.lost_answers_replayed += 1
        with ledger.condition:
            if message is not None:
                ledger.popped.append((message["id"], message["body"]))
                ledger.condition.notify_all()
            elif senders_were_done:
                return  # asked after the last send was acknowledged, and nothing was left
            else:
                ledger.wait_for_sends_after(acknowledged_before)
    raise AssertionError(f"popper {popper} never found its inbox empty")


def _run_clients(port: int, ledger: Ledger) -> tuple[list[Caller], ThreadPoolExecutor, Any]:
    """Start every sender and popper at once; return their callers, pool and futures."""
    callers = [Caller(port) for _ in range(SENDERS + POPPERS)]
    start = threading.Barrier(SENDERS + POPPERS)
    pool = ThreadPoolExecutor(max_workers=SENDERS + POPPERS)

    def sender(i: int) -> None:
        start.wait()
        _send_all(i, callers[i], ledger)

    def popper(i: int) -> None:
        start.wait()
        _pop_all(i, callers[SENDERS + i], ledger)

    senders = [pool.submit(sender, i) for i in range(SENDERS)]
    poppers = [pool.submit(popper, i) for i in range(POPPERS)]
    return callers, pool, (senders, poppers)


def test_killed_workers_lose_and_double_nothing(server: Server) -> None:
    sender_project = make_project(None, "default", "project-a")
    inbox = make_project(None, "default", "project-b")
    ledger = Ledger()
    callers, pool, (senders, poppers) = _run_clients(server.port, ledger)
    killed: list[int] = []
    try:
        workers = children(server.process.pid)
        for event in ledger.kill_due:
            assert event.wait(timeout=60), "the run stalled before a kill was due"
            # An original worker every time: it has been serving since the start.
            victim = min((workers - set(killed)) & children(server.process.pid))
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)
        for future in senders:
            future.result(timeout=120)
        with ledger.condition:
            ledger.senders_done = True
            ledger.condition.notify_all()
        for future in poppers:
            future.result(timeout=120)
    except BaseException:
        ledger.abort()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for caller in callers:
            caller.close()

    assert len(workers) == WORKERS
    assert len(killed) == 2
    assert not set(killed) & children(server.process.pid)
    # The kills cut live connections: without this the test proves nothing about them.
    assert sum(caller.connection_errors for caller in callers) > 0, server.log_tail()
    assert ledger.lost_answers_replayed > 0

    _assert_every_message_accounted_for(ledger, sender_project, inbox)


def _assert_every_message_accounted_for(
    ledger: Ledger, sender_project: Project, inbox: Project
) -> None:
    stored = {
        str(pk): (body, state)
        for pk, body, state in Message.objects.filter(
            from_project=sender_project, to_project=inbox
        ).values_list("pk", "body", "state")
    }
    # Every acknowledged send is stored exactly once, and nothing unacknowledged is.
    assert len(ledger.acknowledged) == TOTAL
    assert len(set(ledger.acknowledged.values())) == TOTAL
    assert set(stored) == set(ledger.acknowledged.values())
    bodies = Counter(body for body, _ in stored.values())
    assert bodies.most_common(1)[0][1] == 1, "a body was stored twice"
    for key, message_id in ledger.acknowledged.items():
        sender, n = key.removeprefix("sender-").split("-")
        assert stored[message_id][0] == f"request {n} of sender {sender}"

    # Every claimed message went to exactly one popper, with its own body; the rest wait.
    popped_ids = [message_id for message_id, _ in ledger.popped]
    assert len(popped_ids) == len(set(popped_ids)), "a message was handed out twice"
    claimed = {pk for pk, (_, state) in stored.items() if state == Message.State.CLAIMED}
    pending = {pk for pk, (_, state) in stored.items() if state == Message.State.PENDING}
    assert claimed == set(popped_ids)
    assert claimed | pending == set(stored)
    assert all(stored[message_id][0] == body for message_id, body in ledger.popped)
