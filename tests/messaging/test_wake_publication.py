"""On PostgreSQL a send or a claim publishes its topic only when a call may wait on it:
its own statement asks (docs/hot-path.md#serving-parked-calls). With the process's real
transport installed; across processes and hosts: tests/test_wait_serving.py."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connection

from aimemory_site.lib import wake_transport, wakeups
from aimemory_site.lib.principal import Principal
from messaging.models import Message
from messaging.selectors import message_status
from messaging.services import message_pop, message_send
from projects.models import Project
from tests.conftest import Parks, make_project

pytestmark = pytest.mark.django_db(transaction=True)

ANYONE = Principal.anonymous()


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The topics this process hands its PostgreSQL transport, which is installed as
    ``ai-memory serve`` installs it."""
    if connection.vendor != "postgresql":
        pytest.skip("the statement asks PostgreSQL whether anyone listens")
    monkeypatch.setattr(wakeups, "_registry", wakeups._Registry())
    installed = wake_transport._PostgresTransport()
    topics: list[str] = []
    lock = threading.Lock()

    def send(published: frozenset[str], publication: int | None) -> None:
        with lock:
            topics.extend(published)
        installed.send(published, publication)

    monkeypatch.setattr(wakeups, "_transport", send)
    monkeypatch.setattr(wakeups, "_listen", installed.listen)
    monkeypatch.setattr(wakeups, "_unlisten", installed.unlisten)
    monkeypatch.setattr(wakeups, "_unheard_sql", wake_transport.unheard_sql)
    yield topics
    installed.stop()


@pytest.fixture
def projects(transactional_db: None) -> tuple[Project, Project]:
    return make_project(None, "default", "project-a"), make_project(None, "default", "project-b")


@pytest.fixture
def background() -> Iterator[Callable[..., Future[Any]]]:
    with ThreadPoolExecutor(max_workers=2) as pool:

        def start(call: Callable[[], Any]) -> Future[Any]:
            def in_its_thread() -> Any:
                try:
                    return call()
                finally:
                    connection.close()  # the thread's own, before the test's flush

            return pool.submit(in_its_thread)

        yield start


def _send() -> Message:
    return message_send(
        principal=ANYONE,
        to_workspace="default",
        to_project="project-b",
        from_workspace="default",
        from_project="project-a",
        body="hello",
    ).message


def _pop(wait_seconds: int = 0) -> Message | None:
    return message_pop(
        principal=ANYONE, workspace="default", project="project-b", wait_seconds=wait_seconds
    )


def test_a_send_to_an_inbox_no_call_waits_on_publishes_nothing(
    published: list[str], projects: Any
) -> None:
    _send()
    assert published == []


def test_a_send_to_an_inbox_a_call_waits_on_publishes_it_and_wakes_the_call(
    published: list[str],
    projects: tuple[Project, Project],
    parks: Parks,
    background: Callable[..., Future[Any]],
) -> None:
    popping = background(lambda: _pop(wait_seconds=30))
    parks.until(1)

    sent = _send()

    claimed = popping.result(timeout=10)
    assert claimed is not None and claimed.id == sent.id
    assert published == [wakeups.inbox_topic(projects[1].pk)]


def test_a_claim_of_a_message_no_call_waits_on_publishes_nothing(
    published: list[str], projects: Any
) -> None:
    _send()
    claimed = _pop()
    assert claimed is not None
    assert published == []


def test_a_claim_of_a_message_a_status_waits_on_publishes_it_and_answers_the_status(
    published: list[str], projects: Any, parks: Parks, background: Callable[..., Future[Any]]
) -> None:
    sent = _send()
    waiting = background(
        lambda: message_status(
            principal=ANYONE,
            workspace="default",
            project="project-a",
            message_id=str(sent.id),
            wait_seconds=30,
        )
    )
    parks.until(1)

    claimed = _pop()

    assert claimed is not None and claimed.id == sent.id
    assert waiting.result(timeout=10).state == Message.State.CLAIMED
    assert published == [wakeups.message_topic(sent.id)]
