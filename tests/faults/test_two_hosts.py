"""Two ``ai-memory serve`` hosts on one PostgreSQL database behave as one server.

The deployment of the README: each host its own data dir and port, the same database and
the same ``SECRET_KEY``. Every call carries a bearer issued by the test process, so a
token checked on either host proves the hosts share the key. The inbox bound, the claim,
the shared slot and session ownership all live in the database, so racing clients split
across the hosts must see exactly what one host's clients see
(tests/messaging/test_concurrency.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from pytest_django.fixtures import Settings as SettingsWrapper

from messaging.limits import MAX_PENDING_PER_INBOX
from messaging.models import Message
from projects.models import Project
from projects.services import api_token_issue
from tests.conftest import SEND, B, Persona, make_project
from tests.servers import free_port, wait_healthy

pytestmark = [
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="several hosts share one database only on PostgreSQL: runs when the suite "
        "runs on PostgreSQL (DATABASE_URL=postgres://...)",
    ),
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
]

T = TypeVar("T")
SERVE = [sys.executable, "-m", "aimemory_site.cli.main", "serve"]
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


@pytest.fixture(scope="module")
def hosts(
    tmp_path_factory: pytest.TempPathFactory,
    django_db_setup: None,
) -> Iterator[list[str]]:
    """Two servers, two workers each, on the test database; their base URLs.

    Started once for the module (a boot costs seconds); the servers keep no state of
    their own, and each test's flush empties the database they share.
    """
    url = urlsplit(os.environ["DATABASE_URL"])
    database_url = urlunsplit(url._replace(path=f"/{connection.settings_dict['NAME']}"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI_MEMORY_")}
    env |= {"DATABASE_URL": database_url, "SECRET_KEY": settings.SECRET_KEY}
    processes: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    logs: list[Path] = []
    try:
        for host in ("host-1", "host-2"):
            port = free_port()
            data_dir = tmp_path_factory.mktemp(host)
            # A file, not a pipe: nobody reads the access log while the tests run.
            logs.append(data_dir / "server.log")
            with logs[-1].open("wb") as log:
                processes.append(
                    subprocess.Popen(
                        [*SERVE, "--bind", f"127.0.0.1:{port}", "--workers", "2"],
                        env={**env, "AI_MEMORY_DATA_DIR": str(data_dir)},
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
            urls.append(f"http://127.0.0.1:{port}")
        for base_url, process, log_path in zip(urls, processes, logs, strict=True):
            try:
                assert wait_healthy(f"{base_url}/healthz", process) == 200
            except AssertionError as failure:
                raise AssertionError(f"{failure}\n{log_path.read_text()[-4000:]}") from None
        yield urls
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)


def run_across(
    hosts: list[str], count: int, work: Callable[[int, httpx.Client], T], token: str
) -> list[T]:
    """Run ``work`` in ``count`` threads, alternately on each host, all released at once."""
    barrier = threading.Barrier(count)

    def one(i: int) -> T:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=hosts[i % len(hosts)], headers=headers, timeout=120) as client:
            barrier.wait()
            return work(i, client)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


def test_300_sends_racing_across_two_hosts_admit_exactly_256(
    hosts: list[str], alice: Persona
) -> None:
    make_project(alice, "default", "project-a")
    make_project(alice, "default", "project-b")

    def send_ten(i: int, client: httpx.Client) -> list[tuple[int, int, Any]]:
        out = []
        for j in range(10):
            response = client.post("/api/v1/messages", json={**SEND, "body": f"req {i}.{j}"})
            out.append((i % 2, response.status_code, response.json()))
        return out

    results = [r for batch in run_across(hosts, 30, send_ten, alice.token) for r in batch]

    statuses = Counter(status for _, status, _ in results)
    assert statuses == {201: MAX_PENDING_PER_INBOX, 409: 300 - MAX_PENDING_PER_INBOX}
    assert {host for host, status, _ in results if status == 201} == {0, 1}
    refusals = [body for _, status, body in results if status == 409]
    assert all(body["code"] == "inbox_full" and "full" in body["detail"] for body in refusals)
    accepted = {body["message_id"] for _, status, body in results if status == 201}
    assert {str(pk) for pk in Message.objects.values_list("pk", flat=True)} == accepted
    assert Message.objects.filter(state=Message.State.PENDING).count() == MAX_PENDING_PER_INBOX


def test_sixteen_poppers_across_two_hosts_claim_each_message_once(
    hosts: list[str], alice: Persona
) -> None:
    sender = make_project(alice, "default", "project-a")
    recipient = make_project(alice, "default", "project-b")
    Message.objects.bulk_create(
        Message(to_project=recipient, from_project=sender, body=f"request {i}")
        for i in range(MAX_PENDING_PER_INBOX)
    )

    def pop_until_empty(i: int, client: httpx.Client) -> list[tuple[int, str]]:
        popped: list[tuple[int, str]] = []
        while True:
            response = client.post("/api/v1/messages/pop", json=B)
            assert response.status_code == 200, response.text
            message = response.json()["message"]
            if message is None:
                return popped
            popped.append((i % 2, message["id"]))

    results = [r for batch in run_across(hosts, 16, pop_until_empty, alice.token) for r in batch]

    popped = [message_id for _, message_id in results]
    assert len(popped) == MAX_PENDING_PER_INBOX
    assert len(set(popped)) == MAX_PENDING_PER_INBOX
    assert {host for host, _ in results} == {0, 1}
    claimed = Message.objects.filter(state=Message.State.CLAIMED).values_list("pk", flat=True)
    assert {str(pk) for pk in claimed} == set(popped)
    assert not Message.objects.filter(state=Message.State.PENDING).exists()


def _session_start(base_url: str, token: str, project: str, session_id: str) -> httpx.Response:
    return httpx.post(
        f"{base_url}/api/v1/sessions",
        json={"workspace": "default", "project": project, "session_id": session_id},
        headers={"Authorization": f"Bearer {token}"},
    )


def _inferred_scope(base_url: str, token: str) -> dict[str, Any]:
    """What an MCP list with no scope and no session id resolves to on ``base_url``."""
    response = httpx.post(
        f"{base_url}/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "memory_message_list", "arguments": {}},
        },
        headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text
    structured: dict[str, Any] = response.json()["result"]["structuredContent"]
    return {"source": structured["scope_source"], **structured["resolved_scope"]}


def test_a_session_started_on_one_host_is_the_shared_slot_on_the_other(
    hosts: list[str], alice: Persona
) -> None:
    first, second = hosts
    assert _session_start(first, alice.token, "project-x", "sess-1").status_code == 200

    assert _inferred_scope(second, alice.token) == {
        "source": "shared_slot",
        "workspace": "default",
        "project": "project-x",
    }

    assert _session_start(second, alice.token, "project-y", "sess-2").status_code == 200

    assert _inferred_scope(first, alice.token)["project"] == "project-y"


def test_a_session_id_registered_on_one_host_is_taken_on_the_other(
    hosts: list[str], alice: Persona, bob: Persona
) -> None:
    first, second = hosts
    assert _session_start(first, alice.token, "project-x", "sess-1").status_code == 200

    response = _session_start(second, bob.token, "project-z", "sess-1")

    assert response.status_code == 409
    assert response.json()["code"] == "session_taken"
    assert not Project.objects.filter(name="project-z").exists()


def test_a_token_keyed_with_another_secret_key_is_refused_on_both_hosts(
    hosts: list[str], alice: Persona, settings: SettingsWrapper
) -> None:
    """Why every host needs the same SECRET_KEY: a token stored by a host with another
    key (as the test process does here) verifies nowhere else."""
    dave = User.objects.create_user(username="dave")
    settings.SECRET_KEY = "a-host-that-was-given-another-secret-key-0123456789"
    _, key = api_token_issue(user=dave, name="elsewhere")

    for base_url in hosts:
        assert _session_start(base_url, alice.token, "project-x", "sess-1").status_code == 200
        response = _session_start(base_url, key, "project-x", "sess-dave")
        assert response.status_code == 401, response.text
