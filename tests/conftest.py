"""Shared fixtures: the personas and a JSON API caller.

alice creates and owns projects, bob holds a read grant on alice's restricted project,
charlie has no access to it at all.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.servers.basehttp import ThreadedWSGIServer
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from aimemory_site.lib import wait_caps, wakeups
from aimemory_site.lib.principal import Principal
from projects.models import Grant, Project
from projects.services import api_token_issue, project_get_or_create
from tests.mcp_raw import ERAS, RawMcp

ROOT_TOKEN = "root-token-for-tests-0123456789"

# The usual scopes of project_a (sender) and project_b (recipient), and a send between them.
A = {"workspace": "default", "project": "project-a"}
B = {"workspace": "default", "project": "project-b"}
SEND = {
    "to_workspace": "default",
    "to_project": "project-b",
    "from_workspace": "default",
    "from_project": "project-a",
    "subject": "export endpoint",
    "body": "Add a /v1/export endpoint that streams NDJSON.",
}

# The live test server listens with Django's backlog of 10, so a burst of concurrent
# connects gets resets; gunicorn's default is 2048. Give the test server room to queue.
ThreadedWSGIServer.request_queue_size = 256


# .ci/run runs the SQLite and the PostgreSQL suite side by side on two cores, and names a
# lock file both share here. A test marked ``alone`` (one that loads the whole machine with
# hundreds of connections or threads, or one whose timing such a load upsets) runs while
# no test of the other run does: it holds the file exclusively, every other test shared.
# A turnstile file in front keeps a waiting ``alone`` test from being overtaken by the
# other run's next tests. Unset (one run at a time), nothing is locked.
SIDE_BY_SIDE_LOCK = os.environ.get("AI_MEMORY_TEST_SIDE_BY_SIDE_LOCK", "")


@contextmanager
def _side_by_side_turn(alone: bool) -> Iterator[None]:
    with (
        Path(f"{SIDE_BY_SIDE_LOCK}.turnstile").open("a") as turnstile,
        Path(SIDE_BY_SIDE_LOCK).open("a") as lock,
    ):
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """Setup, call and teardown of each test in its turn with the other run's (above)."""
    if not SIDE_BY_SIDE_LOCK:
        return (yield)
    with _side_by_side_turn(alone=item.get_closest_marker("alone") is not None):
        return (yield)


@pytest.fixture(scope="session", autouse=True)
def _flush_by_delete_on_postgresql() -> Iterator[None]:
    """pytest-django empties the database after each transactional test with Django's
    ``flush``, which on PostgreSQL is one ``TRUNCATE`` of every table: about 0.2 s a
    test here (each table and index gets new files), most of what the PostgreSQL run
    took beyond SQLite's. A ``DELETE`` of the few rows a test leaves empties the same
    tables in about 0.01 s: every foreign key Django makes is deferred to the commit, so
    the order does not matter. It also takes row locks, not ``TRUNCATE``'s exclusive lock
    on every table, so a write the live server still finishes cannot deadlock it."""
    from django.db import connection

    if connection.vendor != "postgresql":
        yield
        return
    operations = type(connection.ops)
    truncate = operations.sql_flush

    def sql_flush(
        self: Any,
        style: Any,
        tables: Any,
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if reset_sequences or not tables:
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        deletes = [f"DELETE FROM {self.quote_name(table)};" for table in tables]
        return ["SET CONSTRAINTS ALL DEFERRED;", *deletes]

    patch = pytest.MonkeyPatch()
    patch.setattr(operations, "sql_flush", sql_flush)
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def _predictable_settings(settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never inherit a root token or defaults from the shell that runs them."""
    settings.AI_MEMORY_ROOT_TOKEN = ""
    settings.AI_MEMORY_ROOT_USERNAME = ""
    settings.AI_MEMORY_DEFAULT_WORKSPACE = "default"
    settings.AI_MEMORY_DEFAULT_PROJECT = "default"
    settings.AI_MEMORY_CONFIG = ""
    settings.AI_MEMORY_ADMISSION_WEBHOOKS_JSON = ""
    settings.AI_MEMORY_MESSAGE_TTL = None
    settings.AI_MEMORY_RETENTION_DAYS = None
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def auth_on(settings: SettingsWrapper) -> str:
    """Turn authentication on with a root token; return the token."""
    settings.AI_MEMORY_ROOT_TOKEN = ROOT_TOKEN
    return ROOT_TOKEN


@dataclass
class Persona:
    user: User
    token: str

    @property
    def principal(self) -> Principal:
        return Principal.for_user(self.user)


def _persona(name: str) -> Persona:
    user = User.objects.create_user(username=name, password=f"{name}-password")
    _, key = api_token_issue(user=user, name=f"{name}'s laptop")
    return Persona(user=user, token=key)


@pytest.fixture
def alice(db: None) -> Persona:
    return _persona("alice")


@pytest.fixture
def bob(db: None) -> Persona:
    return _persona("bob")


@pytest.fixture
def charlie(db: None) -> Persona:
    return _persona("charlie")


def make_project(
    owner: Persona | None, workspace: str, name: str, *, restricted: bool = False
) -> Project:
    principal = owner.principal if owner else Principal.anonymous()
    project, _ = project_get_or_create(principal=principal, workspace=workspace, project=name)
    if restricted:
        project.access_mode = Project.AccessMode.RESTRICTED
        project.save(update_fields=["access_mode"])
    return project


@pytest.fixture
def alices_restricted(alice: Persona, bob: Persona, charlie: Persona) -> Project:
    """alice's restricted project ``default/alpha``; bob reads it, charlie has nothing."""
    project = make_project(alice, "default", "alpha", restricted=True)
    Grant.objects.create(user=bob.user, project=project, level=Grant.Level.READ)
    return project


@pytest.fixture
def alices_open(alice: Persona) -> Project:
    """alice's open project ``default/commons``: every authenticated user reads and writes."""
    return make_project(alice, "default", "commons")


@pytest.fixture
def project_a(db: None) -> Project:
    """``default/project-a`` on an anonymous server: the usual sender."""
    return make_project(None, "default", "project-a")


@pytest.fixture
def project_b(db: None) -> Project:
    """``default/project-b``: the usual recipient."""
    return make_project(None, "default", "project-b")


@pytest.fixture
def project_c(db: None) -> Project:
    """``default/project-c``: a bystander that must see nothing of A's and B's mail."""
    return make_project(None, "default", "project-c")


class Parks:
    """How many calls have parked in this process since the test began (a live server's
    requests, say), and a wait for more: the barrier between "it waits" and "now wake
    it". ``event`` is set at each park; clear it to await the next."""

    def __init__(self) -> None:
        self.count = 0
        self.event = threading.Event()
        self._changed = threading.Condition()

    def entered(self) -> None:
        with self._changed:
            self.count += 1
            self.event.set()
            self._changed.notify_all()

    def until(self, count: int) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self.count >= count, timeout=10), self.count


@pytest.fixture
def wakeups_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's wake registry empty and with no transport: wakes stay in-process."""
    monkeypatch.setattr(wakeups, "_registry", wakeups._Registry())
    monkeypatch.setattr(wakeups, "_transport", None)
    monkeypatch.setattr(wakeups, "_listen", None)
    monkeypatch.setattr(wakeups, "_unlisten", None)
    monkeypatch.setattr(wait_caps, "_counts", wait_caps.WaitCounts(10_000, 200))


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(client, server) ends of a connected socket pair."""
    client, server = socket.socketpair()
    yield client, server
    client.close()
    server.close()


@pytest.fixture
def parks(monkeypatch: pytest.MonkeyPatch) -> Parks:
    seen = Parks()
    park = wakeups._park

    def counted(
        waiter: wakeups.Waiter, deadline: float, client_gone: Callable[[], bool] | None
    ) -> bool:
        seen.entered()
        return park(waiter, deadline, client_gone)

    monkeypatch.setattr(wakeups, "_park", counted)
    return seen


@pytest.fixture
def parked(parks: Parks) -> threading.Event:
    """Set when a call parks in this process; clear it to await the next park."""
    return parks.event


ApiCall = Callable[..., tuple[int, Any]]


@pytest.fixture
def api(client: Client) -> ApiCall:
    """Call the JSON API: ``api("post", "/api/v1/messages", {...}, token=...)``."""

    def call(
        method: str, path: str, payload: dict[str, Any] | None = None, *, token: str | None = None
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if method == "get":
            response = client.get(path, payload or {}, headers=headers)
        else:
            response = client.generic(
                method.upper(),
                path,
                json.dumps(payload or {}),
                content_type="application/json",
                headers=headers,
            )
        body = response.json() if response.content else None
        return response.status_code, body

    return call


@pytest.fixture(params=ERAS)
def mcp(request: pytest.FixtureRequest, client: Client) -> RawMcp:
    """A raw MCP caller, once per protocol era."""
    return RawMcp(client=client, era=request.param)


@pytest.fixture
def handshake(client: Client) -> RawMcp:
    return RawMcp(client=client, era="handshake")


@pytest.fixture
def modern(client: Client) -> RawMcp:
    return RawMcp(client=client, era="modern")
